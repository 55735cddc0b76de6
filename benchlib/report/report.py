"""The main job's report: medians and ranges per profile and variant, a verdict for
every cell, next to the boots' logs, made for reading and for machines:

- report.txt: at most TEXT_WIDTH columns a line. An overview (profiles down,
  variants across: the median time to ready and the verdict), then one table per
  variant with a row per profile and figure, the legend, the verdicts' notes, and
  the entropy and throughput tables when they were made.
- report.json: the same figures for machines (benchlib/report/report_json.py).
- junit.xml: a test case per cell and per throughput case.

benchlib/report/forms.py writes the three (write()).

run_failed() is the run's verdict, as its exit code and every headline give it."""
from __future__ import annotations

import os
import statistics
import textwrap
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Iterable, Optional, Sequence

from . import budgets, entropy_report, throughput
from ..checks import measure
from ..core.errors import BadKernel
from ..core.bootrecord import BootRecord
from ..core.variants import all_milestones, load as load_variant

READY = "ready (printk)"
IRQS = "irqs to ready"
BLOCKED = "blocking wait (s)"
FIRST_NONBLOCK_OK = "first GRND_NONBLOCK ok (printk)"
HOST_DONE = "host wall: boot to done"
# What triggered the fast-pool spills before ready, summed over the cell's boots.
SPILLS = "spills to ready, by trigger"
# Whether two clones of one guest saved past two minutes of uptime read different
# bytes (benchlib/commands/clones.py): yes, no: identical for N reads, no driver.
CLONE_SAFE = "clone-safe"
# The profile's time-to-ready budget and whether the cell met it.
BUDGET = "ready budget"
VERDICT = "verdict"
OK = "ok"
# A cell whose probe watched the RNG stay not ready until the cap, in a profile with
# no time-to-ready budget: a measurement (vm-definitions/budgets.toml leaves the quiet
# profiles without a budget so that whether a variant gets ready without help is
# what they measure), reported with the interrupts that came, and not a failure. In
# a profile with a budget, the same boot fails the cell.
NOT_READY = "not ready within the cap"
# A cell whose clones (one saved guest restored twice, in a profile that gave a
# generation ID) read alike: it fails the run for the bench's own series and a
# user's kernel, and is a finding for Debian's stock 6.1 (its hazard, reported).
CLONE_UNSAFE = "clone-unsafe"
# The variant whose clone hazard is a finding, not a failure: Debian's kernel as
# shipped, which the bench measures rather than builds to a design.
DEBIAN_STOCK = "stock"
# Clone-safe verdicts that mean the clones repeated each other (benchlib/commands/clones.py).
CLONE_REPEATED = ("no: identical", "no driver")

# Figures under their report.json key; the unit is in the name (a count has none).
METRIC_KEYS = {READY: "ready_printk_s", IRQS: "irqs_to_ready", BLOCKED: "blocking_wait_s",
               FIRST_NONBLOCK_OK: "first_nonblock_ok_printk_s",
               HOST_DONE: "host_boot_to_done_s"}
