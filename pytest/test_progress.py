"""The main job's progress (benchlib/commands/progress.py) and its time estimate
(benchlib/commands/eta.py): which boots a boot still to run is costed from, the boots run
at once, no estimate before a boot finished; --quiet and --progress as the
command line gives them, and the JSON lines. Pure Python: no guest is booted.
"""
from __future__ import annotations

import io
import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from benchlib.commands import matrix as boot_matrix, run
from benchlib.commands.eta import BootKey, Eta
from benchlib.commands.progress import JSON, QUIET, TEXT, BootLabel, Progress
from benchlib.report.report import Cell
import test_arguments
from test_arguments import QUIET as QUIET_PROFILE, assert_refused, bench, fake_bzimage

MATRIX, THROUGHPUT = boot_matrix.MATRIX, boot_matrix.THROUGHPUT
# Finished boots, (profile, variant, seconds), all of the matrix: cell means
# p1×v1 10, p2×v1 30, p2×v2 50; variant v1 20, v2 50; profile p1 10, p2 40; all 30.
FINISHED = [("p1", "v1", 10.0), ("p2", "v1", 30.0), ("p2", "v2", 50.0)]
NOON = datetime(2026, 1, 2, 12, 0, 5, tzinfo=timezone(timedelta(hours=1)))
# The environment of a fresh clone, as test_arguments.py refuses bad input in it.
fresh = test_arguments.fresh


def matrix(profile: str, variant: str) -> BootKey:
    return BootKey(profile, variant, MATRIX)


def measured(at_once: int = 1) -> Eta:
    """An estimate that saw the FINISHED boots, the matrix's boots run `at_once`."""
    eta = Eta({MATRIX: at_once})
    for profile, variant, seconds in FINISHED:
        key = matrix(profile, variant)
        eta.expect([key])
        eta.finished(key, seconds)
    return eta


# --- the estimate

@pytest.mark.parametrize("pending,expected_s", [
    (matrix("p1", "v1"), 10.0),     # its own cell, not v1's mean (20) nor p1's (10)...
    (matrix("p2", "v1"), 30.0),     # ...nor here v1's 20 or p2's 40
    (matrix("p3", "v1"), 20.0),     # no such cell: its variant's boots
    (matrix("p1", "v2"), 50.0),     # its variant (50) before its profile (10)
    (matrix("p1", "v3"), 10.0),     # neither: its profile's boots
    (matrix("p2", "v3"), 40.0),
    (matrix("p3", "v3"), 30.0),     # none of them: every boot
], ids=["cell", "cell-2", "variant", "variant-before-profile", "profile", "profile-2",
        "overall"])
def test_progress_eta_costs_a_boot_from_the_boots_most_like_it(pending: BootKey,
                                                                expected_s: float) -> None:
    eta = measured()
    assert eta.expected_seconds(pending) == pytest.approx(expected_s)
    eta.expect([pending])
    assert eta.seconds_left() == pytest.approx(expected_s)


def test_progress_eta_keeps_workloads_apart() -> None:
    """A throughput boot is costed from throughput boots, any of them, before the
    matrix boots of its own variant; from every boot only when none finished."""
    eta = measured()
    assert eta.expected_seconds(BootKey("p1", "v1", THROUGHPUT)) == pytest.approx(30.0)
    eta.expect([BootKey("p9", "v9", THROUGHPUT)])
    eta.finished(BootKey("p9", "v9", THROUGHPUT), 4.0)
    assert eta.expected_seconds(BootKey("p1", "v1", THROUGHPUT)) == pytest.approx(4.0)
    # and a matrix boot from the matrix's, not from every boot's (10+30+50+4)/4
    assert eta.expected_seconds(matrix("p3", "v3")) == pytest.approx(30.0)


def test_progress_eta_divides_by_the_boots_run_at_once() -> None:
    eta = measured(at_once=2)
    eta.expect([matrix("p1", "v1")] * 4)
    assert eta.seconds_left() == pytest.approx(4 * 10.0 / 2)
    eta.expect([BootKey("p1", "v1", THROUGHPUT)])       # one at a time: not named
    assert eta.seconds_left() == pytest.approx(4 * 10.0 / 2 + 30.0)


def test_progress_eta_runs_no_more_at_once_than_are_left() -> None:
    eta = measured(at_once=4)
    eta.expect([matrix("p1", "v1")])
    assert eta.seconds_left() == pytest.approx(10.0)


def test_progress_eta_says_nothing_before_a_boot_finished() -> None:
    eta = Eta({MATRIX: 2})
    eta.expect([matrix("p1", "v1")] * 3)
    assert eta.seconds_left() is None
    assert eta.expected_seconds(matrix("p1", "v1")) is None
    assert (eta.done(), eta.planned()) == (0, 3)
    eta.finished(matrix("p1", "v1"), 12.0)
    assert eta.seconds_left() == pytest.approx(2 * 12.0 / 2)
    assert (eta.done(), eta.planned()) == (1, 3)


