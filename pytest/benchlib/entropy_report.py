"""The entropy table: measured min-entropy per interrupt against what each RNG credits.

Per profile × variant, from the boots that ran task `entropy_capture`:
- samples and the measured min-entropy per interrupt (SP 800-90B non-IID, the
  median over the cell's boots), with the estimator that set it;
- the variant's nominal credit per interrupt (by its variant.toml credit_rule) and
  the ratio credited / measured: above 1, the RNG credits more than was measured;
- "entropy behind" each milestone that claims bits: the interrupts the boot's
  kprobe trace saw before it (trace set armed from fs_initcall) × the measured
  bits, against the bits the design claims there. Only boots with a trace count.

What it cannot prove: the capture is taken after the boot, under the bench's serial
noise, not from the interrupts the RNG consumed before ready; a min-entropy
estimate is an upper bound on what an attacker who sees the host cannot predict.

    python3 -m benchlib.entropy_report RESULTS_DIR      # any folder of boot folders
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Optional

from . import entropy, measure
from .credit import CREDIT_RULES
from .errors import BenchError
from .profiles import get_profile
from .record import BootRecord, KmsgIncomplete, messages_from, parse_data, read_text

# Bits the design claims at a milestone; a milestone not here claims none (the
# RFC's crng_init 2 is ready on uncredited fast loads).
CLAIMED_BITS = {"crng init done": 256, "crng_init 3": 128, "initially seeded": 32,
                "minimally seeded": 128, "fully seeded": 256, "node 0 seeded": 256}
DEFAULT_CREDIT_RULE = "stock"     # a kernel the user brought is reported as stock


@dataclass
class Behind:
    milestone: str
    claimed_bits: int
    interrupts: list[int]        # per traced boot that reached the milestone
    jitter: bool = False         # the jitter generator ran before it in some boot
    on_capture: int = 0          # boots that reached it only on the capture's own noise

    def bits(self, per_irq: float) -> Optional[float]:
        return statistics.median(self.interrupts) * per_irq if self.interrupts else None


@dataclass
class EntropyCell:
    profile: str
    variant: str
    samples: int = 0
    min_entropy: list[float] = field(default_factory=list)
    limiting: list[str] = field(default_factory=list)
    credit_per_irq: Optional[float] = None
    behind: dict[str, Behind] = field(default_factory=dict)
    sources: str = "interrupts"
    deterministic: bool = False

    @property
    def measured(self) -> Optional[float]:
        return statistics.median(self.min_entropy) if self.min_entropy else None

    @property
    def ratio(self) -> Optional[float]:
        if self.measured is None or self.credit_per_irq is None:
            return None
        return self.credit_per_irq / self.measured if self.measured > 0 else float("inf")

    def also_fed(self, behind: Behind) -> str:
        others = self.sources.split(" + ")[1:] + (["the jitter generator"] if behind.jitter else [])
        return f" (also fed by {', '.join(others)})" if others else ""

    def findings(self) -> list[str]:
        found = []
        if self.deterministic and self.measured is not None:
            found.append(f"{self.profile} is deterministic (-icount): its interrupt timing is "
                         f"reproducible ({self.measured:.3f} bits measured per interrupt), so "
                         f"whatever {self.variant} credits there is credit for entropy that is "
                         "not there")
        elif self.ratio is not None and self.ratio > 1:
            found.append(f"{self.variant} credits {self.credit_per_irq:.4f} bits per interrupt in "
                         f"{self.profile}, where {self.measured:.3f} were measured: "
                         f"{self.ratio:.1f}x over-credited")
        for b in self.behind.values():
            bits = b.bits(self.measured or 0.0)
            if bits is not None and bits < b.claimed_bits:
                found.append(f"{self.variant} in {self.profile}: '{b.milestone}' claims "
                             f"{b.claimed_bits} bits; {statistics.median(b.interrupts):.0f} "
                             f"interrupts x {self.measured or 0:.3f} measured bits = {bits:.1f} "
                             f"bits stood behind it" + self.also_fed(b))
        return found


def _sources(profile: str) -> tuple[str, bool]:
    try:
        caps = get_profile(profile).caps
    except BenchError:
        return "interrupts", False
    fed = ["interrupts"] + (["virtio-rng"] if caps.virtio_rng else []) \
        + (["RDRAND"] if caps.trusted_rdrand else [])
    return " + ".join(fed), caps.deterministic


def _credit_rule(record: BootRecord) -> str:
    try:
        return record.spec().credit_rule
    except (BenchError, AttributeError, KeyError):
        return DEFAULT_CREDIT_RULE


def credit_per_irq(rule: str) -> Optional[float]:
    """Nominal credit of one interrupt under a variant's rule (benchlib/credit.py)."""
    known = CREDIT_RULES.get(rule)
    return known.bits_per_interrupt if known else None


ON_CAPTURE = (-1, False)


def _before(record: BootRecord, milestone: str) -> Optional[tuple[int, bool]]:
    """(interrupts sampled, whether the jitter generator ran) before a milestone,
    from the boot's kprobe trace; None without a trace or the milestone;
    ON_CAPTURE if it came once the capture's noise had started (the trace is
    paused during the capture: its interrupts are the bench's, not the boot's)."""
    events, t = measure.trace_events(record), record.milestone(milestone)
    if events is None or t is None:
        return None
    start = entropy.capture_start(record)
    if start is not None and t >= start:
        return ON_CAPTURE
    early = [e for e in events if e.t < t]
    return sum(e.event == "air" for e in early), any(e.event == "jitter" for e in early)


