"""The clone test's own machinery: comparing two clones' reads, the clone-safe
verdicts and column, and the save/restore steps' errors (a full disk, a bad image),
with every domain gone afterwards. Only the last two boot a guest (no wait)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchlib.commands import clones
from benchlib.boot import plan, restore
from benchlib.report import report, report_html, report_json
from benchlib.commands.clones import CloneOutcome, clone_view
from benchlib.boot.guest import running_bench_domains
from benchlib.core.profiles import QUIET, get_profile
from benchlib.report.report import Cell

KMSG = ("@@BEGIN kmsg\n@@KMSG seq=0 t=0.000000 level=6 text=Linux version 6.1\n"
        "@@KMSG seq=1 t=5.000000 level=7 text=bench: clone save\n"
        "@@KMSG seq=2 t=20.000000 level=7 text=bench: clone reads done\n"
        "@@KMSG_END first_seq=0 next_seq=3 records=3 lost=0\n@@END kmsg rc=0\n")
TRACE_HEAD = ("@@BEGIN trace\n@@SECTION kprobe_events\n"
              "p:kprobes/vmfork add_vmfork_randomness len=$arg2:u64\n"
              "p:kprobes/reseed crng_reseed\n@@SECTION kprobe_profile\n"
              "  vmfork   1   0\n  reseed   1   0\n@@SECTION trace\n"
              "# entries-in-buffer/entries-written: {n}/{n}   #P:2\n")
EVENT = "  kworker/0:1-19  [000] .....  {t:.6f}: {event}: ({where}+0x0/0x35){args}\n"
PREFIX = "@@BEGIN clone\nready: uptime=3.0 noise_lines=10\nsave: uptime=5.000\n"


def read_lines(blocks: dict[tuple[int, int], str]) -> str:
    return "".join(f"read: round={r} cpu={c} uptime={6 + r:.3f} bytes={b}\n"
                   for (r, c), b in sorted(blocks.items()))


def clone_log(tmp: Path, label: str, blocks: dict[tuple[int, int], str],
              events: list[tuple[float, str, str]]) -> Path:
    """A clone's own data log: its reads, the end of the task, its trace, its kmsg."""
    trace = TRACE_HEAD.format(n=len(events)) + "".join(
        EVENT.format(t=t, event=e, where=e, args=a) for t, e, a in events)
    folder = tmp / label
    folder.mkdir()
    path = folder / "data.log"
    path.write_text(read_lines(blocks) + "@@END clone rc=0\n" + trace + "@@END trace rc=0\n" + KMSG)
    return path


def outcome(tmp: Path, a: dict, b: dict, events: list[tuple[float, str, str]] | None = None,
            genid: bool = False, driver: bool = True, pre: str = "") -> CloneOutcome:
    views = [clone_view(label, PREFIX + pre, clone_log(tmp, label, blocks, events or []))
             for label, blocks in (("clone-a", a), ("clone-b", b))]
    return CloneOutcome("p", "stock", clones.LATE, genid, driver, tmp, 5.0,
                        {r for r, _ in clones.parse_reads(pre)}, views, [None, None, None])


def blocks(tag: str, rounds: int = 2, cpus: int = 2) -> dict[tuple[int, int], str]:
    return {(r, c): f"{tag}{r}{c}".ljust(32, "0") for r in range(rounds) for c in range(cpus)}


def test_clone_harness_identical_reads_are_the_hazard(tmp_path: Path) -> None:
    same = blocks("a")
    found = outcome(tmp_path, same, dict(same))
    assert found.verdict() == "no: identical for 4 reads (no ID given)"
    assert all(x == y for x, y in found.first_reads().values())
    assert not any(c.problems for c in found.clones)


def test_clone_harness_a_block_shared_anywhere_counts(tmp_path: Path) -> None:
    a, b = blocks("a"), blocks("b")
    b[(1, 0)] = a[(0, 1)]              # another round, another CPU: still a repeat
    found = outcome(tmp_path, a, b)
    assert [(k1, k2) for _, k1, k2 in found.shared_blocks()] == [((0, 1), (1, 0))]
    assert found.verdict() == "no: identical for 1 reads (no ID given)"


