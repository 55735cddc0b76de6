"""report.json: the main job's figures for machines (report.py has the cells and
the text). Fixed snake_case keys with their unit in the name (`ready_printk_s`,
`irqs_to_ready`), numbers as numbers, whatever a run names (profiles, variants,
milestones, stages) as values, never as keys, paths relative to the report's
folder, and a `meta` block (command, git commit, host, date, QEMU and kernel
versions, `format_version`). report.schema.json beside this file describes it
(JSON Schema 2020-12); validate() checks a report with it."""
from __future__ import annotations

import json
import shlex
import socket
import subprocess
import sys
import xml.etree.ElementTree as ET
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Optional, Sequence

from . import entropy_report, throughput
from ..checks import measure
from ..core.paths import REPO
from ..core.bootrecord import BootRecord
from ..core.errors import BadKernel
from .report import (BLOCKED, BOOT_DOMAIN_XML, FIRST_NONBLOCK_OK, HOST_DONE, IRQS,
                     METRIC_KEYS, READY, Cell, clone_unsafe, headline, host_labels, not_ok,
                     not_ready, over_budget, relative, relative_text, run_failed, stats,
                     variant_spec)

# Its shape's version (bump it with any change of a key or its meaning), and its
# JSON Schema.
FORMAT_VERSION = 5
SCHEMA = Path(__file__).with_name("report.schema.json")
GIT_TIMEOUT_S = 30
QEMU_VERSION_TIMEOUT_S = 30


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).astimezone().isoformat(timespec="seconds")


def _git(*args: str) -> Optional[str]:
    try:
        done = subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True,
                              timeout=GIT_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return None      # no git, or a repository git does not answer for
    return done.stdout.strip() if done.returncode == 0 else None


def git_commit() -> Optional[str]:
    """The repository's commit (git rev-parse HEAD); None without git or a repository."""
    return _git("rev-parse", "HEAD") or None


def git_dirty() -> Optional[bool]:
    """Whether tracked files differ from that commit; None if git cannot say."""
    found = _git("status", "--porcelain", "--untracked-files=no")
    return None if found is None else bool(found)


def emulators(cells: Iterable[Cell]) -> dict[str, list[str]]:
    """QEMU binary -> the profiles whose boots ran on it, from each boot's domain XML."""
    found: dict[str, list[str]] = {}
    for cell in cells:
        for record in cell.records:
            try:
                path = ET.parse(record.console_log.parent / BOOT_DOMAIN_XML).getroot() \
                    .findtext("devices/emulator")
            except (OSError, ET.ParseError):
                continue
            if path and path.strip():
                profiles = found.setdefault(path.strip(), [])
                if cell.profile not in profiles:
                    profiles.append(cell.profile)
    return found


