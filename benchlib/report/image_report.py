"""The image matrix's report: one row per cell, as text, JSON, JUnit and HTML.

Every time is guest printk time in seconds since the kernel started (the trace
and the kernel log share that clock; systemd's time stamps are put on it by the
collector's clock mark, benchlib/images/firstboot.py). A task is *blocked* when it began
waiting for the RNG before the RNG was ready; its time is from its wait's start to
its return (or to the end of the trace if it never returned).
"""
from __future__ import annotations

import html as html_escape
from pathlib import Path
from typing import Optional
from xml.etree import ElementTree as ET

from ..images.firstboot import COLLECTED_AT_DEADLINE, SEED_COMM, FirstBoot, seed_fed
from ..images.imageboot import ImageOutcome, kernel_config
from ..images.images import Recipe

FORMAT = "bench-image-report/1"
# Text report width (report.txt's rule, benchlib/report/report.py).
WIDTH = 100
# The timeline: one row per unit that ran and per blocked task, milestones as
# vertical lines.
ROW_HEIGHT_IN, MIN_HEIGHT_IN, WIDTH_IN = 0.28, 2.0, 10.0


def boot_summary(boot: FirstBoot) -> dict[str, object]:
    end = boot.trace_end
    return {
        "boot": boot.record.name,
        "folder": str(boot.record.data_log.parent),
        "ready_milestone": boot.ready_milestone,
        "ready_s": _round(boot.ready_at),
        "blocked": [{"comm": w.comm, "pid": w.pid, "unit": w.unit, "via": w.via,
                     "from_s": _round(w.started), "for_s": _round(w.duration(end)),
                     "returned": w.ended is not None} for w in boot.blocked()],
        "blocked_s": _round(sum(w.duration(end) for w in boot.blocked())),
        "milestones": {k: _round(v) for k, v in boot.milestones().items()},
        "credited_before_ready": boot.credited_before_ready(),
        "rndaddentropy": {comm: {"calls": n, "first_s": _round(t)}
                          for comm, (n, t) in boot.entropy_adds().items()},
        "seed_bytes_written": boot.pool_bytes(SEED_COMM),
        "seed_rndaddentropy": boot.added_entropy(SEED_COMM),
        "seed_credited_bits": boot.seed_credit_bits(),
        "failed_units": boot.failed_units,
        "collected_by": boot.collected_by,
        "pending_jobs": boot.pending_jobs,
        "missed_hits": boot.missed,
        "trace_end_s": _round(end),
    }


def _round(value: Optional[float]) -> Optional[float]:
    return None if value is None else round(value, 3)


def row(outcome: ImageOutcome) -> dict[str, object]:
    case = outcome.case
    _, config = kernel_config(case.variant, case.under_test)
    return {
        "image": case.recipe.name, "kernel": case.variant, "profile": case.profile.name,
        "kernel_image": str(case.kernel), "kernel_config": config,
        "first": boot_summary(outcome.first) if outcome.first else None,
        "second": boot_summary(outcome.second) if outcome.second else None,
        "seed_fed": seed_fed(outcome.first, outcome.second)
        if outcome.first and outcome.second else None,
        "failures": list(outcome.failures) + stuck_failures(outcome),
    }


def stuck_failures(outcome: ImageOutcome) -> list[str]:
    """A boot collected at its deadline, short of multi-user.target, fails its cell
    (it did not finish its first boot), saying what it still waited for."""
    said = []
    for which, boot in (("first boot", outcome.first), ("second boot", outcome.second)):
        if boot is None or boot.reached_target:
            continue
        waiting = sorted({w.unit or w.comm for w in boot.blocked() if w.ended is None})
        said.append(f"{which}: stuck: multi-user.target not reached when the trace stopped "
                    f"at {boot.trace_end:.0f} s; still blocked on randomness: "
                    f"{', '.join(waiting) or 'nobody'}")
    return said


def recipe_meta(recipe: Recipe) -> dict[str, object]:
    from ..images import images
    root = images.cached_root(recipe)
    return {"name": recipe.name, "recipe": str(recipe.path), "description": recipe.description,
            "daemons": list(recipe.daemons), "first_boot": list(recipe.first_boot),
            "root": str(root.path) if root else None,
            "packages": root.packages() if root else {}}


# --- Text ------------------------------------------------------------------------

def _when(value: object) -> str:
    return "never" if value is None else f"{value:.2f} s"