def test_progress_eta_counts_done_and_planned_per_workload() -> None:
    eta = Eta({MATRIX: 1})
    eta.expect([matrix("p1", "v1")] * 2 + [BootKey("p1", "v1", THROUGHPUT)] * 3)
    eta.finished(matrix("p1", "v1"), 5.0)
    assert eta.tally()[:2] == (1, 5)
    assert (eta.done(MATRIX), eta.planned(MATRIX)) == (1, 2)
    assert (eta.done(THROUGHPUT), eta.planned(THROUGHPUT)) == (0, 3)
    eta.finished(matrix("p1", "v1"), 7.0)
    assert eta.seconds_left() == pytest.approx(3 * 6.0)     # matrix mean, workload unmeasured


# --- the lines

def progress_lines(style: str) -> list[str]:
    """What one boot's start and end, and a message, write in this style; the
    start before any boot finished."""
    out = io.StringIO()
    say = Progress(style, stream=out, now=lambda: NOON)
    eta = Eta({MATRIX: 1})
    key = matrix("tcg-quiet", "stock")
    eta.expect([key] * 3)
    boot = BootLabel(key, 1, 3)
    say.message("guests run under TCG")
    say.boot_started(boot, eta)
    eta.finished(key, 40.0)
    say.boot_finished(boot, "final milestone crng init done", 40.0, eta)
    return out.getvalue().splitlines()


def test_progress_text_lines() -> None:
    assert progress_lines(TEXT) == [
        "==> [run 12:00:05] guests run under TCG",
        "==> [run 12:00:05] tcg-quiet × stock matrix boot 1/3 started",
        "==> [run 12:00:05] [1/3] tcg-quiet × stock matrix boot 1/3: final milestone "
        "crng init done after 40 s, about 80 s of boots left"]


def test_progress_json_lines() -> None:
    events = [json.loads(line) for line in progress_lines(JSON)]
    assert [e["event"] for e in events] == ["message", "boot_started", "boot_finished"]
    for event in events:
        assert datetime.fromisoformat(event["time"]) == NOON, event["time"]
        assert event["time"] == "2026-01-02T12:00:05+01:00"
    assert events[0] == {"time": "2026-01-02T12:00:05+01:00", "event": "message",
                         "message": "guests run under TCG"}
    boot = {"profile": "tcg-quiet", "variant": "stock", "workload": MATRIX, "boot": 1,
            "boots": 3, "host": None, "planned": 3}
    assert events[1] == {**events[1], **boot, "done": 0, "outcome": None, "seconds": None,
                         "eta_s": None}
    assert events[2] == {**events[2], **boot, "done": 1, "seconds": 40.0, "eta_s": 80.0,
                         "outcome": "final milestone crng init done"}
    assert events[2]["message"] == progress_lines(TEXT)[2].split("] ", 1)[1]


def test_progress_quiet_writes_nothing() -> None:
    assert progress_lines(QUIET) == []


# --- the options

@pytest.mark.parametrize("argv,style", [
    ([], TEXT), (["--quiet"], QUIET), (["--progress=json"], JSON), (["--progress", "json"], JSON),
    (["--progress", "text"], TEXT)])
def test_progress_options_parse(argv: list[str], style: str) -> None:
    args = run.parse_args(["--variant", "stock", *argv])
    assert run.progress_of(args).style == style


@pytest.mark.parametrize("argv,named", [
    (["--progress", "xml"], ["--progress", "'xml'"]),
    (["--progress=yes"], ["--progress", "'yes'"]),
    (["--quiet", "--progress=json"], ["--quiet", "--progress", "not allowed"]),
], ids=["xml", "yes", "quiet-and-json"])
def test_progress_options_refuse_bad_values(argv: list[str], named: list[str],
                                            fresh: dict[str, str]) -> None:
    result, elapsed = bench("benchlib.commands.run", ["--check-only", *argv], fresh)
    assert_refused(result, elapsed, fresh, "bench: ", *named)


@pytest.mark.parametrize("style", [QUIET, JSON])
def test_progress_options_reach_the_run(style: str, tmp_path: Path, capsys) -> None:
    """The run's own messages (here: the custom kernel it was given) follow the
    options, while the plan --dry-run prints stays."""
    kernel = fake_bzimage(tmp_path / "bzImage")
    flag = "--quiet" if style == QUIET else f"--progress={style}"
    assert run.main(["--dry-run", flag, "--variant", "stock", "--profile", QUIET_PROFILE,
                     "--kernel", str(kernel)]) == 0
    out, err = capsys.readouterr()
    assert "plan: " in out, out
    if style == QUIET:
        assert err == "", err
    else:
        event, = [json.loads(line) for line in err.splitlines()]
        assert event["event"] == "message" and event["message"].startswith("kernel 'custom': ")


def test_throughput_rounds_start_one_cell_further_on_each_time() -> None:
    """Round n of the comparison starts n-1 cells further on: every cell is first,
    middle and last once in three rounds."""
    cells = [Cell("tcg-virtio-rng", v) for v in ("crng", "lrng", "stock")]
    jobs = boot_matrix.jobs_of([(c, [None, None, None]) for c in cells], THROUGHPUT)  # type: ignore
    order = [(job.n, job.cell.variant) for job in boot_matrix.in_rounds(jobs)]
    assert order == [(1, "crng"), (1, "lrng"), (1, "stock"),
                     (2, "lrng"), (2, "stock"), (2, "crng"),
                     (3, "stock"), (3, "crng"), (3, "lrng")], order