# report.txt: no line wider than this (a terminal's width, with room to spare).
TEXT_WIDTH = 100
BOOT_DOMAIN_XML = "domain.xml"
BOOT_RECORD = "record.json"


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
    clone: Optional[dict[str, object]] = None   # its summary (benchlib/commands/clones.py)

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
                if not measure.watched_never_ready(record):
                    return f"no data: no {ready} in {record.name} ({record.data_log})"
                if measure.irqs_seen(record) is None:
                    return f"no data: no kprobe trace in {record.name} ({record.data_log})"
                if self.budget_s is not None:
                    # The probe looked and the RNG never got ready, where a budget
                    # asks for it: the cell fails.
                    return (f"not ready: no {ready} in {record.name}, whose probe saw the RNG "
                            f"not ready to its timeout and which waited out the cap "
                            f"({record.data_log})")
            elif measure.irqs_to_ready(record) is None:
                return f"no data: no kprobe trace in {record.name} ({record.data_log})"
        if not self.records:
            return "no data: no boot"
        never = [r for r in self.records if measure.ready_printk(r) is None]
        if never:
            return self._not_ready(never)
        if self.budget_s is not None:
            over = budgets.judge([measure.ready_printk(r) for r in self.records], self.budget_s)
            if over:
                return f"{over} ({', '.join(str(r.console_log) for r in self.records)})"
        return self._clone_verdict() or OK

    def _clone_verdict(self) -> Optional[str]:
        """What the clone check adds to the verdict, if anything: a check that could
        not compare fails the cell; clones that repeated each other where the
        profile gave a generation ID are CLONE_UNSAFE (see there)."""
        said = self.clone_safe
        if not said or not said.startswith(("not judged", *CLONE_REPEATED)):
            return None
        where = f" ({(self.clone or {}).get('folder') or self.records[0].data_log.parent})"
        if said.startswith("not judged"):
            return f"clone check {said}{where}"
        if "(diverged" in said or "(no ID given)" in said:
            return None
        return (f"{CLONE_UNSAFE}: a saved guest restored twice, given a generation ID, "
                f"{said}{where}")

    def _not_ready(self, never: list[BootRecord]) -> str:
        """The finding of a cell whose boots (some or all) were never ready: what the
        probe saw and the interrupts that came, per boot."""
        seen = []
        for record in never:
            irqs, until = measure.irqs_seen(record), measure.traced_until(record)
            seen.append(f"{record.name}: {irqs.interrupts} interrupts sampled on {irqs.cpus} "
                        f"CPU(s) by {until:.0f} s" if irqs and until is not None
                        else f"{record.name}: no trace")
        return (f"{NOT_READY} in {len(never)}/{len(self.records)} boots (a finding: this "
                f"profile has no time-to-ready budget); the probe saw the RNG not ready to "
                f"its timeout and no ready message came by the cap; {'; '.join(seen)} "
                f"({never[0].data_log})")

    def finding(self) -> bool:
        """Whether the verdict is a measurement that does not fail the run."""
        return self.status() in ("not_ready", "clone_unsafe")

    def shared(self) -> int:
        """Boots that ran beside another boot on their host."""
        return sum(r.shared_host for r in self.records)

    def spill_causes(self) -> Optional[tuple[dict[str, int], int]]:
        """measure.spill_causes_to_ready summed over the boots that have it, and how
        many boots did."""
        found = [c for c in map(measure.spill_causes_to_ready, self.records) if c is not None]
        if not found:
            return None
        return {cause: sum(c[cause] for c in found) for cause in found[0]}, len(found)

    def credit_rates(self) -> list[float]:
        return [r for r in (measure.credit_rate(rec) for rec in self.records) if r is not None]

    def cpus_to_ready(self) -> list[int]:
        return [i.cpus for i in (measure.irqs_to_ready(r) for r in self.records) if i]

    def status(self) -> str:
        """ok, not_ready (a finding, see NOT_READY), clone_unsafe (a finding for
        Debian's stock, see CLONE_UNSAFE), not_ok or skipped: the verdict for
        machines."""
        if self.skipped:
            return "skipped"
        verdict = self.verdict()
        if verdict == OK:
            return "ok"
        if verdict.startswith(NOT_READY):
            return "not_ready"
        if verdict.startswith(CLONE_UNSAFE) and self.variant == DEBIAN_STOCK:
            return "clone_unsafe"
        return "not_ok"

    def budget_met(self) -> Optional[bool]:
        """Whether the boots' median time to ready is within the profile's budget and
        every boot got ready; None without a budget or a boot to judge."""
        if self.budget_s is None or not self.records:
            return None
        try:
            ready = [measure.ready_printk(r) for r in self.records]
        except BadKernel:
            return None
        return budgets.judge(ready, self.budget_s) is None

    def budget_text(self) -> str:
        if self.budget_s is None:
            return "none"
        met = self.budget_met()
        said = "" if met is None else (": median met" if met else ": not met")
        return f"{self.budget_s:g} s{said}"


def stats(values: Sequence[float], boots: int) -> dict[str, object]:
    """median [min-max] and n of the cell's `of` boots that gave a value; the
    figures are null when none did."""
    if not values:
        return {"median": None, "min": None, "max": None, "n": 0, "of": boots}
    return {"median": round(statistics.median(values), 3), "min": round(min(values), 3),
            "max": round(max(values), 3), "n": len(values), "of": boots}


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
    if any(c.spill_causes() for c in cells):
        found.insert(found.index(IRQS) + 1 if IRQS in found else len(found), SPILLS)
    return found + ([CLONE_SAFE] if any(c.clone_safe for c in cells) else [])