def _summary_of(record: BootRecord) -> Optional[dict[str, object]]:
    """The boot's entropy.json, made (capture stored and assessed) if not there yet."""
    found = entropy.load_summary(record.data_log.parent)
    if found is not None:
        return found
    if entropy.TASK not in record.tasks:
        return None
    try:
        entropy.collect(record)
    except (AssertionError, BenchError):
        return None
    return entropy.load_summary(record.data_log.parent)


def cells(records: Iterable[BootRecord]) -> list[EntropyCell]:
    """One EntropyCell per profile × variant of the boots given."""
    by_cell: dict[tuple[str, str], EntropyCell] = {}
    for record in records:
        key = (record.profile, record.variant)
        if key not in by_cell:
            sources, deterministic = _sources(record.profile)
            rule = _credit_rule(record)
            by_cell[key] = EntropyCell(record.profile, record.variant, sources=sources,
                                       deterministic=deterministic,
                                       credit_per_irq=credit_per_irq(rule))
        cell = by_cell[key]
        summary = _summary_of(record)
        if summary is not None and summary.get("min_entropy") is not None:
            cell.samples += int(summary["samples"])
            cell.min_entropy.append(float(summary["min_entropy"]))
            cell.limiting.append(str(summary["limiting"]))
        try:
            spec = record.spec()
            milestones = list(spec.milestones)
            reported = set(spec.ready_milestones) | {spec.final}
        except BenchError:
            milestones, reported = [], set()
        for name in (m for m in milestones if m in CLAIMED_BITS and m in reported):
            behind = cell.behind.setdefault(name, Behind(name, CLAIMED_BITS[name], []))
            found = _before(record, name)
            if found == ON_CAPTURE:
                behind.on_capture += 1
            elif found is not None:
                behind.interrupts.append(found[0])
                behind.jitter |= found[1]
    return [c for c in by_cell.values() if c.min_entropy or c.behind]


def _num(value: Optional[float], fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def table(records: Iterable[BootRecord]) -> str:
    """The entropy table and its findings, as text (for report.txt)."""
    rows = [("profile", "variant", "samples", "H_min/irq (limiting)", "credit/irq",
             "credit/H", "behind milestone: irqs x H = bits / claimed")]
    found: list[str] = []
    for cell in cells(records):
        behind = "; ".join(
            f"{b.milestone}: {statistics.median(b.interrupts):.0f} x "
            f"{_num(cell.measured, '.3f')} = {_num(b.bits(cell.measured or 0.0), '.1f')}"
            f" / {b.claimed_bits}" + (" +jitter" if b.jitter else "")
            if b.interrupts else f"{b.milestone}: " + (
                "reached only on the capture's noise" if b.on_capture else "not reached/traced")
            for b in cell.behind.values()) or "-"
        limiting = statistics.mode(cell.limiting) if cell.limiting else "-"
        rows.append((cell.profile, cell.variant, str(cell.samples),
                     f"{_num(cell.measured, '.3f')} ({limiting})",
                     _num(cell.credit_per_irq, '.4f'), _num(cell.ratio, '.2f'),
                     behind + ("" if cell.sources == "interrupts"
                               else f" [fed by {cell.sources}]")))
        found += cell.findings()
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    lines = ["Entropy per interrupt (SP 800-90B non-IID, low 8 bits of the x86-tsc delta)"]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r[:-1], widths)) + "  " + r[-1] for r in rows]
    if found:
        lines += ["", "Findings:"] + [f"- {f}" for f in found]
    lines += ["", "The capture is taken after boot under serial noise, not from the interrupts "
              "the RNG consumed before ready; min-entropy estimates are upper bounds on what "
              "an attacker who sees the host cannot predict."]
    return "\n".join(lines)


def record_from(boot_dir: Path) -> Optional[BootRecord]:
    """A BootRecord rebuilt from a boot folder's record.json and data.log."""
    meta_path = boot_dir / "record.json"
    if not meta_path.is_file():
        return None
    meta = json.loads(meta_path.read_text())
    record = BootRecord(name=meta["name"], profile=meta["profile"], variant=meta["variant"],
                        kernel=meta.get("kernel", ""), accel=meta.get("accel", ""),
                        cmdline=meta.get("cmdline", ""), console_log=boot_dir / "console.log",
                        data_log=boot_dir / "data.log")
    record.tasks, record.probe = parse_data(read_text(record.data_log))
    try:
        record.messages = messages_from(record.tasks)
    except KmsgIncomplete:
        pass
    return record


def records_under(results: Path) -> list[BootRecord]:
    found = (record_from(p.parent) for p in sorted(results.rglob("record.json")))
    return [r for r in found if r is not None]


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m benchlib.entropy_report",
                                     description="the entropy table of a results folder")
    parser.add_argument("results", type=Path, help="a results folder (any depth of boot folders)")
    args = parser.parse_args(argv)
    if not args.results.is_dir():
        print(f"entropy_report: '{args.results}' is not a folder", file=sys.stderr)
        return 2
    records = records_under(args.results)
    if not records:
        print(f"entropy_report: no boot folder (record.json) under '{args.results}'",
              file=sys.stderr)
        return 2
    print(table(records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