def test_clone_harness_rounds_read_before_the_save_are_not_compared(tmp_path: Path) -> None:
    a, b = blocks("a"), blocks("b")
    a[(0, 0)] = b[(0, 0)]              # round 0 came before the save: one read, not two
    found = outcome(tmp_path, a, b, pre=read_lines({(0, 0): a[(0, 0)]}))
    assert found.compared_rounds() == [1]
    assert found.verdict() == "yes (no ID given)"


def test_clone_harness_trace_evidence_and_empty_reseeds(tmp_path: Path) -> None:
    """A vmfork and a reseed after it, placed by the kmsg marks; a reseed that says it
    took 0 bytes is none (the unfixed lrng printed 'reseeded' with len=0)."""
    events = [(4.0, "reseed", ""), (6.0, "vmfork", " len=16"), (6.1, "reseed", " len=0")]
    found = outcome(tmp_path, blocks("a"), blocks("b"), events, genid=True)
    for clone in found.clones:
        assert [e.event for e in clone.vmforks()] == ["vmfork"]
        assert clone.reseeds_after_vmfork() == [], "a 0-byte reseed counted"
        assert clone.could_see("vmfork") and clone.could_see("reseed")
    assert found.verdict() == "yes"


def test_clone_harness_no_driver_verdict(tmp_path: Path) -> None:
    same = blocks("a")
    assert outcome(tmp_path, same, dict(same), genid=True, driver=False).verdict() == "no driver"


def test_clone_harness_incomplete_clone_is_a_problem(tmp_path: Path) -> None:
    path = clone_log(tmp_path, "clone-a", blocks("a"), [])
    path.write_text(path.read_text().replace("@@KMSG_END first_seq=0 next_seq=3 records=3 "
                                             "lost=0\n", ""))
    view = clone_view("clone-a", PREFIX, path)
    assert any("kernel log" in p for p in view.problems)


def test_clone_harness_report_has_the_clone_safe_column(tmp_path: Path) -> None:
    cells = [Cell("tcg-quiet", "stock", clone_safe="no: identical for 6 reads (no ID given)"),
             Cell("tcg-input", "stock", clone_safe="yes")]
    text = report.table(cells)
    # A row of its own in each cell's part of the variant's table, and in the legend.
    rows = [line.split(None, 1) for line in text.splitlines()
            if line.split()[:1] == [report.CLONE_SAFE]]
    assert [r[1] for r in rows] == ["no: identical for 6 reads (no ID given)", "yes"], text
    assert "clone-safe: one" in text
    rows = report_json.as_json(cells, {})["cells"]
    assert [r["clone_safe"] for r in rows] == ["no: identical for 6 reads (no ID given)", "yes"]
    json.dumps(rows)
    html = report_html.matrix_table(cells, tmp_path)
    assert f"<th>{report.CLONE_SAFE}</th>" in html and "<td>yes</td>" in html


def test_clone_harness_clone_summary_fits_the_report_schema(tmp_path: Path) -> None:
    """A clone case's summary, as benchlib/commands/clones.py makes it, in report.json: the
    schema knows its keys, its clones are a list, their logs relative paths."""
    found = outcome(tmp_path, blocks("a"), blocks("b"))
    cells = [Cell("tcg-quiet", "stock", clone_safe=found.verdict(), clone=found.summary())]
    data = json.loads(json.dumps(report_json.as_json(cells, {}, tmp_path)))
    clone = data["cells"][0]["clone"]
    assert [c["name"] for c in clone["clones"]] == ["clone-a", "clone-b"]
    assert all((tmp_path / c["data_log"]).is_file() and not c["data_log"].startswith("/")
               for c in clone["clones"]), clone["clones"]
    try:
        import jsonschema
    except ImportError:
        pytest.fail("python3-jsonschema is missing: scripts/setup.sh installs it")
    schema = json.loads(report_json.SCHEMA.read_text())
    jsonschema.validate(clone, {**schema, **schema["$defs"]["clone"]})


@pytest.fixture
def saved_guest(libvirt_conn, initrd: Path, accel: str, run_dir: Path):
    """A started stock guest in a quiet profile, for the error paths (not waited on)."""
    profile = get_profile(QUIET.one())
    request = plan.request(profile, variant="stock", initrd=initrd, outdir=run_dir,
                           accel=accel, tasks=["clone"], params={"clone_at": "600"})
    guest = restore.SavedGuest(libvirt_conn, request, "restore-errors")
    yield guest
    assert guest.ready.name not in running_bench_domains(libvirt_conn), \
        f"{guest.ready.name} outlived its with block"


