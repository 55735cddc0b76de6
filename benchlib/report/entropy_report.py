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

    python3 -m benchlib.report.entropy_report RESULTS_DIR      # any folder of boot folders
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Optional

from . import entropy
from ..checks import measure
from ..checks.credit import CREDIT_RULES
from ..core.errors import BenchError
from ..core.profiles import get_profile
from ..core.bootrecord import BootRecord
from ..boot.record import KmsgIncomplete, messages_from, parse_data, read_text

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
    """Nominal credit of one interrupt under a variant's rule (benchlib/checks/credit.py)."""
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


TITLE = "Entropy per interrupt (SP 800-90B non-IID, low 8 bits of the x86-tsc delta)"
CAVEAT = ("The capture is taken after boot under serial noise, not from the interrupts the RNG "
          "consumed before ready; min-entropy estimates are upper bounds on what an attacker "
          "who sees the host cannot predict.")
# The text is wrapped to this width (report.txt: benchlib/report/report.py TEXT_WIDTH).
TEXT_WIDTH = 100
MAIN_HEADER = ("profile", "variant", "samples", "H_min/irq (limiting)", "credit/irq",
               "credit/H", "fed by")
BEHIND_HEADER = ("profile", "variant", "milestone", "irqs", "x H_min", "= bits", "/ claimed",
                 "note")


def limiting(cell: EntropyCell) -> Optional[str]:
    """The estimator that set the measured min-entropy most often."""
    return statistics.mode(cell.limiting) if cell.limiting else None


def main_rows(cell: EntropyCell) -> tuple[str, ...]:
    """A cell's row of the entropy table, as text (report.txt and report.html)."""
    return (cell.profile, cell.variant, str(cell.samples),
            f"{_num(cell.measured, '.3f')} ({limiting(cell) or '-'})",
            _num(cell.credit_per_irq, '.4f'), _num(cell.ratio, '.2f'), cell.sources)


def behind_note(behind: Behind) -> str:
    if behind.interrupts:
        return "+jitter: the jitter generator ran before it" if behind.jitter else ""
    return ("reached only on the capture's noise" if behind.on_capture
            else "not reached or not traced")


def behind_rows(cell: EntropyCell) -> list[tuple[str, ...]]:
    """A row per milestone that claims bits: interrupts before it x the measured
    min-entropy = the bits that stood behind it, against the bits it claims."""
    rows = []
    for b in cell.behind.values():
        irqs = f"{statistics.median(b.interrupts):.0f}" if b.interrupts else "-"
        bits = b.bits(cell.measured or 0.0)
        rows.append((cell.profile, cell.variant, b.milestone, irqs,
                     _num(cell.measured, '.3f') if b.interrupts else "-", _num(bits, '.1f'),
                     str(b.claimed_bits), behind_note(b)))
    return rows


def _columns(rows: list[tuple[str, ...]], right: set[int], indent: str = "") -> list[str]:
    """Padded columns; the last one wraps within TEXT_WIDTH onto lines of its own."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    start = len(indent) + sum(w + 2 for w in widths)
    room = max(TEXT_WIDTH - start, 12)
    lines = []
    for row in rows:
        head = indent + "  ".join(c.rjust(w) if i in right else c.ljust(w)
                                  for i, (c, w) in enumerate(zip(row, widths)))
        last = textwrap.wrap(row[-1], room, break_long_words=False,
                             break_on_hyphens=False) or [""]
        lines.append(f"{head}  {last[0]}".rstrip())
        lines += [" " * start + part for part in last[1:]]
    return lines


def _wrap(text: str, first: str = "", indent: str = "") -> list[str]:
    return textwrap.wrap(text, TEXT_WIDTH, initial_indent=first, subsequent_indent=indent,
                         break_long_words=False, break_on_hyphens=False)


def text(found: list[EntropyCell]) -> str:
    """The entropy tables and their findings, as text at most TEXT_WIDTH wide."""
    lines = [TITLE]
    # The sources, when there are more than interrupts, under their row: a column of
    # its own would not fit beside the longest profile names.
    table = _columns([MAIN_HEADER[:-1], *(main_rows(c)[:-1] for c in found)], {2, 4, 5})
    lines.append(table[0])
    for cell, row in zip(found, table[1:]):
        lines.append(row)
        if cell.sources != "interrupts":
            lines.append(f"    fed by {cell.sources}")
    with_behind = [c for c in found if c.behind]
    if with_behind:
        lines += ["", *_wrap("Entropy behind each milestone that claims bits: the interrupts "
                             "sampled before it (kprobe trace) x the measured H_min per interrupt "
                             "= bits, against the bits claimed:")]
        for cell in with_behind:
            lines.append(f"{cell.profile} × {cell.variant}:")
            lines += _columns([BEHIND_HEADER[2:], *(r[2:] for r in behind_rows(cell))],
                              {1, 2, 3, 4}, "  ")
    findings = [f for c in found for f in c.findings()]
    if findings:
        lines += ["", "Findings:"]
        for finding in findings:
            lines += _wrap(finding, "- ", "  ")
    return "\n".join([*lines, "", *_wrap(CAVEAT)])


def table(records: Iterable[BootRecord]) -> str:
    """The entropy table and its findings, as text (for report.txt)."""
    return text(cells(records))


def as_json(found: list[EntropyCell]) -> dict[str, object]:
    """report.json's entropy block (benchlib/report/report.schema.json)."""
    return {
        "method": TITLE, "caveat": CAVEAT,
        "cells": [{
            "profile": c.profile, "variant": c.variant, "samples": c.samples,
            "min_entropy_bits_per_irq": c.measured,
            "min_entropy_bits_per_irq_per_boot": c.min_entropy,
            "limiting_estimator": limiting(c),
            "credit_bits_per_irq": c.credit_per_irq,
            "credit_to_measured_ratio": c.ratio,
            "sources": c.sources.split(" + "), "deterministic": c.deterministic,
            "behind_milestones": [{
                "milestone": b.milestone, "claimed_bits": b.claimed_bits,
                "irqs_median": statistics.median(b.interrupts) if b.interrupts else None,
                "irqs_per_boot": b.interrupts,
                "bits": b.bits(c.measured or 0.0), "jitter": b.jitter,
                "boots_on_capture_noise": b.on_capture} for b in c.behind.values()],
            "findings": c.findings()} for c in found],
    }


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
    # A packed block that did not decode failed the boot when it ran; its other
    # tasks are still read here.
    record.tasks, record.probe = parse_data(read_text(record.data_log), str(record.data_log), [])
    try:
        record.messages = messages_from(record.tasks)
    except KmsgIncomplete:
        pass
    return record


def records_under(results: Path) -> list[BootRecord]:
    found = (record_from(p.parent) for p in sorted(results.rglob("record.json")))
    return [r for r in found if r is not None]


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m benchlib.report.entropy_report",
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