def cell_text(cell: Cell, name: str, samples: dict[str, list[float]]) -> str:
    if name == CLONE_SAFE:
        return cell.clone_safe or "-"
    if name == SPILLS:
        summed = cell.spill_causes()
        if summed is None:
            return f"- 0/{cell.boots}"
        causes, boots = summed
        said = ", ".join(f"{cause} {n}" for cause, n in causes.items() if n) or "none"
        return f"{said} {boots}/{cell.boots}"
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


# Marks a cell's timings when some of its boots shared their host with another.
SHARED_MARK = "*"
SHARED_NOTE = (f"{SHARED_MARK}: some of the cell's boots ran beside another boot on their "
               "host (--jobs-per-host above 1 or auto, make run's default, or another run): "
               "their times were taken on a shared machine; a guest boots alone but for "
               "guests that only wait, and waits beside the next one's boot")


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
    """The hosts' labels, one host a line, and the shared-host note when it applies."""
    labels = host_labels(cells)
    lines = [f"{'hosts:' if i == 0 else '':6} {label} = {uri}"
             for i, (uri, label) in enumerate(labels.items())] if len(labels) > 1 else []
    if any(c.shared() for c in cells):
        lines.append(SHARED_NOTE)
    return lines


# What the report's marks and figures mean: report.txt's legend and report.html's.
LEGEND_ITEMS: list[tuple[str, str]] = [
    ("median [min-max] n/N", "a figure over the cell's boots: the median, the smallest and the "
     "largest value, and how many of the cell's N boots gave one (n)"),
    (SHARED_MARK, "after n/N: some of the cell's boots shared their host with another boot, "
     "so their times were taken on a busier machine"),
    ("> C s", "the idle guest had not reached the variant's final milestone when the cap of C "
     "seconds passed, in that many of the cell's boots, with the median rate (bits/s) the "
     "RNG credited meanwhile"),
    ("- 0/N", "never printed (or never measured) in any of the cell's N boots"),
    (READY, "the variant's own ready milestone (getrandom() stops blocking), guest printk "
     "seconds since boot; each milestone likewise"),
    (IRQS, "interrupts the RNG sampled before ready, from a kprobe armed at fs_initcall "
     "(earlier ones are not counted), and on how many CPUs"),
    (SPILLS, "the fast-pool spills before ready, from the trace, by what triggered each: "
     "threshold (the variant's count of interrupts on that CPU: 1024 on stock, 64 for "
     "crng's fast loads), flush (1 s since the CPU's previous spill), "
     "first-or-flush (the CPU's first spill in the trace: its first interrupt since boot, "
     "which spills at once, or a flush after a spill made before the kprobes were armed), "
     "early (none of these); summed over the n of N boots traced (stock and crng: the LRNG "
     "has no fast pool). crng_init 2 after two first-or-flush spills came from two "
     "interrupts, one a CPU"),
    (BLOCKED, "how long the probe's blocking getrandom() blocked (CLOCK_BOOTTIME)"),
    (FIRST_NONBLOCK_OK, "when the probe's first GRND_NONBLOCK getrandom() succeeded, guest "
     "printk seconds"),
    (HOST_DONE, "host seconds from the domain's creation to the guest's last stage"),
    (CLONE_SAFE, "one guest saved past two minutes of uptime and restored twice; yes: the two "
     "clones' getrandom() reads after the restore share no 16-byte block; 'no: identical for "
     "N reads': N blocks repeated; 'no driver': the profile gives a VM generation ID but the "
     "kernel has no vmgenid driver (CONFIG_VMGENID); '(no ID given)': the profile gives no "
     "generation ID, so repeated reads are expected (the hazard's control); where an ID was "
     "given, repeated reads make the cell '" + CLONE_UNSAFE + "', which fails it, but for "
     "Debian's stock, where it is a finding; 'not judged: why': no round of reads was "
     "compared, which fails the cell; failed: the check could not run; '-': not checked"),
    (BUDGET, "the profile's time-to-ready budget (--budget; vm-definitions/budgets.toml by "
     "default): met when the median time to ready is within it and every boot got ready; "
     "not met fails the cell; none: the profile has no budget"),
    (VERDICT, "ok, or the first reason the cell is not (report.txt gives the rest in its note "
     "[n]); a skipped cell names why and does not fail the run; '" + NOT_READY + "': the "
     "probe saw the RNG not ready to its timeout and no ready message came by the cap, in a "
     "profile with no budget: a finding (with the interrupts that came) that does not fail "
     "the run"),
]


def minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 90 else f"{seconds:.0f} s"


def _fill(text: str, indent: str = "", first: str = "") -> list[str]:
    """text wrapped to TEXT_WIDTH, its first line starting with `first`, the next ones
    with `indent`; a word longer than a line (a path) is kept whole."""
    return textwrap.wrap(text, TEXT_WIDTH, initial_indent=first, subsequent_indent=indent,
                         break_long_words=False, break_on_hyphens=False) or [first.rstrip()]


LEGEND = "\n".join(line for term, text in LEGEND_ITEMS
                   for line in _fill(f"{term}: {text}", "    ", "  "))


def variant_spec(variant: str):
    try:
        return load_variant(variant)
    except BadKernel:
        return None      # a kernel the bench knows no milestones of


def _every_milestone(cells: list[Cell]) -> set[str]:
    try:
        return set(all_milestones(list(dict.fromkeys(c.variant for c in cells))))
    except BadKernel:
        return set()


def own_milestones(variant: str) -> list[str]:
    """The variant's milestones in their declared order (none for an unknown kernel)."""
    spec = variant_spec(variant)
    return list(spec.milestones) if spec else []


def relative_text(text: str, outdir: Optional[Path]) -> str:
    """Free text (a verdict) with the report folder's absolute paths made relative."""
    if outdir is None:
        return text
    for base in dict.fromkeys([str(outdir), str(outdir.resolve())]):
        text = text.replace(base.rstrip("/") + "/", "")
    return text


def verdict_text(cell: Cell, outdir: Optional[Path]) -> str:
    """The cell's verdict with the report folder's paths relative to it."""
    return relative_text(cell.verdict(), outdir)


def relative(path: object, outdir: Optional[Path]) -> str:
    """A path as report.json and report.html give it: relative to the report's folder."""
    text = str(path)
    if outdir is None or not text or not Path(text).is_absolute():
        return text
    for base in (outdir, outdir.resolve()):
        try:
            return str(Path(text).relative_to(base))
        except ValueError:
            pass
    return os.path.relpath(Path(text).resolve(), outdir.resolve())


def _grid(header: list[str], rows: list[list[str]]) -> list[str]:
    """Columns padded to their widest entry; when they would not fit in TEXT_WIDTH,
    the columns after the first are split into groups that do, one under another."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    groups: list[list[int]] = [[]]
    used = widths[0]
    for i in range(1, len(header)):
        if groups[-1] and used + 2 + widths[i] > TEXT_WIDTH:
            groups.append([])
            used = widths[0]
        groups[-1].append(i)
        used += 2 + widths[i]
    lines: list[str] = []
    for group in groups:
        if lines:
            lines.append("")
        for row in [header, *rows]:
            lines.append("  ".join(row[i].ljust(widths[i]) for i in [0, *group]).rstrip())
    return lines


def _notes(cells: list[Cell], order: list[Cell],
           outdir: Optional[Path]) -> tuple[dict[int, str], list[str]]:
    """Each cell's verdict as the tables show it ('ok', 'boot failed [2]') and the
    numbered notes that say the rest, in the tables' order."""
    short: dict[int, str] = {}
    notes: list[str] = []
    number = 0
    for cell in order:
        verdict = cell.verdict()
        if verdict == OK:
            short[id(cell)] = OK
            continue
        number += 1
        notes += _fill(f"[{number}] {cell.profile} × {cell.variant}: "
                       f"{relative_text(verdict, outdir)}", "    ", "")
        label = NOT_READY if cell.finding() else verdict.split(':')[0]
        short[id(cell)] = f"{label} [{number}]"
    return short, notes


