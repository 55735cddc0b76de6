"""The main job's report: medians and ranges per profile and variant, a verdict for
every cell, as a table, JSON and JUnit XML, next to the boots' logs."""
from __future__ import annotations

import json
import statistics
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from . import budgets, measure
from .errors import BadKernel
from .record import BootRecord
from .variants import all_milestones

READY = "ready (printk)"
IRQS = "irqs to ready"
BLOCKED = "blocking wait (s)"
FIRST_NONBLOCK_OK = "first GRND_NONBLOCK ok (printk)"
HOST_DONE = "host wall: boot to done"
# Whether two clones of one guest saved past two minutes of uptime read different
# bytes (benchlib/clones.py): yes, no: identical for N reads, no driver.
CLONE_SAFE = "clone-safe"
OK = "ok"


@dataclass
class Cell:
    """All boots of one variant in one profile."""
    profile: str
    variant: str
    records: list[BootRecord] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    skipped: Optional[str] = None
    cap_s: Optional[float] = None       # how long boots waited for the final milestone
    budget_s: Optional[float] = None    # the profile's time-to-ready budget, if any
    clone_safe: Optional[str] = None    # the clone case's verdict, if one ran
    clone: Optional[dict[str, object]] = None   # its summary (benchlib/clones.py)

    @property
    def boots(self) -> int:
        return len(self.records) + len(self.failures)

    def samples(self) -> dict[str, list[float]]:
        found: dict[str, list[float]] = {}

        def add(name: str, value: Optional[float]) -> None:
            if value is not None:
                found.setdefault(name, []).append(value)

        for record in self.records:
            for name, t in record.milestones().items():
                add(name, t)
            add(READY, measure.ready_printk(record))
            irqs = measure.irqs_to_ready(record)
            add(IRQS, irqs.interrupts if irqs else None)
            add(BLOCKED, measure.blocking_wait(record))
            add(FIRST_NONBLOCK_OK, measure.first_nonblock_ok_printk(record))
            add(HOST_DONE, record.stages.get("done"))
        return found

    def capped(self) -> int:
        """Boots whose final milestone did not come within the cap."""
        return sum(measure.until_outcome(r) == "cap" for r in self.records)

    def verdict(self) -> str:
        """ok, or the first reason this cell is not: boot failed, task failed, no data."""
        if self.skipped:
            return f"skipped: {self.skipped}"
        if self.failures:
            return f"boot failed: {len(self.failures)}/{self.boots}: {self.failures[0]}"
        for record in self.records:
            failed = measure.failed_tasks(record)
            if failed:
                return f"task failed: {', '.join(failed)} ({record.data_log})"
        for record in self.records:
            try:
                ready = " or ".join(f"'{m}'" for m in record.spec().ready_milestones)
            except BadKernel as exc:
                return f"no data: {exc}"
            if measure.ready_printk(record) is None:
                if record.probe_event("nonblock_first"):
                    # The probe looked and the RNG never got ready: a measurement
                    # (an idle guest without entropy), but not a usable cell.
                    return (f"not ready: no {ready} in {record.name}, whose probe saw the RNG "
                            f"not ready to the end ({record.data_log})")
                return f"no data: no {ready} in {record.name} ({record.data_log})"
            if measure.irqs_to_ready(record) is None:
                return f"no data: no kprobe trace in {record.name} ({record.data_log})"
        if not self.records:
            return "no data: no boot"
        if self.budget_s is not None:
            over = budgets.judge([measure.ready_printk(r) for r in self.records], self.budget_s)
            if over:
                return f"{over} ({', '.join(str(r.console_log) for r in self.records)})"
        return OK

    def shared(self) -> int:
        """Boots that ran beside another boot on their host."""
        return sum(r.shared_host for r in self.records)

    def credit_rates(self) -> list[float]:
        return [r for r in (measure.credit_rate(rec) for rec in self.records) if r is not None]

    def cpus_to_ready(self) -> list[int]:
        return [i.cpus for i in (measure.irqs_to_ready(r) for r in self.records) if i]


def stats(values: list[float], boots: int) -> dict[str, object]:
    return {"n": len(values), "of": boots, "median": round(statistics.median(values), 3),
            "min": round(min(values), 3), "max": round(max(values), 3)}


def columns(cells: list[Cell]) -> list[str]:
    variants = list(dict.fromkeys(c.variant for c in cells if not c.skipped))
    try:
        milestones = all_milestones(variants)
    except BadKernel:
        milestones = []
    present = {name for cell in cells for name in cell.samples()}
    order = [READY, *milestones, IRQS, BLOCKED, FIRST_NONBLOCK_OK, HOST_DONE]
    # A variant's milestones get their columns even where no boot reached them.
    found = [name for name in order if name in present or name in milestones]
    return found + ([CLONE_SAFE] if any(c.clone_safe for c in cells) else [])


def cell_text(cell: Cell, name: str, samples: dict[str, list[float]]) -> str:
    if name == CLONE_SAFE:
        return cell.clone_safe or "-"
    values = samples.get(name)
    if name == IRQS and values:
        cpus = cell.cpus_to_ready()
        return (f"{statistics.median(values):.0f} [{min(values):.0f}-{max(values):.0f}] "
                f"on {max(cpus)} CPU{'s' if max(cpus) > 1 else ''} {len(values)}/{cell.boots}")
    if values:
        return (f"{statistics.median(values):.3f} [{min(values):.3f}-{max(values):.3f}] "
                f"{len(values)}/{cell.boots}{SHARED_MARK if cell.shared() else ''}")
    is_final = any(name == r.spec().final for r in cell.records[:1])
    if is_final and cell.capped() and cell.cap_s is not None:
        rates = cell.credit_rates()
        rate = f", {statistics.median(rates):.2f} bits/s credited" if rates else ""
        return f"> {cell.cap_s:.0f} s {cell.capped()}/{cell.boots}{rate}"
    return f"- 0/{cell.boots}"


