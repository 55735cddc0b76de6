"""The main job's report, made for reading and for machines, from a synthetic run:
no hypervisor, no boot. Three variants in three profiles with every kind of
figure a cell can show (shared hosts, a capped final milestone, a clone verdict,
failed and over-budget cells, two hosts), written into a folder of its own with
the boots' log files, as benchlib.commands.run writes it:

- report.txt fits a terminal (report.TEXT_WIDTH columns) and keeps every figure;
- report.json fits report.schema.json, has snake_case keys only, numbers as
  numbers, and paths relative to its folder that lead to files;
- the schema catches a key added or a number written as a string;
- the run's verdict (report.run_failed) is every headline's: a throughput case over
  budget fails the run, the JSON, the text, the page and junit.xml alike;
- report.html has a real title, a legend, each cell's budget, the throughput and
  entropy tables as tables, and links that all lead to files;
- report.remove_if_empty removes a results folder with no file in it, and only that.
"""
from __future__ import annotations

import json
import re
import subprocess
import xml.etree.ElementTree as ET
from datetime import datetime
from html.parser import HTMLParser
from pathlib import Path

import pytest

from benchlib.testing.synthetic import ARMED_AIR
from benchlib.report.pngcheck import drawn
from benchlib.report import forms, report, report_html, report_json, throughput
from benchlib.core import paths
from benchlib.report.entropy_report import Behind, EntropyCell
from benchlib.testing.synthetic import throughput_records
from benchlib.core.bootrecord import BootRecord, TaskOutput
from benchlib.report.report import Cell

EMULATOR = "/usr/bin/qemu-system-x86_64"
HOSTS = ["qemu:///system",
         # As long as the second daemon's URI in test_hosts.py: a legend line past
         # TEXT_WIDTH, which must stay whole.
         "qemu+unix:///system?socket=/tmp/pytest-of-root/pytest-101/extra-libvirtd0/sock/"
         "libvirt-sock"]
# The longest profile name there is: the tables' first column at its widest.
PROFILES = ["tcg-quiet", "tcg-virtio-rng", "hyperv-msgtimer-virtio-rng"]
MESSAGES = {
    "stock": ["random: crng init done"],
    "crng": ["random: crng_init 1", "random: crng_init 2", "random: crng_init 3"],
    "lrng": ["lrng: primary DRBG initially seeded", "lrng: primary DRBG minimally seeded",
             "lrng: primary DRBG fully seeded", "lrng: secondary DRBG on node 0 fully seeded"],
}
TRACE_HEAD = "# entries-in-buffer/entries-written: {0}/{0}   #P:2"
SNAKE = re.compile(r"^[a-z][a-z0-9_]*$")


def trace_line(cpu: int, t: float, event: str, args: str) -> str:
    return f"          <idle>-0       [{cpu:03d}] d.h..     {t:.6f}: {event}: (x+0x0/0x10) {args}"




def boot(outdir: Path, profile: str, variant: str, n: int, *, reach: int | None = None,
         shared: bool = False, host: str = HOSTS[0], offset: float = 0.0) -> BootRecord:
    """A boot with its folder and log files: the variant's milestones up to `reach`
    (all by default; fewer: the final one capped), a kprobe trace, the probe's events."""
    name = f"bench-{profile}-{variant}-{n:08x}"
    folder = outdir / "boots" / name
    folder.mkdir(parents=True)
    for log in ("console.log", "data.log", "record.json"):
        (folder / log).write_text(f"{log} of {name}\n")
    (folder / report.BOOT_DOMAIN_XML).write_text(
        f"<domain type='qemu'><name>{name}</name><devices><emulator>{EMULATOR}</emulator>"
        "</devices></domain>")
    texts = MESSAGES[variant][:reach]
    record = BootRecord(name=name, profile=profile, variant=variant,
                        kernel=f"/build/kernel/{variant}/bzImage", accel="tcg",
                        cmdline="console=ttyS0", console_log=folder / "console.log",
                        data_log=folder / "data.log", host=host, shared_host=shared,
                        host_slot=0, started_at=1796442439.5 + n, ended_at=1796442452.8 + n,
                        stages={"init": 6.0 + offset, "done": 11.5 + offset})
    record.messages = [(0.5 + offset, "bench: nonblock ok 1")] + [
        (1.0 + i * 0.75 + offset, text) for i, text in enumerate(texts)]
    events = [trace_line(i % 2, 0.6 + i * 0.01, "air", "irq=4") for i in range(12)]
    events += [trace_line(0, 0.7, "cred", "bits=64"), trace_line(1, 9.0, "cred", "bits=2")]
    record.tasks = {"probe": TaskOutput("probe", 0), "kmsg": TaskOutput("kmsg", 0),
                    "until": TaskOutput("until", 0, [f"until: {'cap' if reach else 'reached'}"]),
                    "trace": TaskOutput("trace", 0, [
                        "@@SECTION kprobe_events", ARMED_AIR,
                        "@@SECTION trace", TRACE_HEAD.format(len(events)), *events])}
    record.probe = [{"event": "blocking", "ret": "32", "t_start": "0.400", "t_end": "1.123"},
                    {"event": "nonblock_ok", "t": "1.3"},
                    {"event": "entropy_avail", "when": "start", "value": "12"},
                    {"event": "entropy_avail", "when": "nonblock_ok", "value": "256"},
                    {"event": "entropy_avail", "when": "end", "value": "?"}]
    return record