def _boot_lines(summary: dict[str, object], title: str) -> list[str]:
    milestones = summary["milestones"]
    assert isinstance(milestones, dict)
    ready, trace_end = summary["ready_s"], summary["trace_end_s"]
    late = (" (after the trace stopped, while the collector reported: outside the measured boot)"
            if isinstance(ready, float) and isinstance(trace_end, float) and ready > trace_end
            else "")
    lines = [f"  {title}: ready ({summary['ready_milestone']}) {_when(ready)}{late}; "
             f"blocked {summary['blocked_s']:.2f} s in all"]
    if summary["collected_by"] == COLLECTED_AT_DEADLINE:
        pending = summary["pending_jobs"]
        assert isinstance(pending, list)
        lines.append(f"    STUCK: multi-user.target not reached by the collector's deadline "
                     f"(trace stopped at {summary['trace_end_s']:.2f} s); "
                     f"{len(pending)} job(s) still waiting:")
        lines += [f"      {job}" for job in pending] or ["      (none listed)"]
    for name, t in milestones.items():
        lines.append(f"    {name:<20} {_when(t)}")
    blocked = summary["blocked"]
    assert isinstance(blocked, list)
    for b in blocked:
        who = b["unit"] or "-"
        still = "" if b["returned"] else " (still waiting)"
        lines.append(f"    blocked: {b['comm']}[{b['pid']}] {who} via {b['via']} "
                     f"from {b['from_s']:.2f} s for {b['for_s']:.2f} s{still}")
    if not blocked:
        lines.append("    blocked: nobody")
    credits = summary["credited_before_ready"]
    assert isinstance(credits, dict)
    said = ", ".join(f"{k} {v}" for k, v in credits.items()) or "nothing"
    adds = summary["rndaddentropy"]
    assert isinstance(adds, dict)
    for comm, add in adds.items():
        ready = summary["ready_s"]
        when = "before" if ready is None or add["first_s"] < ready else "after"
        lines.append(f"    RNDADDENTROPY: {comm} {add['calls']} call(s), the first at "
                     f"{add['first_s']:.2f} s ({when} ready)")
    missed = summary["missed_hits"]
    lower = f" (at least: the trace missed {missed})" if missed else ""
    lines.append(f"    credited before ready (bits): {said}{lower}")
    if summary["failed_units"]:
        lines.append(f"    failed units: {' '.join(summary['failed_units'])}")  # type: ignore
    return lines


def cell_lines(r: dict[str, object]) -> list[str]:
    """One cell of the report: its kernel's config, each boot, its failures."""
    out = [f"{r['image']} × {r['kernel']} × {r['profile']}"]
    out.append(f"  kernel config: {r['kernel_config']}")
    first, second = r["first"], r["second"]
    if isinstance(first, dict):
        out += _boot_lines(first, "first boot")
    if isinstance(second, dict):
        out += _boot_lines(second, "second boot (the first boot's seed file)")
        out.append(f"    seed file fed to the kernel: {'yes' if r['seed_fed'] else 'no'}"
                   f"; credited: {second['seed_credited_bits']} bits")
    for failure in r["failures"]:  # type: ignore[attr-defined]
        out.append(f"  FAILED: {failure}")
    return out


def text(rows: list[dict[str, object]], skipped: list[dict[str, object]],
         meta: dict[str, object]) -> str:
    out = ["Image first boots: who waited for randomness (guest printk seconds)", ""]
    for r in rows:
        out += cell_lines(r) + [""]
    for s in skipped:
        out.append(f"{s['image']} × {s['kernel']} × {s['profile']}: not booted: {s['why']}")
    out += ["", "Legend: blocked = began waiting for the RNG before it was ready (getrandom()",
            "without GRND_NONBLOCK, /dev/random, a kernel wait); credited: daemon NAME = its",
            "RNDADDENTROPY, hwrng = virtio-rng, jitter = the kernel's jitter entropy while a",
            "task waited, interrupts = interrupt timing."]
    return "\n".join(_wrap(line) for line in out)


def _wrap(line: str) -> str:
    """report.txt lines fit WIDTH columns: a longer line goes on, indented."""
    if len(line) <= WIDTH:
        return line
    indent = " " * (len(line) - len(line.lstrip()) + 4)
    head, rest = line[:WIDTH], line[WIDTH:]
    cut = head.rfind(" ")
    if cut > WIDTH // 2:
        head, rest = line[:cut], line[cut + 1:]
    return head + "\n" + _wrap(indent + rest)


# --- JUnit -----------------------------------------------------------------------