def overview(cells: list[Cell], short: dict[int, str]) -> list[str]:
    """Profiles down, variants across: the median time to ready and the verdict."""
    variants = list(dict.fromkeys(c.variant for c in cells))
    first: dict[tuple[str, str], Cell] = {}
    for cell in cells:
        first.setdefault((cell.profile, cell.variant), cell)
    rows = []
    for profile in dict.fromkeys(c.profile for c in cells):
        row = [profile]
        for variant in variants:
            cell = first.get((profile, variant))
            if cell is None:
                row.append("")
            elif cell.skipped:
                row.append(short[id(cell)])
            else:
                ready = cell.samples().get(READY)
                median = f"{statistics.median(ready):.3f}" if ready else "-"
                mark = SHARED_MARK if cell.shared() else ""
                row.append(f"{median}{mark} {short[id(cell)]}")
        rows.append(row)
    return ["Time to ready (median, guest printk s) and verdict:",
            *_grid(["profile", *variants], rows)]


def _figures(cell: Cell, names: list[str], short: str, labels: dict[str, str],
             budget_row: bool) -> list[tuple[str, str]]:
    """A cell's rows of its variant's table: (figure, value)."""
    if cell.skipped:
        return [(VERDICT, short)]
    samples = cell.samples()
    rows = [(name, cell_text(cell, name, samples)) for name in names]
    if len(labels) > 1:
        rows.append(("hosts", cell_hosts(cell, labels)))
    if budget_row:
        rows.append((BUDGET, cell.budget_text()))
    return rows + [(VERDICT, short)]


def variant_table(variant: str, cells: list[Cell], names: list[str], short: dict[int, str],
                  labels: dict[str, str], budget_row: bool) -> list[str]:
    """One variant's table: a row per profile and figure (its own milestones only)."""
    spec = variant_spec(variant)
    head = f"{variant}: {spec.description}" if spec and spec.description else variant
    rows = [(cell.profile if i == 0 else "", name, value)
            for cell in cells
            for i, (name, value) in enumerate(_figures(cell, names, short[id(cell)], labels,
                                                       budget_row))]
    header = ("profile", "figure", "median [min-max] n/N")
    w0, w1 = (max(len(r[i]) for r in [header, *rows]) for i in (0, 1))
    room = max(TEXT_WIDTH - w0 - w1 - 4, 20)
    lines = [*_fill(f"== {head}"), f"{header[0]:<{w0}}  {header[1]:<{w1}}  {header[2]}",
             f"{'-' * w0}  {'-' * w1}  {'-' * min(room, 30)}"]
    for profile, name, value in rows:
        parts = textwrap.wrap(value, room, break_long_words=False,
                              break_on_hyphens=False) or [""]
        lines.append(f"{profile:<{w0}}  {name:<{w1}}  {parts[0]}".rstrip())
        lines += [" " * (w0 + w1 + 4) + part for part in parts[1:]]
    return lines


def table(cells: list[Cell], outdir: Optional[Path] = None) -> str:
    """The matrix as text at most TEXT_WIDTH wide: the overview, one table per
    variant, the legend, the hosts and the verdicts' notes."""
    variants = list(dict.fromkeys(c.variant for c in cells))
    order = [c for v in variants for c in cells if c.variant == v]
    short, notes = _notes(cells, order, outdir)
    labels = host_labels(cells)
    cols = columns(cells)
    every = _every_milestone(cells)
    budget_row = any(c.budget_s is not None for c in cells)
    lines = overview(cells, short)
    for variant in variants:
        spec = variant_spec(variant)
        own = set(spec.milestones) if spec else set()
        names = [n for n in cols if n not in every or n in own]
        lines += ["", *variant_table(variant, [c for c in order if c.variant == variant],
                                     names, short, labels, budget_row)]
    lines += ["", "Legend:", *LEGEND.splitlines()]
    for line in hosts_legend(cells):
        # A host's label and URI stay on one line, however long the URI: the note wraps.
        lines += _fill(line, "    ", "  ") if line == SHARED_NOTE else [f"  {line}"]
    if notes:
        lines += ["", "Notes:", *notes]
    return "\n".join(lines)


# ---- The run's verdict ------------------------------------------------------------

def not_ok(cells: list[Cell]) -> list[Cell]:
    """Cells whose verdict fails the run (a skip, which names why, and a finding,
    see NOT_READY, do not)."""
    return [c for c in cells if c.status() == "not_ok"]