CLONE_LOGS = ("clones/bench-tcg-quiet-stock-clone-late-1/clone-a",
              "clones/bench-tcg-quiet-stock-clone-late-1/clone-b")


def clone_summary(outdir: Path) -> dict[str, object]:
    """A clone case's summary as benchlib/commands/clones.py gives it (test_clone_harness
    checks the real one against the schema)."""
    views = {}
    for folder in CLONE_LOGS:
        (outdir / folder).mkdir(parents=True)
        for log in ("console.log", "whole-data.log"):
            (outdir / folder / log).write_text("log\n")
        views[Path(folder).name] = {"vmforks": 0, "reseeds": 1, "problems": [],
                                    "data_log": str(outdir / folder / "whole-data.log")}
    return {"profile": "tcg-quiet", "variant": "stock", "point": "late",
            "generation_id": False, "driver": True, "save_uptime_s": 125.2,
            "verdict": "no: identical for 12 reads (no ID given)",
            "generation_ids": [None, None, None],
            "compared_rounds": [1, 2], "identical_reads": 12, "shared_blocks": 12,
            "clones": views}


def synthetic_cells(outdir: Path) -> list[Cell]:
    cells = []
    n = 0
    for profile in PROFILES:
        for variant in MESSAGES:
            cell = Cell(profile, variant, cap_s=300.0,
                        budget_s={"tcg-quiet": 120.0, "tcg-virtio-rng": 0.5}.get(profile))
            if profile == PROFILES[2] and variant == "crng":
                cell.skipped = ("profile 'hyperv-msgtimer-virtio-rng' needs Hyper-V SynIC: KVM "
                                "is not usable here and the patched QEMU is not built")
                cells.append(cell)
                continue
            for i in range(3):
                n += 1
                # Ready (crng_init 2) but not the final crng_init 3 within the cap.
                capped = profile == "tcg-quiet" and variant == "crng"
                cell.records.append(boot(outdir, profile, variant, n,
                                         reach=len(MESSAGES[variant]) - 1 if capped else None,
                                         shared=(i == 1 and profile == PROFILES[2]),
                                         host=HOSTS[i % 2], offset=i * 0.1))
            if profile == PROFILES[2] and variant == "stock":
                cell.failures.append(f"guest {cell.records[0].name}: no stage 'init' within "
                                     f"120 s ({cell.records[0].console_log})")
            cells.append(cell)
    quiet_stock = cells[0]
    quiet_stock.clone = clone_summary(outdir)
    quiet_stock.clone_safe = "no: identical for 12 reads (no ID given)"
    cells[1].clone_safe = "yes"
    return cells


def synthetic_entropy() -> list[EntropyCell]:
    lrng = EntropyCell("hyperv-msgtimer-virtio-rng", "lrng", samples=100355,
                       min_entropy=[0.5, 0.6], limiting=["lag", "lag"], credit_per_irq=256 / 288,
                       sources="interrupts + virtio-rng")
    lrng.behind = {"initially seeded": Behind("initially seeded", 32, [40, 44], jitter=True),
                   "node 0 seeded": Behind("node 0 seeded", 256, [], on_capture=1)}
    icount = EntropyCell("tcg-icount", "stock", samples=100000, min_entropy=[0.0],
                         limiting=["compression"], credit_per_irq=1 / 64, deterministic=True)
    return [lrng, icount]