def test_clone_harness_full_disk_is_one_line_naming_the_step(saved_guest, monkeypatch) -> None:
    with saved_guest as guest:
        monkeypatch.setattr(restore.shutil, "disk_usage",
                            lambda _path: type("Usage", (), {"free": 1 << 20})())
        with pytest.raises(restore.RestoreFailed, match=r"^save bench-.*: 1 MiB free in .*, the "
                                                        r"image needs up to \d+ MiB$"):
            guest.save()


def test_clone_harness_bad_image_is_one_line_naming_the_step(saved_guest, tmp_path) -> None:
    bad = tmp_path / "not-a-saved-image"
    bad.write_bytes(b"\0" * 4096)
    with saved_guest as guest:
        with pytest.raises(restore.RestoreFailed, match=r"^read the domain of .*not-a-saved-image: "):
            guest.restore_clone(bad, "clone-a")


ID = " len=0x10 id0=0x1111 id1=0x2222"


@pytest.mark.parametrize("seeds, took", [
    # The primary DRBG seeded with the ID between the vmfork and the secondaries' reseed.
    ([(7.002, "drbgseed", " len=0x18 d0=0x1111 d1=0x2222")], True),
    # Only after the secondaries were reseeded: too late for them (lrng before 0020).
    ([(7.010, "drbgseed", " len=0x18 d0=0x1111 d1=0x2222")], False),
    # A seed before the vmfork, or one that does not begin with the ID.
    ([(6.500, "drbgseed", " len=0x18 d0=0x1111 d1=0x2222"),
      (7.002, "drbgseed", " len=0x3c d0=0x9999 d1=0x2222")], False),
])
def test_clone_harness_primary_takes_the_generation_id_before_the_secondaries(
        tmp_path: Path, seeds: list, took: bool) -> None:
    events = sorted([(7.0, "vmfork", ID), (7.001, "reseed_vmfork", " len=0x10"),
                     (7.005, "reseed", " len=0x48 internal=1"), *seeds])
    clone = outcome(tmp_path, blocks("a"), blocks("b"), events, genid=True).clones[0]
    assert bool(clone.vmfork_id_seeds()) is took


def test_clone_harness_nothing_compared_is_not_judged_never_yes(tmp_path: Path) -> None:
    """Every round read before the save: nothing compared, so no 'yes' (it was)."""
    a, b = blocks("a", rounds=1), blocks("b", rounds=1)
    found = outcome(tmp_path, a, b, pre=read_lines(a), genid=True)
    assert found.compared_rounds() == []
    assert found.verdict().startswith("not judged: no read of either clone came after"), \
        found.verdict()


@pytest.mark.parametrize("kernel, safe, status", [
    ("lrng", "no: identical for 2 reads", "not_ok"),        # the bench's series: fails
    ("custom", "no: identical for 2 reads", "not_ok"),      # a user's kernel: fails
    ("custom", "no driver", "not_ok"),
    ("stock", "no: identical for 2 reads", "clone_unsafe"),   # Debian's: a finding
    ("lrng", "no: identical for 6 reads (no ID given)", "ok"),  # the control, expected
    ("lrng", "no driver (diverged by another reseed)", "ok"),
    ("crng", "not judged: no read of either clone came after the restore", "not_ok"),
    ("crng", "yes", "ok"),
])
def test_clone_harness_clone_safe_decides_the_cell(kernel: str, safe: str, status: str,
                                                   tmp_path: Path) -> None:
    cell = Cell("tcg-input", kernel, clone_safe=safe, clone={"folder": str(tmp_path)})
    cell.verdict = lambda: Cell._clone_verdict(cell) or report.OK    # the boots were fine
    assert cell.status() == status, cell.verdict()
    assert report.run_failed([cell]) is (status == "not_ok")
    said = report.headline([cell])
    if status == "clone_unsafe":
        assert said.startswith("passed") and "1 stock cell clone-unsafe" in said, said
        assert cell.finding()