def not_ready(cells: list[Cell]) -> list[Cell]:
    """Cells never ready within the cap where no budget asks it: findings."""
    return [c for c in cells if c.status() == "not_ready"]


def clone_unsafe(cells: list[Cell]) -> list[Cell]:
    """Debian's stock cells whose clones repeated each other though given a
    generation ID: findings."""
    return [c for c in cells if c.status() == "clone_unsafe"]


def over_budget(throughput_rows: Iterable[dict[str, object]]) -> list[dict[str, object]]:
    """Throughput cases whose variant is slower than the budget allows
    (benchlib/report/throughput.py)."""
    return [r for r in throughput_rows if r.get("within_budget") is False]


def run_failed(cells: list[Cell], throughput_rows: Iterable[dict[str, object]] = ()) -> bool:
    """Whether the run fails (exit 1): a cell not ok, or a variant's getrandom()
    throughput over its budget or not judged. Every headline says what this says."""
    rows = list(throughput_rows)
    return bool(not_ok(cells) or over_budget(rows) or throughput.unjudged(rows))


def headline(cells: list[Cell], throughput_rows: Iterable[dict[str, object]] = ()) -> str:
    rows = list(throughput_rows)
    bad, slow = not_ok(cells), over_budget(rows)
    skipped = sum(bool(c.skipped) for c in cells)
    never, unsafe = len(not_ready(cells)), len(clone_unsafe(cells))
    found = "; ".join(
        ([f"{never} cell{'s' if never != 1 else ''} never ready within the cap where "
          f"no budget asks it (a finding)"] if never else [])
        + ([f"{unsafe} {DEBIAN_STOCK} cell{'s' if unsafe != 1 else ''} clone-unsafe though "
            f"given a generation ID (a finding)"] if unsafe else []))
    if not run_failed(cells, rows):
        ran = len(cells) - skipped - never - unsafe
        said = f"passed: all {ran} cells ok" if ran != 1 else "passed: the one cell ok"
        if found:
            said = f"passed: {ran} cell{'s' if ran != 1 else ''} ok, {found}"
        said += f", {skipped} skipped with a reason" if skipped else ""
        return said + ("; getrandom() throughput within budget" if rows else "")
    parts = [f"{len(bad)} of {len(cells)} cells not ok"] if bad else []
    parts += [found] if found else []
    if slow:
        parts.append("getrandom() throughput out of bounds: "
                     + ", ".join(f"{r['variant']} ({r['threads']}×{r['request_bytes']} B in "
                                 f"{r['profile']}: {r['ratio_to_stock']} of "
                                 f"{throughput.BASELINE}, {throughput.measure_of(r).failed})"
                                 for r in slow))
    unjudged = throughput.unjudged(rows)
    if unjudged:
        parts.append("getrandom() throughput not judged: "
                     + ", ".join(f"{r['variant']} ({r['threads']}×{r['request_bytes']} B in "
                                 f"{r['profile']}: {throughput.judgement(r)[len('not judged: '):]})"
                                 for r in unjudged))
    return "FAILED: " + "; ".join(parts)


def title(cells: list[Cell], meta: dict[str, Any]) -> str:
    """What ran, on which kernels and profiles, and when."""
    variants = list(dict.fromkeys(c.variant for c in cells))
    profiles = list(dict.fromkeys(c.profile for c in cells))
    where = ", ".join(profiles) if len(profiles) <= 3 else f"{len(profiles)} profiles"
    what = f"{', '.join(variants) or 'no kernel'} on {where or 'no profile'}"
    when = meta.get("started") or meta.get("date")
    try:
        when = datetime.fromisoformat(str(when)).strftime("%Y-%m-%d %H:%M %Z").strip()
    except ValueError:
        pass
    return f"Boot-time randomness bench: {what}" + (f", {when}" if when else "")


# ---- report.txt, junit.xml, and the folder -----------------------------------------