def throughput_rows(crng_mb_s: list[float]) -> list[dict[str, object]]:
    """Both measures' rows: crng's figures in the cost measure (the 10 % budget),
    every variant within the scaling floor."""
    cost, scaling = throughput.COST, throughput.SCALING
    return throughput.compare(
        {"stock": throughput_records("stock", [100, 90, 110], 2, cost.profile),
         "crng": throughput_records("crng", crng_mb_s, 2, cost.profile),
         "lrng": throughput_records("lrng", [99, 98, 101], 2, cost.profile)}, cost) \
        + throughput.compare(
            {"stock": throughput_records("stock", [100, 70, 120], 2, scaling.profile),
             "crng": throughput_records("crng", [80, 60, 110], 2, scaling.profile),
             "lrng": throughput_records("lrng", [65, 75, 90], 2, scaling.profile)}, scaling)


def meta_of(cells: list[Cell]) -> dict[str, object]:
    """report.json's meta block as benchlib.commands.run fills it."""
    return {**report_json.run_meta(["--boots", "3"], cells),
            "kernels": [{"variant": v, "image": f"/build/kernel/{v}/bzImage",
                         "version": "6.1.192 (root@vm) #1 SMP Sat Dec  5 03:27:49 UTC 2026"}
                        for v in MESSAGES],
            "accel": "tcg", "accel_why": "requested with --accel tcg", "boots_per_cell": 3,
            "cap_s": 300.0, "hosts": HOSTS, "jobs_per_host": "auto",
            "slots": [{"host": HOSTS[0], "jobs": 5, "why": "auto: 2 core(s), one guest booting "
                       "and up to 4 waiting for their RNG beside it"}],
            "phases_s": {"matrix": 1503.2, "clones": 512.0, "throughput": 95.5},
            "budgets": {"file": "vm-definitions/budgets.toml",
                        "ready": [{"profile": "tcg-quiet", "ready_s": 120.0},
                                  {"profile": "tcg-virtio-rng", "ready_s": 0.5}]},
            "workload": {"tasks": ["probe", "until"], "probe_flags": "b"}}


@pytest.fixture
def run(tmp_path: Path) -> dict:
    """A synthetic run written as benchlib.commands.run writes it: plots, then report.txt,
    report.json and junit.xml, then report.html."""
    outdir = tmp_path / "20261205-034719"
    outdir.mkdir()
    cells = synthetic_cells(outdir)
    rows = throughput_rows([95, 91, 99])          # within the budget
    entropy_cells = synthetic_entropy()
    meta = meta_of(cells)
    plots = report_html.milestone_plots(outdir, cells)
    entropy_png = outdir / "entropy-tcg-icount.png"
    entropy_png.write_bytes((plots[0]).read_bytes())
    plots.append(entropy_png)
    text = forms.write(outdir, cells, meta, rows, entropy_cells, plots)
    report_html.write(outdir, cells, meta, rows, entropy_cells, plots)
    return {"outdir": outdir, "cells": cells, "rows": rows, "meta": meta, "text": text,
            "entropy": entropy_cells, "plots": plots}


# ---- report.txt ------------------------------------------------------------------

def test_report_txt_fits_a_terminal(run: dict) -> None:
    lines = (run["outdir"] / "report.txt").read_text().splitlines()
    # The one exception: a host's label and URI, kept on one line however long.
    wide = [f"{len(line)}: {line}" for line in lines if len(line) > report.TEXT_WIDTH
            and not any(line.endswith(f" = {uri}") for uri in HOSTS)]
    assert not wide, "lines wider than a terminal:\n" + "\n".join(wide)


def test_report_txt_names_each_host_on_one_line(run: dict) -> None:
    """A host's label and its URI are one line of the legend, whatever the URI's
    length (test_hosts.py looks for 'hN = URI' in the printed report)."""
    for n, uri in enumerate(HOSTS, 1):
        assert any(line.strip().endswith(f"h{n} = {uri}")
                   for line in run["text"].splitlines()), f"no line names h{n} = {uri}"