def qemu_version(emulator: str) -> Optional[str]:
    """The first line of `EMULATOR --version` on this machine; None if it cannot run."""
    try:
        done = subprocess.run([emulator, "--version"], capture_output=True, text=True,
                              timeout=QEMU_VERSION_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = done.stdout.strip().splitlines()
    return lines[0].strip() if done.returncode == 0 and lines else None


def run_meta(argv: Sequence[str], cells: Iterable[Cell],
             module: str = "benchlib.commands.run") -> dict[str, object]:
    """The part of report.json's meta block that any run can say of itself: the
    format's version, the command, the repository's commit, the host name, the date
    (ISO 8601) and the QEMU binaries and versions its boots used."""
    cells = list(cells)
    command = [sys.executable, "-m", module, *argv]
    starts = [r.started_at for c in cells for r in c.records if r.started_at]
    return {"format_version": FORMAT_VERSION, "command": command,
            "command_line": shlex.join(command), "git_commit": git_commit(),
            "git_dirty": git_dirty(), "host_name": socket.gethostname(),
            "date": datetime.now(timezone.utc).astimezone().isoformat(timespec="seconds"),
            "started": _iso(min(starts)) if starts else None,
            "qemu": [{"emulator": path, "version": qemu_version(path), "profiles": profiles}
                     for path, profiles in emulators(cells).items()]}


def _or_none(call: Any, record: BootRecord) -> Any:
    try:
        return call(record)
    except BadKernel:
        return None


def _round(value: Optional[float], places: int) -> Optional[float]:
    """A figure computed from clock readings, without the float noise of the subtraction
    (the guest's clocks give microseconds)."""
    return None if value is None else round(value, places)


def _int_or_none(value: object) -> Optional[int]:
    try:
        return int(str(value))
    except ValueError:
        return None


# When the probe reads entropy_avail (fixtures/probe.c).
ENTROPY_AVAIL_WHEN = ("start", "nonblock_ok", "end")


def boot_json(record: BootRecord, outdir: Optional[Path]) -> dict[str, object]:
    """One boot: where its logs are, what it ran, and its own figures."""
    folder = record.console_log.parent
    irqs = _or_none(measure.irqs_to_ready, record)
    ok = record.probe_event("nonblock_ok")
    avail = {p.get("when"): _int_or_none(p.get("value"))
             for p in record.probe_events("entropy_avail")}
    return {
        "name": record.name, "profile": record.profile, "variant": record.variant,
        "folder": relative(folder, outdir), "console_log": relative(record.console_log, outdir),
        "data_log": relative(record.data_log, outdir),
        "domain_xml": relative(folder / BOOT_DOMAIN_XML, outdir),
        "kernel": record.kernel, "accel": record.accel, "cmdline": record.cmdline,
        "host": record.host, "shared_host": record.shared_host, "host_slot": record.host_slot,
        "started_at_epoch_s": record.started_at, "ended_at_epoch_s": record.ended_at,
        "host_stages": [{"stage": stage, "host_s": t} for stage, t in record.stages.items()],
        "milestones": [{"name": name, "printk_s": t} for name, t in record.milestones().items()],
        "ready_printk_s": _or_none(measure.ready_printk, record),
        "irqs_to_ready": irqs.interrupts if irqs else None,
        "cpus_to_ready": irqs.cpus if irqs else None,
        "blocking_wait_s": _round(measure.blocking_wait(record), 6),
        "first_nonblock_ok_printk_s": measure.first_nonblock_ok_printk(record),
        "first_nonblock_ok_boottime_s": float(ok["t"]) if ok and "t" in ok else None,
        "credit_rate_bits_per_s": _round(measure.credit_rate(record), 3),
        "final_milestone_outcome": measure.until_outcome(record),
        "failed_tasks": [{"task": name, "rc": task.rc} for name, task in record.tasks.items()
                         if task.rc != 0],
        "entropy_avail_bits": {when: avail.get(when) for when in ENTROPY_AVAIL_WHEN},
    }


def clone_json(clone: Optional[dict[str, Any]], outdir: Optional[Path]) -> Optional[dict]:
    """The clone case's summary (benchlib/commands/clones.py) with its clones as a list and
    their logs' paths relative."""
    if clone is None:
        return None
    found = dict(clone)
    views = found.get("clones")
    if isinstance(views, dict):
        found["clones"] = [
            {"name": name, **view,
             **({"data_log": relative(view["data_log"], outdir),
                 "folder": relative(Path(str(view["data_log"])).parent, outdir)}
                if view.get("data_log") else {})}
            for name, view in views.items()]
    return found


def cell_json(cell: Cell, outdir: Optional[Path], labels: dict[str, str]) -> dict[str, object]:
    samples = {} if cell.skipped else cell.samples()
    spec = variant_spec(cell.variant)
    own = list(spec.milestones) if spec else []
    cpus = cell.cpus_to_ready()
    hosts: dict[str, int] = {}
    for record in cell.records:
        hosts[record.host] = hosts.get(record.host, 0) + 1

    def figure(name: str) -> dict[str, object]:
        return stats(samples.get(name, []), cell.boots)

    return {
        "profile": cell.profile, "variant": cell.variant, "status": cell.status(),
        "verdict": relative_text(cell.verdict(), outdir), "skipped_reason": cell.skipped,
        "failures": [relative_text(f, outdir) for f in cell.failures],
        "boot_count": cell.boots, "cap_s": cell.cap_s,
        "budget_ready_s": cell.budget_s, "budget_met": cell.budget_met(),
        METRIC_KEYS[READY]: figure(READY),
        "milestones": [{"name": name, "ready": bool(spec and name in spec.ready_milestones),
                        "final": bool(spec and name == spec.final), "printk_s": figure(name)}
                       for name in own],
        METRIC_KEYS[IRQS]: {**figure(IRQS), "cpus_max": max(cpus) if cpus else None},
        "spills_to_ready": spills_json(cell),
        METRIC_KEYS[BLOCKED]: figure(BLOCKED),
        METRIC_KEYS[FIRST_NONBLOCK_OK]: figure(FIRST_NONBLOCK_OK),
        METRIC_KEYS[HOST_DONE]: figure(HOST_DONE),
        "final_capped_boots": cell.capped(),
        "credit_rate_bits_per_s": stats(cell.credit_rates(), cell.boots),
        "shared_host_boots": cell.shared(),
        "hosts": [{"host": uri, "label": labels.get(uri, "?"), "boots": n}
                  for uri, n in hosts.items()],
        "clone_safe": cell.clone_safe, "clone": clone_json(cell.clone, outdir),
        "boots": [boot_json(r, outdir) for r in cell.records],
    }


def spills_json(cell: Cell) -> Optional[dict[str, object]]:
    """The fast-pool spills before ready by trigger, summed over the traced boots."""
    summed = None if cell.skipped else cell.spill_causes()
    if summed is None:
        return None
    causes, boots = summed
    return {"boots": boots, "of": cell.boots,
            "by_trigger": {cause.replace("-", "_"): n for cause, n in causes.items()}}


def throughput_json(rows: list[dict[str, object]]) -> Optional[dict[str, object]]:
    if not rows:
        return None
    return {"baseline": throughput.BASELINE, "max_slowdown": throughput.MAX_SLOWDOWN,
            "measures": [{"name": m.name, "profile": m.profile, "question": m.question,
                          "min_ratio": m.min_ratio, "min_boots_to_judge": m.min_boots}
                         for m in throughput.MEASURES],
            "cases": rows}


def _finite(value: Any) -> Any:
    """JSON has no infinity nor NaN: null instead, anywhere in the report."""
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def as_json(cells: list[Cell], meta: dict[str, object], outdir: Optional[Path] = None,
            throughput_rows: Optional[list[dict[str, object]]] = None,
            entropy_cells: Optional[list[entropy_report.EntropyCell]] = None,
            plots: Sequence[Path] = ()) -> dict[str, object]:
    """report.json (report.schema.json); paths relative to outdir when it is given."""
    rows = throughput_rows or []
    labels = host_labels(cells)
    return _finite({
        "meta": {"format_version": FORMAT_VERSION, **meta},
        "result": {"failed": run_failed(cells, rows), "headline": headline(cells, rows),
                   "cells": len(cells), "cells_ok": sum(c.status() == "ok" for c in cells),
                   "cells_not_ok": len(not_ok(cells)), "cells_not_ready": len(not_ready(cells)),
                   "cells_skipped": sum(bool(c.skipped) for c in cells),
                   "cells_clone_unsafe": len(clone_unsafe(cells)),
                   "throughput_cases_not_judged": len(throughput.unjudged(rows)),
                   "throughput_cases_over_budget": len(over_budget(rows))},
        "cells": [cell_json(cell, outdir, labels) for cell in cells],
        "throughput": throughput_json(rows),
        "entropy": None if entropy_cells is None else entropy_report.as_json(entropy_cells),
        "plots": [relative(p, outdir) for p in plots],
    })


def validate(data: object) -> None:
    """Check a report.json's content against report.schema.json: the most relevant
    jsonschema.ValidationError if it does not fit. Needs Debian's python3-jsonschema."""
    import jsonschema
    schema = json.loads(SCHEMA.read_text())
    validator_class = jsonschema.validators.validator_for(schema)
    validator_class.check_schema(schema)
    error = jsonschema.exceptions.best_match(validator_class(schema).iter_errors(data))
    if error is not None:
        raise error