def junit(path: Path, rows: list[dict[str, object]], skipped: list[dict[str, object]]) -> None:
    suite = ET.Element("testsuite", name="bench-images", tests=str(len(rows) + len(skipped)),
                       failures=str(sum(1 for r in rows if r["failures"])),
                       skipped=str(len(skipped)))
    for r in [*rows, *skipped]:
        case = ET.SubElement(suite, "testcase", classname=f"images.{r['image']}",
                             name=f"{r['kernel']}.{r['profile']}")
        if "why" in r:
            ET.SubElement(case, "skipped", message=str(r["why"]))
        elif r["failures"]:
            ET.SubElement(case, "failure", message="; ".join(r["failures"]))  # type: ignore
    ET.ElementTree(suite).write(path, encoding="unicode", xml_declaration=True)


# --- HTML and the timeline plots -------------------------------------------------

def timeline(boot: FirstBoot, title: str, dest: Path) -> Path:
    """One boot's timeline: units as grey spans (start to active or exit), blocked
    waits as red bars, the ready milestone green, first-boot milestones blue."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows: list[tuple[str, float, float, str]] = []
    for unit in boot.units.values():
        end = unit.exited or unit.active
        # Targets start and become active at once: their milestone lines say it.
        if unit.started is not None and end is not None and end > unit.started:
            rows.append((unit.unit, unit.started, end, "0.75"))
    for wait in boot.blocked():
        rows.append((f"{wait.comm}[{wait.pid}] via {wait.via}", wait.started,
                     wait.duration(boot.trace_end), "tab:red"))
    height = max(MIN_HEIGHT_IN, ROW_HEIGHT_IN * (len(rows) + 3))
    figure, axes = plt.subplots(figsize=(WIDTH_IN, height))
    for y, (label, start, length_or_end, colour) in enumerate(rows):
        length = length_or_end if colour == "tab:red" else length_or_end - start
        axes.barh(y, max(length, 0.02), left=start, color=colour, height=0.6)
    axes.set_yticks(range(len(rows)), [r[0] for r in rows], fontsize=7)
    if boot.ready_at is not None:
        axes.axvline(boot.ready_at, color="tab:green", linewidth=2,
                     label=f"ready ({boot.ready_milestone}) {boot.ready_at:.2f} s")
    for name, t in boot.milestones().items():
        axes.axvline(t, color="tab:blue", linestyle="--", linewidth=1)
        axes.text(t, len(rows) - 0.4, f" {name}", fontsize=7, color="tab:blue", rotation=90,
                  va="top")
    axes.set_xlim(left=0)
    axes.set_xlabel("guest time since the kernel started (printk clock, s)")
    axes.set_title(title, fontsize=9)
    axes.legend(loc="lower right", fontsize=7)
    figure.tight_layout()
    figure.savefig(dest, dpi=90)
    plt.close(figure)
    return dest


def html(outdir: Path, outcomes: list[ImageOutcome], rows: list[dict[str, object]],
         skipped: list[dict[str, object]], meta: dict[str, object]) -> Path:
    parts = ["<!doctype html><meta charset='utf-8'><title>Image first boots</title>",
             "<h1>Image first boots: who waited for randomness</h1>",
             "<p>Times are guest printk seconds. Grey: a unit from its start to active (or its "
             "process's exit). Red: a task that began waiting for the RNG before it was ready, "
             "for as long as it waited. Green: the kernel's ready milestone. Blue: first-boot "
             "milestones (systemd's own time stamps).</p>"]
    notes = []
    for outcome, r in zip(outcomes, rows):
        title = f"{r['image']} × {r['kernel']} × {r['profile']}"
        parts.append(f"<h2>{html_escape.escape(title)}</h2>")
        block = "\n".join(_wrap(line) for line in cell_lines(r))
        parts.append(f"<pre>{html_escape.escape(block)}</pre>")
        for which, boot in (("first", outcome.first), ("second", outcome.second)):
            if boot is None:
                continue
            name = f"timeline-{r['image']}-{r['kernel']}-{r['profile']}-{which}.png"
            try:
                timeline(boot, f"{title}: {which} boot", outdir / name)
                parts.append(f"<p><img src='{name}' alt='{which} boot timeline'> "
                             f"<a href='boots/{boot.record.name}/'>logs</a></p>")
            except ImportError as exc:
                notes.append(f"timeline not drawn: {exc} (scripts/setup.sh installs "
                             "python3-matplotlib)")
    for s in skipped:
        parts.append(f"<p>{html_escape.escape(str(s['image']))} × {s['kernel']} × "
                     f"{s['profile']}: not booted: {html_escape.escape(str(s['why']))}</p>")
    parts += [f"<p>{html_escape.escape(n)}</p>" for n in dict.fromkeys(notes)]
    page = outdir / "report.html"
    page.write_text("\n".join(parts) + "\n")
    return page
