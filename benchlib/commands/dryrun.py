"""What a run of the main job would do, and about how long it would take: the
text of `bench --dry-run`. Nothing is built or booted to say it.

The time estimate says its basis. A matrix boot lasts until its variant's final
milestone or the cap, which only booting can tell: a cell (profile × variant) that
earlier runs booted (their results/<timestamp>/boots/*/record.json) is costed at
the median of those boots, adjusted to this run's cap; any other cell is given as
a range, from a boot that reaches its final milestone at once to one whose idle
guest waits the whole cap.
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
import time
from pathlib import Path
from typing import Optional

from . import clones
from ..core import paths
from ..boot import plan
from ..report import throughput
from ..boot.accel import KVM_PROBE_DEADLINE_S
from ..core.errors import BenchError, NeedsKvm
from ..boot.hosts import AUTO, host_jobs, shares_files
from ..core.profiles import Profile
from ..report.report import minutes
from ..core.variants import load as load_variant

# Assumed, host wall seconds (measured under TCG on this project's 2-core machines):
# a matrix boot that reaches its final milestone at once (domain start, kernel,
# probe, poweroff, logs: 10-16 s seen; the soak's probe-only boots, 9.3 s each).
BOOT_S = 15
# The interrupt time-stamp capture of each cell's first boot (benchlib/report/entropy.py).
ENTROPY_S = 10
# A throughput boot: a boot, then grbench's cases at 0.5 s each.
THROUGHPUT_BOOT_S = 25
MATRIX_TASK = "until"


def earlier_boots(results: Path) -> dict[tuple[str, str], list[dict]]:
    """The matrix boots of earlier runs under results/, by (profile, variant)."""
    found: dict[tuple[str, str], list[dict]] = {}
    for path in results.glob("*/boots/*/record.json"):
        try:
            record = json.loads(path.read_text())
            tasks = re.search(r"bench\.tasks=(\S+)", record["cmdline"])
            cap = re.search(r"bench\.until_cap=(\d+)", record["cmdline"])
            if not tasks or MATRIX_TASK not in tasks.group(1).split(",") or not cap:
                continue
            record["_cap_s"] = float(cap.group(1))
            record["_wall_s"] = float(record["ended_at"]) - float(record["started_at"])
            found.setdefault((record["profile"], record["variant"]), []).append(record)
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return found


def boot_cost(record: dict, cap_s: float) -> Optional[float]:
    """An earlier boot's wall time as it would be under this cap: a guest that
    waited its cap waits this one instead; one that reached its final milestone
    after this cap would stop at the cap. None when the variant is gone."""
    try:
        final = load_variant(record["variant"]).final
    except BenchError:
        return None
    wall, old_cap = record["_wall_s"], record["_cap_s"]
    reached = (record.get("milestones_printk_s") or {}).get(final)
    if reached is None:
        return max(BOOT_S, wall - old_cap + cap_s)
    return wall if reached <= cap_s else max(BOOT_S, wall - reached + cap_s)


def describe(args: argparse.Namespace, profiles: list[Profile], variants: list[str],
             uris: list[str], clone_workers: int) -> str:
    """The plan of a run with these (checked) arguments, as lines of text."""
    lines = []
    skipped: list[str] = []
    if args.accel == "auto":
        lines.append(f"accelerator: auto: decided by a probe boot at run time (up to "
                     f"{KVM_PROBE_DEADLINE_S} s); a profile it cannot run is skipped then")
    else:
        lines.append(f"accelerator: {args.accel} (--accel {args.accel})")
        for profile in profiles:
            try:
                plan.check(profile, args.accel)
            except NeedsKvm as exc:
                skipped.append(profile.name)
                lines.append(f"  {profile.name}: skipped: {exc}")
    running = [p for p in profiles if p.name not in skipped]
    cells = [(p.name, v) for p in running for v in variants]
    boots = len(cells) * args.boots
    hosts = len(uris)
    chosen = [host_jobs(uri, args.jobs_per_host) for uri in uris]
    slots = sum(jobs for jobs, _why in chosen)
    said = [why + (" (this machine's, read again at run time)"
                   if args.jobs_per_host == AUTO and shares_files(uri) else "")
            for uri, (_jobs, why) in zip(uris, chosen)]
    why = "; ".join(dict.fromkeys(said))
    lines.insert(0, f"plan: {boots} matrix boots: {len(variants)} variant(s) × "
                    f"{len(running)} profile(s) × {args.boots} boot(s)"
                    + (f" ({len(skipped)} profile(s) skipped)" if skipped else "")
                    + f", {slots} at a time on {hosts} host(s): {why}")
    lines.append(f"cap: {args.cap:g} s for an idle guest to reach its variant's final "
                 f"milestone; probe timeout {args.timeout:g} s")
    lines.append(f"output: {paths.RESULTS_DIR}/<start time, e.g. "
                 f"{time.strftime('%Y%m%d-%H%M%S')}>/")

    history = earlier_boots(paths.RESULTS_DIR)
    known: dict[tuple[str, str], float] = {}
    seen = 0
    for cell in cells:
        costs = [c for c in (boot_cost(r, args.cap) for r in history.get(cell, []))
                 if c is not None]
        if costs:
            known[cell] = statistics.median(costs)
            seen += len(costs)
    unknown = len(cells) - len(known)
    matrix_low = sum(known.values()) * args.boots + unknown * args.boots * BOOT_S
    matrix_high = matrix_low + unknown * args.boots * args.cap
    entropy = 0 if args.no_entropy else len(cells) * ENTROPY_S
    extra = KVM_PROBE_DEADLINE_S if args.accel == "auto" else 0
    extras = []
    if not args.no_clones and cells:
        batches = -(-len(cells) // clone_workers)
        extra += batches * clones.CASE_WALL_S
        extras.append(f"clone check: {len(cells)} guest(s) saved at "
                      f"{clones.LATE_SAVE_UPTIME_S} s of uptime and restored twice, "
                      f"{clone_workers} at a time")
    if throughput.compares(list(variants)) and not args.no_throughput:
        per_variant = {m.profile: throughput.boots_for(m, args.boots) for m in throughput.MEASURES}
        extra += len(variants) * sum(per_variant.values()) * THROUGHPUT_BOOT_S
        extras.append("throughput: " + " and ".join(
            f"{len(variants) * n} boot(s) of {profile}" for profile, n in per_variant.items())
            + ", one at a time")
    if extras:
        lines.append("then: " + "; ".join(extras))
    # One guest of a host boots at a time (hosts.Lease.booting): the boots' own
    # BOOT_S do not overlap on a host, only the waits do.
    serial = boots * BOOT_S / hosts
    low = extra + max(serial, (matrix_low + entropy) / slots)
    high = extra + max(serial, (matrix_high + entropy) / slots)
    span = minutes(low) if high - low < 60 else f"{minutes(low)} to {minutes(high)}"
    basis = []
    if known:
        basis.append(f"{len(known)} of {len(cells)} cell(s) costed from {seen} earlier boot(s) "
                     f"under {paths.RESULTS_DIR} (median, moved to this cap)")
    if unknown:
        basis.append(f"{unknown} cell(s) never booted here: {BOOT_S} s a boot (assumed) if "
                     f"the guest reaches its final milestone at once, {BOOT_S} s + the "
                     f"{args.cap:g} s cap if its idle guest waits the cap")
    basis.append(f"{ENTROPY_S} s of entropy capture per cell" if entropy else "no entropy capture")
    if args.accel == "auto":
        basis.append(f"the accelerator probe, up to {KVM_PROBE_DEADLINE_S} s")
    if not args.no_clones and cells:
        basis.append(f"{clones.CASE_WALL_S} s per batch of clone cases (measured)")
    if throughput.compares(list(variants)) and not args.no_throughput:
        basis.append(f"{THROUGHPUT_BOOT_S} s a throughput boot (assumed)")
    lines.append(f"estimate: about {span}, builds not counted (basis: {'; '.join(basis)})")
    return "\n".join(lines)