def as_json(cells: list[Cell], meta: dict[str, object]) -> dict[str, object]:
    rows = []
    for cell in cells:
        rows.append({
            "profile": cell.profile, "variant": cell.variant, "skipped": cell.skipped,
            "verdict": cell.verdict(), "failures": cell.failures,
            "final_capped": cell.capped(), "cap_s": cell.cap_s, "budget_s": cell.budget_s,
            "shared_host_boots": cell.shared(),
            "credit_rate_bits_s": cell.credit_rates(),
            "cpus_to_ready": cell.cpus_to_ready(),
            "times_s": {name: stats(v, cell.boots) for name, v in cell.samples().items()},
            "clone_safe": cell.clone_safe, "clone": cell.clone,
            "boots": [r.summary() for r in cell.records],
        })
    return {"meta": meta, "cells": rows}


# Marks a cell's timings when some of its boots shared their host with another.
SHARED_MARK = "*"
SHARED_NOTE = (f"{SHARED_MARK}: some of the cell's boots ran beside another boot on their "
               "host (--jobs-per-host above 1, or another run): their times were taken on "
               "a shared machine")


def host_labels(cells: list[Cell]) -> dict[str, str]:
    """libvirt URI -> short label (h1, h2...) in order of first use."""
    uris = dict.fromkeys(r.host for c in cells for r in c.records if r.host)
    return {uri: f"h{i}" for i, uri in enumerate(uris, 1)}


def cell_hosts(cell: Cell, labels: dict[str, str]) -> str:
    """Which hosts the cell's boots ran on: 'h1×2 h2×1'."""
    counts: dict[str, int] = {}
    for record in cell.records:
        label = labels.get(record.host, "?")
        counts[label] = counts.get(label, 0) + 1
    return " ".join(f"{label}×{n}" for label, n in counts.items())


def hosts_legend(cells: list[Cell]) -> list[str]:
    labels = host_labels(cells)
    lines = [f"hosts: {' '.join(f'{label} = {uri}' for uri, label in labels.items())}"] \
        if len(labels) > 1 else []
    if any(c.shared() for c in cells):
        lines.append(SHARED_NOTE)
    return lines


LEGEND = """\
ready: the variant's own ready milestone (getrandom() stops blocking), guest printk
seconds since boot; milestones likewise, median [min-max] n/N boots reaching it;
'> C s': the idle guest had not reached it when the cap passed (credit rate seen);
'- 0/N': never printed. irqs to ready: interrupts the RNG sampled before ready,
from a kprobe armed at fs_initcall (earlier ones are not counted), and on how many
CPUs. blocking wait: how long the probe's blocking getrandom() blocked
(CLOCK_BOOTTIME). host wall: seconds since the domain was created. clone-safe: one
guest saved past two minutes of uptime and restored twice; yes: the two clones'
getrandom() reads after the restore share no 16-byte block; 'no: identical for N
reads': N blocks repeated; 'no driver': the profile gives a VM generation ID but
the kernel has no vmgenid driver (CONFIG_VMGENID)."""


def table(cells: list[Cell]) -> str:
    cols = columns(cells)
    labels = host_labels(cells)
    by_host = len(labels) > 1
    header = ["profile", "variant", *cols, *(["hosts"] if by_host else []), "verdict"]
    lines, notes = [], []
    for cell in cells:
        verdict = cell.verdict()
        if verdict != OK:
            notes.append(f"[{len(notes) + 1}] {cell.profile} × {cell.variant}: {verdict}")
            verdict = f"{verdict.split(':')[0]} [{len(notes)}]"
        hosts = [cell_hosts(cell, labels)] if by_host else []
        if cell.skipped:
            lines.append([cell.profile, cell.variant, *["" for _ in cols], *hosts, verdict])
            continue
        samples = cell.samples()
        lines.append([cell.profile, cell.variant,
                      *(cell_text(cell, name, samples) for name in cols), *hosts, verdict])
    widths = [max(len(str(r[i])) for r in [header, *lines]) for i in range(len(header))]
    out = ["  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip()
           for row in [header, *lines]]
    return "\n".join([*out, "", LEGEND, *hosts_legend(cells), *notes])


def junit(cells: list[Cell]) -> ET.ElementTree:
    suite = ET.Element("testsuite", name="bench-matrix")
    count = failures = skipped = 0
    for cell in cells:
        case = ET.SubElement(suite, "testcase", classname="matrix",
                             name=f"{cell.profile}.{cell.variant}")
        verdict = cell.verdict()
        count += 1
        if cell.skipped:
            ET.SubElement(case, "skipped", message=cell.skipped)
            skipped += 1
        elif verdict != OK:
            ET.SubElement(case, "failure", message=verdict)
            failures += 1
        ET.SubElement(case, "system-out").text = "\n".join(
            str(r.console_log) for r in cell.records)
    suite.set("tests", str(count))
    suite.set("failures", str(failures))
    suite.set("skipped", str(skipped))
    return ET.ElementTree(suite)


def write(outdir: Path, cells: list[Cell], meta: dict[str, object]) -> str:
    text = table(cells)
    (outdir / "report.txt").write_text(text + "\n")
    (outdir / "report.json").write_text(json.dumps(as_json(cells, meta), indent=2) + "\n")
    junit(cells).write(outdir / "junit.xml", encoding="unicode", xml_declaration=True)
    return text


def not_ok(cells: list[Cell]) -> list[Cell]:
    """Cells whose verdict fails the run (a skip, which names why, does not)."""
    return [c for c in cells if not c.skipped and c.verdict() != OK]
