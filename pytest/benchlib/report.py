"""The main job's report: medians and ranges per profile and variant, as a table,
JSON and JUnit XML, next to the boots' console logs."""
from __future__ import annotations

import json
import statistics
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from .record import MILESTONES, BootRecord

FIRST_NONBLOCK_OK = "first GRND_NONBLOCK ok"
HOST_DONE = "host wall: boot to done"


@dataclass
class Cell:
    """All boots of one variant in one profile."""
    profile: str
    variant: str
    records: list[BootRecord] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    skipped: Optional[str] = None

    def samples(self) -> dict[str, list[float]]:
        found: dict[str, list[float]] = {}
        for record in self.records:
            for name, t in record.milestones().items():
                found.setdefault(name, []).append(t)
            ok = first_nonblock_ok(record)
            if ok is not None:
                found.setdefault(FIRST_NONBLOCK_OK, []).append(ok)
            if "done" in record.stages:
                found.setdefault(HOST_DONE, []).append(record.stages["done"])
        return found


def first_nonblock_ok(record: BootRecord) -> Optional[float]:
    """Printk time of the probe's first successful GRND_NONBLOCK (its kmsg marker),
    on the same clock as the kernel's own RNG messages."""
    return next((t for t, text in record.kmsg() if text.startswith("bench: nonblock ok")), None)


def stats(values: list[float], boots: int) -> dict[str, object]:
    return {"n": len(values), "of": boots, "median": round(statistics.median(values), 3),
            "min": round(min(values), 3), "max": round(max(values), 3)}


# Milestones reported together: a state one boot never reached still gets its
# column ("- 0/N") once any boot printed another state of the same design.
MILESTONE_FAMILIES = [("crng_init 1", "crng_init 2", "crng_init 3")]


def columns(cells: list[Cell]) -> list[str]:
    present = {name for cell in cells for name in cell.samples()}
    for family in MILESTONE_FAMILIES:
        if present & set(family):
            present |= set(family)
    order = [*MILESTONES, FIRST_NONBLOCK_OK, HOST_DONE]
    return [name for name in order if name in present]


def as_json(cells: list[Cell], meta: dict[str, object]) -> dict[str, object]:
    rows = []
    for cell in cells:
        boots = len(cell.records) + len(cell.failures)
        rows.append({
            "profile": cell.profile, "variant": cell.variant, "skipped": cell.skipped,
            "failures": cell.failures,
            "times_s": {name: stats(v, boots) for name, v in cell.samples().items()},
            "boots": [r.summary() for r in cell.records],
        })
    return {"meta": meta, "cells": rows}


def table(cells: list[Cell]) -> str:
    """Median [min-max] seconds, n/N boots reaching it; guest printk time except host rows."""
    cols = columns(cells)
    header = ["profile", "variant", *cols]
    lines, notes = [], []
    for cell in cells:
        if cell.skipped:
            notes.append(f"[{len(notes) + 1}] {cell.profile} × {cell.variant}: {cell.skipped}")
            lines.append([cell.profile, cell.variant, f"skipped [{len(notes)}]"])
            continue
        boots = len(cell.records) + len(cell.failures)
        samples = cell.samples()
        row = [cell.profile, cell.variant]
        for name in cols:
            v = samples.get(name)
            row.append(f"{statistics.median(v):.3f} [{min(v):.3f}-{max(v):.3f}] {len(v)}/{boots}"
                       if v else f"- 0/{boots}")
        if cell.failures:
            row.append(f"{len(cell.failures)} failed")
        lines.append(row)
    widths = [max(len(str(r[i])) for r in [header, *lines] if i < len(r))
              for i in range(len(header))]
    out = ["  ".join(h.ljust(w) for h, w in zip(header, widths))]
    for row in lines:
        out.append("  ".join(str(c).ljust(widths[i]) if i < len(widths) else str(c)
                             for i, c in enumerate(row)))
    legend = ("times: guest printk seconds since boot, median [min-max] n/N boots reaching it "
              "('- 0/N': not reached before the guest powered off);\n"
              "host wall rows: seconds since the domain was created")
    return "\n".join([*out, "", legend, *notes])


def junit(cells: list[Cell]) -> ET.ElementTree:
    suite = ET.Element("testsuite", name="bench-matrix")
    count = failures = skipped = 0
    for cell in cells:
        name_base = f"{cell.profile}.{cell.variant}"
        if cell.skipped:
            case = ET.SubElement(suite, "testcase", classname="matrix", name=name_base)
            ET.SubElement(case, "skipped", message=cell.skipped)
            count, skipped = count + 1, skipped + 1
            continue
        for record in cell.records:
            case = ET.SubElement(suite, "testcase", classname=name_base, name=record.name,
                                 time=str(record.stages.get("poweroff", 0)))
            ET.SubElement(case, "system-out").text = str(record.console_log)
            count += 1
        for message in cell.failures:
            case = ET.SubElement(suite, "testcase", classname=name_base, name="boot")
            ET.SubElement(case, "failure", message=message)
            count, failures = count + 1, failures + 1
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