def run_summary(meta: dict[str, Any]) -> str:
    """When and where the run ran, at which commit, under which accelerator."""
    said = [" on ".join(str(meta[key]) for key in ("date", "host_name") if meta.get(key))]
    if meta.get("git_commit"):
        said.append(f"git {meta['git_commit']}"
                    + (" with local changes" if meta.get("git_dirty") else ""))
    if meta.get("accel"):
        said.append(f"guests under {str(meta['accel']).upper()} ({meta.get('accel_why', '')})")
    if meta.get("boots_per_cell"):
        said.append(f"{meta['boots_per_cell']} boot(s) per cell")
    for slots in meta.get("slots") or []:
        if slots["jobs"] > 1:
            said.append(f"{slots['jobs']} boots at a time on {slots['host']} ({slots['why']})")
    phases = meta.get("phases_s") or {}
    if phases:
        said.append("wall time " + ", ".join(f"{name} {minutes(s)}" for name, s in phases.items()))
    return "; ".join(s for s in said if s)


def text(cells: list[Cell], meta: dict[str, Any], outdir: Optional[Path] = None,
         throughput_rows: Sequence[dict[str, object]] = (),
         entropy_cells: Optional[list[entropy_report.EntropyCell]] = None,
         plots: Sequence[Path] = (), notes: Sequence[str] = ()) -> str:
    """The whole of report.txt."""
    rows = list(throughput_rows)
    lines = _fill(title(cells, meta))
    said = run_summary(meta)
    lines += _fill(f"Run: {said}", "    ") if said else []
    if meta.get("command_line"):
        lines += _fill(f"Command: {meta['command_line']}", "    ")
    for kernel in meta.get("kernels") or []:
        lines += _fill(f"Kernel {kernel.get('variant')}: {kernel.get('version') or '?'} "
                       f"({kernel.get('image')})", "    ")
    for qemu in meta.get("qemu") or []:
        lines += _fill(f"QEMU {qemu.get('emulator')}: {qemu.get('version') or '?'}", "    ")
    if meta.get("interrupted"):
        lines += _fill(f"INCOMPLETE: {meta['interrupted']}; the cells below hold the boots "
                       "that finished before it", "    ")
    lines += _fill(f"Result: {headline(cells, rows)}", "    ")
    lines += ["", *table(cells, outdir).splitlines()]
    if entropy_cells is not None:
        lines += ["", *entropy_report.text(entropy_cells).splitlines()]
    if rows:
        lines += ["", *throughput.table(rows).splitlines()]
    if plots or notes:
        lines.append("")
        lines += _fill("Plots: " + " ".join(relative(p, outdir) for p in plots), "    ") \
            if plots else []
        for note in notes:
            lines += _fill(note, "    ")
    return "\n".join(lines)


def junit(cells: list[Cell], throughput_rows: Sequence[dict[str, object]] = ()
          ) -> ET.ElementTree:
    """A test case per cell and per throughput case: it fails as the run does."""
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
        elif cell.finding():
            ET.SubElement(case, "properties").append(
                ET.Element("property", name="finding", value=verdict))
        elif verdict != OK:
            ET.SubElement(case, "failure", message=verdict)
            failures += 1
        ET.SubElement(case, "system-out").text = "\n".join(
            str(r.console_log) for r in cell.records)
    for row in throughput_rows:
        case = ET.SubElement(suite, "testcase", classname=f"throughput.{row['profile']}",
                             name=f"{row['variant']}.{row['threads']}x{row['request_bytes']}")
        count += 1
        if row.get("within_budget") is False:
            ET.SubElement(case, "failure", message=(
                f"{row['ratio_to_stock']} of {throughput.BASELINE}'s getrandom() throughput in "
                f"{row['profile']}: {throughput.measure_of(row).failed}"))
            failures += 1
        elif row in throughput.unjudged([row]):
            ET.SubElement(case, "failure", message=f"getrandom() throughput in "
                          f"{row['profile']}: {throughput.judgement(row)}")
            failures += 1
    suite.set("tests", str(count))
    suite.set("failures", str(failures))
    suite.set("skipped", str(skipped))
    return ET.ElementTree(suite)


def remove_if_empty(outdir: Path) -> bool:
    """Remove a results folder that holds no file at all (a run that failed before its
    first boot wrote anything), empty subfolders and all; True if it went. A folder
    with any file in it, however deep, is left as it is."""
    if not outdir.is_dir() or any(p.is_symlink() or not p.is_dir() for p in outdir.rglob("*")):
        return False
    for folder in sorted(outdir.rglob("*"), key=lambda p: len(p.parts), reverse=True):
        folder.rmdir()
    outdir.rmdir()
    return True