def test_report_txt_keeps_every_figure(run: dict) -> None:
    """Every cell's every figure, as report.cell_text gives it, is in the text: the
    variant's own milestones, the clone-safe column, the budget, the verdict."""
    said = " ".join(run["text"].split())        # a long value may wrap
    cells: list[Cell] = run["cells"]
    for cell in cells:
        if cell.skipped:
            continue
        samples = cell.samples()
        names = [report.READY, *report.own_milestones(cell.variant), report.IRQS,
                 report.BLOCKED, report.FIRST_NONBLOCK_OK, report.HOST_DONE, report.CLONE_SAFE]
        for name in names:
            value = report.cell_text(cell, name, samples)
            assert f"{name} {value}" in said, f"{cell.profile} × {cell.variant}: {name} " \
                                              f"'{value}' is not in report.txt"
        assert f"{report.BUDGET} {cell.budget_text()}" in said
    assert "no: identical for 12 reads" in said and "> 300 s 3/3" in said
    assert "1.000 [1.000-1.000] 3/3" not in said          # the median comes from 3 boots
    assert f"3/3{report.SHARED_MARK}" in said
    for term, _ in report.LEGEND_ITEMS:
        assert f"{term}:" in said, f"the legend does not explain '{term}'"


# ---- report.json -----------------------------------------------------------------

