"""getrandom() throughput from the guest's grbench, compared across variants.

Every variant is booted the same number of times in the same profile in one run;
a case (threads, request size) is summarised by the median of its boots' MB/s, and
each variant is reported as a ratio to the baseline variant's median.
"""
from __future__ import annotations

import statistics
from typing import Optional

from .record import BootRecord

BASELINE = "stock"
PROFILE = "tcg-virtio-rng"   # ready within a second in every variant: no waiting
TASKS = ["throughput"]
# The per-node CRNG layer may cost at most this much against stock (issue 3).
MAX_SLOWDOWN = 0.10
# Under TCG one boot's figure can be off by more than the budget (host load): the
# budget is judged on medians of at least this many boots of each variant, and
# not at all with fewer.
MIN_BOOTS_TO_JUDGE = 3

Case = tuple[int, int]        # (threads, request bytes)


def mb_per_s(records: list[BootRecord]) -> dict[Case, list[float]]:
    found: dict[Case, list[float]] = {}
    for record in records:
        for p in record.probe_events("throughput"):
            case = (int(p["threads"]), int(p["size"]))
            found.setdefault(case, []).append(int(p["bytes"]) / float(p["seconds"]) / 1e6)
    return found


def compare(by_variant: dict[str, list[BootRecord]]) -> list[dict[str, object]]:
    """One row per (variant, case): median, range and ratio to the baseline."""
    medians = {v: {c: statistics.median(x) for c, x in mb_per_s(r).items()}
               for v, r in by_variant.items()}
    rows = []
    for variant, records in by_variant.items():
        for case, samples in sorted(mb_per_s(records).items()):
            base: Optional[float] = medians.get(BASELINE, {}).get(case)
            ratio = statistics.median(samples) / base if base else None
            base_boots = len(mb_per_s(by_variant.get(BASELINE, [])).get(case, []))
            judged = ratio is not None and min(len(samples), base_boots) >= MIN_BOOTS_TO_JUDGE
            rows.append({"variant": variant, "threads": case[0], "request_bytes": case[1],
                         "median_mb_s": round(statistics.median(samples), 2),
                         "min_mb_s": round(min(samples), 2), "max_mb_s": round(max(samples), 2),
                         "boots": len(samples),
                         "ratio_to_stock": round(ratio, 3) if ratio else None,
                         "within_budget": ratio >= 1 - MAX_SLOWDOWN if judged else None})
    return rows


def judgement(row: dict[str, object]) -> str:
    """What the budget made of a row: '', 'over the 10% budget', 'not judged: ...'."""
    if row["within_budget"] is False:
        return f"over the {MAX_SLOWDOWN:.0%} budget"
    if row["within_budget"] is True:
        return "within budget"
    if row["ratio_to_stock"] is not None:
        return f"not judged: fewer than {MIN_BOOTS_TO_JUDGE} boots"
    return ""


def table(rows: list[dict[str, object]]) -> str:
    width = max([7, *(len(str(r["variant"])) for r in rows)])
    head = (f"{'variant':{width}} {'threads':>7} {'bytes':>6} {'MB/s median [min-max]':>28} "
            f"{'vs stock':>9}")
    lines = [f"getrandom() throughput in {PROFILE} (guest, TCG), per request:", head]
    for r in rows:
        spread = f"{r['median_mb_s']:.2f} [{r['min_mb_s']:.2f}-{r['max_mb_s']:.2f}]"
        ratio = "-" if r["ratio_to_stock"] is None else f"{r['ratio_to_stock']:.3f}"
        flag = judgement(r)
        flag = f"  {flag}" if flag and flag != "within budget" else ""
        lines.append(f"{r['variant']:{width}} {r['threads']:>7} {r['request_bytes']:>6} "
                     f"{spread:>28} {ratio:>9}{flag}")
    return "\n".join(lines)
