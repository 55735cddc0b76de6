"""Harness self-tests of blocking checked from above (benchlib/checks/wakes.py): the trace's
wakes with their stacks, and the orders the checks read. No hypervisor needed."""
from __future__ import annotations

from pathlib import Path

import pytest

from benchlib.checks import wakes
from benchlib.core.bootrecord import BootRecord, TaskOutput
from benchlib.checks.trace import parse_trace
from test_harness import TRACE_HEAD, fake_record, trace_line

READY = "random: crng init done"
READY_T = 2.0
READER = 95
ARMED = ["rc=0 enable=1", 'filter=comm == "probe"',
         'trigger=stacktrace:unlimited if comm == "probe"']


def wake_lines(cpu: int, t: float, pid: int, stack: tuple[str, ...]) -> list[str]:
    """A sched_waking of the probe's task `pid` and its stacktrace trigger's entry."""
    return [f"     kworker/0:1-20      [{cpu:03d}] dN...     {t:.6f}: sched_waking: "
            f"comm=probe pid={pid} prio=120 target_cpu=000",
            f"     kworker/0:1-20      [{cpu:03d}] dN...     {t + 1e-4:.6f}: <stack trace>",
            *(f" => {frame}" for frame in stack)]


BY_SEEDING = ("autoremove_wake_function", "__wake_up_common", "__wake_up_common_lock",
              "lrng_sdrbg_seed", "process_one_work")
BY_LATE_WORK = ("autoremove_wake_function", "__wake_up_common", "__wake_up_common_lock",
                "lrng_late_wake+0x10/0x20", "process_one_work")


def traced_reader(tmp_path: Path, lines: list[str], armed: list[str] = ARMED) -> BootRecord:
    """A boot whose blocked reader (pid READER) returned at 3.0 s, READY at READY_T,
    with the trace task's sections as given."""
    record = fake_record(tmp_path)
    record.messages = [(READY_T, READY), (3.0, "bench: blocking returned 32")]
    record.probe = [{"event": "blocking", "ret": "32", "errno": "0", "pid": str(READER)}]
    events = [trace_line(0, 1.5, "jtimer", ""), *lines]
    head = TRACE_HEAD.format(len(events), len(events))
    record.tasks["trace"] = TaskOutput("trace", 0, [
        "@@SECTION kprobe_events", "p:kprobes/jtimer entropy_timer",
        "@@SECTION kprobe_profile", "  jtimer 1 0",
        *(["@@SECTION wakes", *armed] if armed else []),
        "@@SECTION trace", head, *events])
    return record


def test_harness_wakes_a_stack_belongs_to_the_event_before_it_on_its_cpu() -> None:
    lines = (wake_lines(0, 1.0, READER, BY_SEEDING)[:1] + [trace_line(1, 1.00005, "air", "irq=4")]
             + wake_lines(0, 1.0, READER, BY_SEEDING)[1:])
    events = parse_trace([TRACE_HEAD.format(3, 3)] + lines)
    wake = next(e for e in events if e.event == wakes.WAKE_EVENT)
    assert wake.stack == BY_SEEDING and wake.args["pid"] == str(READER)
    assert wakes.waker(wake) == "lrng_sdrbg_seed"
    assert next(e for e in events if e.event == "air").stack == ()


def test_harness_wakes_a_reader_woken_before_the_message_is_on_time(tmp_path: Path) -> None:
    record = traced_reader(tmp_path, wake_lines(0, 1.9, READER, BY_SEEDING)
                           + wake_lines(0, 2.5, READER + 1, BY_LATE_WORK))
    woken = wakes.assert_not_woken_after_ready(record, READY_T, READY)
    assert woken is not None and wakes.waker(woken) == "lrng_sdrbg_seed"


def test_harness_wakes_a_reader_woken_after_the_message_slept_on(tmp_path: Path) -> None:
    record = traced_reader(tmp_path, wake_lines(0, 1.2, READER, BY_SEEDING)
                           + wake_lines(0, 2.9, READER, BY_LATE_WORK))
    with pytest.raises(AssertionError, match=r"slept on past .* by lrng_late_wake"):
        wakes.assert_not_woken_after_ready(record, READY_T, READY)


@pytest.mark.parametrize("armed, lines, why", [
    ([], [], "no 'wakes' section"),
    (["rc=1 enable=0", "filter=none", "trigger="], [], "not armed"),
    (ARMED, [], "no wake of the probe's tasks was traced"),
])
def test_harness_wakes_a_trace_that_could_not_see_wakes_cannot_tell(
        tmp_path: Path, armed: list[str], lines: list[str], why: str) -> None:
    """No wake after readiness proves nothing unless the wakes were armed and seen."""
    with pytest.raises(AssertionError, match=f"cannot tell .*{why}"):
        wakes.assert_not_woken_after_ready(traced_reader(tmp_path, lines, armed), READY_T, READY)


@pytest.mark.parametrize("after, red", [(0, False), (1, False), (2, True)])
def test_harness_wakes_the_jitter_loop_stops_at_readiness(tmp_path: Path, after: int,
                                                          red: bool) -> None:
    """One timer call already due may follow the message; a second means the loop
    went on checking nothing."""
    lines = [trace_line(1, READY_T + 0.01 * (i + 1), "jtimer", "") for i in range(after)]
    record = traced_reader(tmp_path, wake_lines(0, 1.2, READER + 1, BY_SEEDING) + lines)
    if red:
        with pytest.raises(AssertionError, match="jitter loop ran on past"):
            wakes.assert_jitter_stopped_at_ready(record, READY_T, READY)
    else:
        assert wakes.assert_jitter_stopped_at_ready(record, READY_T, READY) == 1
