"""Who woke the probe's blocked reader, and when: blocking checked from above.

A trace set's "wakes probe" line has the guest trace every wake of the probe's
tasks (sched_waking, in the waker's context, with its kernel stack: fixtures/init).
Both 6.1's random.c and the LRNG wake what waits for readiness in the call that
makes them ready, before they print that they are ready. So a blocked reader
woken after the ready message slept on past readiness: something else woke it,
late. The check needs no time margin: it is an order of two traced events on one
clock (the trace's and printk's, trace_clock=global).

A 6.1 reader blocked while the jitter generator can run does not sleep at all: it
loops in try_to_generate_entropy(), arming a timer (entropy_timer) and checking
crng_ready() each time round. It is late if the loop runs on past readiness, which
the timer's calls after the ready message show.
"""
from __future__ import annotations

from typing import Optional

from .ordering import BLOCKING_RETURNED
from ..core.bootrecord import BootRecord, kmsg_position
from .trace import TRACE_TASK, TraceEvent, blind_spots, trace_of

WAKE_EVENT = "sched_waking"
WAKES_SECTION = "wakes"
# fixtures/trace-stock-wakes: the jitter generator's timer callback.
JITTER_TIMER = "jtimer"
# A reader that sees readiness leaves the loop at its next check and deletes its
# timer; one call already due may still run first (armed for the next jiffy, it
# fires before the reader's del_timer_sync()). More means the loop went on.
JITTER_TIMER_IN_FLIGHT = 1
# The wait-queue machinery between a waker and try_to_wake_up(), skipped when
# naming the waker from the stack.
WAKE_MACHINERY = frozenset({
    "try_to_wake_up", "wake_up_process", "default_wake_function", "autoremove_wake_function",
    "woken_wake_function", "__wake_up_common", "__wake_up_common_lock", "__wake_up",
    "__wake_up_sync_key", "__wake_up_locked", "__wake_up_locked_key"})


def armed(sections: dict[str, list[str]], events: list[TraceEvent]) -> list[str]:
    """Why the trace could not have seen the probe's wakes (empty when it could):
    the init's report of what it armed (the trace task's sections), and wakes of
    the probe actually traced (`events`)."""
    lines = sections.get(WAKES_SECTION)
    if not lines:
        return ["no 'wakes' section: the trace set has no \"wakes\" line"]
    report = " ".join(lines)
    if "rc=0" not in report or "enable=1" not in report or 'comm == "probe"' not in report:
        return [f"the wakes of the probe were not armed ({report})"]
    if not any(e.event == WAKE_EVENT and e.args.get("comm") == "probe" for e in events):
        return ["armed, but no wake of the probe's tasks was traced"]
    return []


def waker(event: TraceEvent) -> str:
    """The function that woke a task: its stack's first frame outside the wait
    queue's machinery ('?' without a stack)."""
    for frame in event.stack:
        name = frame.split("+", 1)[0]
        if name not in WAKE_MACHINERY:
            return name
    return "?"


def blocked_reader(record: BootRecord) -> tuple[int, float]:
    """The probe's blocking child: its pid, and the printk time of its marker
    after getrandom() returned."""
    blocking = record.probe_event("blocking")
    assert blocking and "pid" in blocking, (
        f"the blocking child did not report its pid ({record.data_log})")
    _, returned_t = kmsg_position(record, BLOCKING_RETURNED)
    return int(blocking["pid"]), returned_t


def assert_not_woken_after_ready(record: BootRecord, ready_t: float,
                                 what: str) -> Optional[TraceEvent]:
    """The blocked reader was not woken between the ready message (`what`, at
    ready_t) and its return: it did not sleep on past readiness. Returns the wake
    that let it return, if it slept (the last one before the message)."""
    sections = record.finished_task(TRACE_TASK).sections()
    events = trace_of(sections)
    blind = armed(sections, events)
    assert not blind, f"cannot tell who woke the blocked reader: {'; '.join(blind)}"
    pid, returned_t = blocked_reader(record)
    wakes = [e for e in events if e.event == WAKE_EVENT and e.args.get("pid") == str(pid)
             and e.t < returned_t]
    late = [e for e in wakes if e.t >= ready_t]
    assert not late, (
        f"the blocked reader (pid {pid}) slept on past '{what}' at {ready_t:.6f} s: woken at "
        + ", ".join(f"{e.t:.6f} s by {waker(e)}" for e in late)
        + f"; it returned at {returned_t:.6f} s")
    return wakes[-1] if wakes else None


def assert_jitter_stopped_at_ready(record: BootRecord, ready_t: float, what: str) -> int:
    """6.1's jitter loop stopped at readiness: its timer fired at most
    JITTER_TIMER_IN_FLIGHT times after the ready message. Returns the calls
    before it (the loop ran: evidence that the reader polled)."""
    sections = record.finished_task(TRACE_TASK).sections()
    blind = blind_spots(sections, [JITTER_TIMER])
    assert not blind, f"cannot count the jitter timer's calls: {'; '.join(blind)}"
    calls = [e.t for e in trace_of(sections) if e.event == JITTER_TIMER]
    after = [t for t in calls if t >= ready_t]
    assert len(after) <= JITTER_TIMER_IN_FLIGHT, (
        f"the jitter loop ran on past '{what}' at {ready_t:.6f} s: its timer fired "
        f"{len(after)} times after it (the last at {after[-1]:.6f} s)")
    return len(calls) - len(after)