def keys_of(value: object, where: str = "") -> list[tuple[str, str]]:
    """(path, key) of every key in a JSON value."""
    found = []
    if isinstance(value, dict):
        for key, item in value.items():
            found.append((where, key))
            found += keys_of(item, f"{where}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found += keys_of(item, f"{where}[{i}]")
    return found


def read_report(run: dict) -> dict:
    return json.loads((run["outdir"] / "report.json").read_text())


def test_report_json_fits_its_schema(run: dict) -> None:
    report_json.validate(read_report(run))


def test_report_json_keys_are_snake_case_with_numbers_as_numbers(run: dict) -> None:
    data = read_report(run)
    bad = [f"{where}: '{key}'" for where, key in keys_of(data) if not SNAKE.match(key)]
    assert not bad, "keys that are not snake_case:\n" + "\n".join(bad)
    quiet_stock = data["cells"][0]
    assert isinstance(quiet_stock["ready_printk_s"]["median"], float)
    assert isinstance(quiet_stock["irqs_to_ready"]["median"], int)
    assert quiet_stock["irqs_to_ready"]["cpus_max"] == 2
    assert quiet_stock["boots"][0]["entropy_avail_bits"] == {"start": 12, "nonblock_ok": 256,
                                                            "end": None}
    assert [m["name"] for m in data["cells"][2]["milestones"]] == [
        "initially seeded", "minimally seeded", "fully seeded", "node 0 seeded"]


def test_report_json_paths_are_relative_and_lead_to_files(run: dict) -> None:
    data, outdir = read_report(run), run["outdir"]
    paths = [b[key] for c in data["cells"] for b in c["boots"]
             for key in ("console_log", "data_log", "domain_xml")]
    paths += [v["data_log"] for c in data["cells"] if c["clone"] for v in c["clone"]["clones"]]
    paths += data["plots"]
    assert paths and all(not p.startswith("/") for p in paths), paths
    missing = [p for p in paths if not (outdir / p).is_file()]
    assert not missing, f"report.json names files that are not in {outdir}: {missing}"
    folders = [b["folder"] for c in data["cells"] for b in c["boots"]]
    assert all((outdir / f).is_dir() for f in folders), folders
    assert str(outdir) not in json.dumps(data["cells"]), "an absolute path is left"


def test_report_json_meta_names_the_run(run: dict) -> None:
    meta = read_report(run)["meta"]
    assert meta["format_version"] == report_json.FORMAT_VERSION
    head = subprocess.run(["git", "-C", str(paths.REPO), "rev-parse", "HEAD"],
                          capture_output=True, text=True)
    assert meta["git_commit"] == (head.stdout.strip() if head.returncode == 0 else None)
    assert datetime.fromisoformat(meta["date"]).tzinfo is not None
    assert meta["command"][-3:] == ["benchlib.commands.run", "--boots", "3"]
    (qemu,) = meta["qemu"]
    assert qemu["emulator"] == EMULATOR and qemu["version"].startswith("QEMU emulator version")
    assert qemu["profiles"] == PROFILES
    assert meta["phases_s"] == {"matrix": 1503.2, "clones": 512.0, "throughput": 95.5}
    said = " ".join(run["text"].split())
    assert "wall time matrix 25 min, clones 9 min, throughput 2 min" in said, said
    assert f"5 boots at a time on {HOSTS[0]} (auto: 2 core(s)" in said, said


@pytest.mark.parametrize("change, why", [
    (lambda d: d["cells"][0].update(times_s={}), "Additional properties"),
    (lambda d: d["cells"][0]["ready_printk_s"].update(median="1.250"), "is not of type"),
    (lambda d: d["cells"][0]["boots"][0].update(console_log="/abs/console.log"), "should not"),
    (lambda d: d["meta"].pop("git_commit"), "'git_commit' is a required property"),
    (lambda d: d["meta"]["phases_s"].update(matrix="25 min"), "is not of type"),
])
def test_report_schema_catches_drift(run: dict, change, why: str) -> None:
    import jsonschema
    data = read_report(run)
    change(data)
    with pytest.raises(jsonschema.ValidationError, match=why):
        report_json.validate(data)


# ---- The run's verdict, said alike everywhere -------------------------------------

class Page(HTMLParser):
    """What a test needs of report.html: hrefs, ids, text per id, the title."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.hrefs: list[str] = []
        self.ids: dict[str, str] = {}
        self.classes: dict[str, str] = {}
        self.open: list[str] = []
        self.texts: dict[str, list[str]] = {}
        self.tags: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list) -> None:
        attrs = dict(attrs)
        self.tags.append(tag)
        if tag == "a":
            self.hrefs.append(attrs["href"])
        if "id" in attrs:
            self.ids[attrs["id"]] = tag
            self.classes[attrs["id"]] = attrs.get("class") or ""
            self.texts.setdefault(attrs["id"], [])
            self.open.append(attrs["id"])
        elif tag in ("title",):
            self.texts.setdefault(tag, [])
            self.open.append(tag)
        else:
            self.open.append("")

    def handle_endtag(self, tag: str) -> None:
        if tag not in ("br", "img", "meta") and self.open:
            self.open.pop()

    def handle_data(self, data: str) -> None:
        for name in self.open:
            if name:
                self.texts[name].append(data)

    def text(self, name: str) -> str:
        return " ".join("".join(self.texts.get(name, [])).split())


def test_throughput_over_budget_fails_the_run_everywhere(run: dict) -> None:
    """Every cell ok but one throughput case over budget: the run exits 1
    (report.run_failed), and no headline may say all is well."""
    outdir: Path = run["outdir"]
    cells = [c for c in run["cells"] if c.status() == "skipped" or not c.failures]
    for cell in cells:
        cell.budget_s = None if cell.profile != "tcg-quiet" else 120.0
    assert not report.not_ok(cells), [c.verdict() for c in report.not_ok(cells)]
    assert not report.run_failed(cells, run["rows"])
    slow = throughput_rows([85, 95, 80])
    assert report.run_failed(cells, slow)

    for rows, failed in ((run["rows"], False), (slow, True)):
        text = forms.write(outdir, cells, run["meta"], rows, run["entropy"], run["plots"])
        report_html.write(outdir, cells, run["meta"], rows, run["entropy"], run["plots"])
        data = read_report(run)
        page = Page((outdir / report_html.PAGE).read_text())
        headline = page.text("headline")
        result = next(line for line in text.splitlines() if line.startswith("Result:"))
        suite = ET.parse(outdir / "junit.xml").getroot()
        assert data["result"]["failed"] is failed
        assert data["result"]["throughput_cases_over_budget"] == int(failed)
        assert (int(suite.get("failures")) > 0) is failed
        if failed:
            assert headline.startswith("FAILED") and "all" not in headline, headline
            assert "crng" in headline and "over the 10% budget" in headline, headline
            assert page.classes["headline"] == "failed"
            assert result.startswith("Result: FAILED") and "crng" in result, result
            assert data["result"]["headline"] == headline
        else:
            assert headline.startswith("passed: all"), headline
            assert page.classes["headline"] == "passed"


# ---- report.html -----------------------------------------------------------------

def test_report_html_has_title_legend_budgets_and_tables(run: dict) -> None:
    page = Page((run["outdir"] / report_html.PAGE).read_text())
    title = page.text("title")
    for part in ("stock, crng, lrng", *PROFILES):
        assert part in title, f"title '{title}' does not say '{part}'"
    assert re.search(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}", title), f"title '{title}' says no time"
    many = report.title([Cell(f"p{i}", "stock") for i in range(5)], {})
    assert many == "Boot-time randomness bench: stock on 5 profiles", many

    legend = page.text("legend")
    for term, explanation in report.LEGEND_ITEMS:
        assert term in legend and " ".join(explanation.split()) in legend, term
    for mark in ("median [min-max] n/N", report.SHARED_MARK, "> C s", "- 0/N",
                 "no: identical for N reads", "no driver"):
        assert mark in legend, f"the legend does not explain '{mark}'"

    matrix = page.text("matrix")
    assert report.BUDGET in matrix
    for cell in run["cells"]:
        assert cell.budget_text() in matrix
    assert "120 s: median met" in matrix and "0.5 s: not met" in matrix and "none" in matrix

    assert page.ids.get("throughput-cost") == "table" and page.ids.get("entropy") == "table"
    assert page.ids.get("throughput-scaling") == "table"
    assert page.ids.get("entropy-behind") == "table"
    assert "pre" not in page.tags, "a preformatted block is left on the page"
    throughput_text = page.text("throughput-cost")
    assert "over the 10% budget" not in throughput_text and "95.00" in throughput_text
    scaling_text = page.text("throughput-scaling")
    assert "80.00" in scaling_text and "over" not in scaling_text, scaling_text
    entropy_text = page.text("entropy")
    assert "100355" in entropy_text and "interrupts + virtio-rng" in entropy_text
    assert "credit for entropy that is not there" in page.text("findings")


def test_report_html_links_lead_to_every_log_and_plot(run: dict) -> None:
    outdir: Path = run["outdir"]
    page = Page((outdir / report_html.PAGE).read_text())
    missing = [h for h in page.hrefs if not (outdir / h).is_file()]
    assert not missing, f"report.html links to files that are not there: {missing}"
    linked = {(outdir / h).resolve() for h in page.hrefs}
    wanted = [r.console_log for c in run["cells"] for r in c.records]
    wanted += [r.data_log for c in run["cells"] for r in c.records]
    wanted += [outdir / f / "whole-data.log" for f in CLONE_LOGS]
    wanted += [*run["plots"], outdir / "report.txt", outdir / "report.json",
               outdir / "junit.xml"]
    unlinked = [str(p) for p in wanted if p.resolve() not in linked]
    assert not unlinked, f"report.html does not link to: {unlinked}"


def test_report_milestone_plots_show_their_boots(run: dict) -> None:
    """Each milestone plot has its cells' milestones drawn, not only axes."""
    blank = [str(p) for p in run["plots"] if not drawn(p)]
    assert not blank, f"plots with nothing drawn: {blank}"


# ---- No empty results folder ------------------------------------------------------

def test_remove_if_empty_removes_only_a_folder_without_files(tmp_path: Path) -> None:
    empty = tmp_path / "20261205-000000"
    (empty / "boots" / "kvm-probe").mkdir(parents=True)
    assert report.remove_if_empty(empty) and not empty.exists()

    kept = tmp_path / "20261205-000001"
    (kept / "boots" / "empty").mkdir(parents=True)
    (kept / "kvm-probe").mkdir()
    (kept / "kvm-probe" / "console.log").write_text("a probe boot's log\n")
    assert not report.remove_if_empty(kept)
    assert (kept / "kvm-probe" / "console.log").is_file() and (kept / "boots" / "empty").is_dir()
    assert not report.remove_if_empty(tmp_path / "never-made")


def test_throughput_table_says_where_lrngs_output_departs_from_2016() -> None:
    """lrng's throughput is its ChaCha20 output's, which reseeds by time: the table
    says so (kernel/patches/lrng/variant.toml, output_note); stock says nothing."""
    text = throughput.table(throughput_rows([95, 91, 99]))
    notes = text.split("\nnote: ", 1)
    assert len(notes) == 2, text
    assert "not after 4096 requests" in " ".join(notes[1].split()), notes[1]
    assert all(len(line) <= throughput.NOTE_WIDTH for line in notes[1].splitlines())
    only_stock = [r for r in throughput_rows([95, 91, 99]) if r["variant"] == "stock"]
    assert "note:" not in throughput.table(only_stock)


def test_users_kernel_is_not_called_debians() -> None:
    """'custom' is read with stock's milestones but is the user's kernel: the report's
    section for it must not call it Debian's linux-source-6.1 (it did)."""
    from benchlib.core import variants
    assert variants.load("custom").description == variants.USERS_KERNEL
    assert variants.load("custom").milestones == variants.load("stock").milestones
    assert "Debian" not in variants.load("custom").description
