"""Order of events in one kernel log: the probe's markers against the RNG's messages.

The probe writes a /dev/kmsg marker before every getrandom() attempt and after a
success, so "this call failed before the RNG said it was ready" is read off one
clock and one sequence, the kernel log's.
"""
from __future__ import annotations

from typing import Callable

from ..core.bootrecord import BootRecord, kmsg_position

# The probe's /dev/kmsg marker once its blocking getrandom() returned (fixtures/probe.c,
# followed by what it returned).
BLOCKING_RETURNED = "bench: blocking returned"

# printk and user space race by this much at most when one CPU makes the RNG ready
# (the state flips before the message is printed) and another observes it.
RACE_SLACK_S = 0.5


def ready_position(record: BootRecord, is_ready: Callable[[str], bool],
                   what: str) -> tuple[int, float]:
    """(kernel log index, printk time) of the first message that says `what`."""
    for index, (t, text) in enumerate(record.messages):
        if is_ready(text):
            return index, t
    raise LookupError(f"no '{what}' in the kernel log of {record.name} ({record.data_log})")


def assert_nonblock_eagain_until_ready(record: BootRecord, ready: tuple[int, float],
                                       what: str) -> None:
    """GRND_NONBLOCK failed with EAGAIN before `ready` and succeeded from it on."""
    ready_index, ready_t = ready
    ok = record.probe_event("nonblock_ok")
    assert ok, f"GRND_NONBLOCK never succeeded though '{what}' at {ready_t} s"
    last_fail = int(ok["eagain"])   # attempts 1..eagain failed
    if last_fail:
        fail_index, fail_t = kmsg_position(record, f"bench: nonblock attempt {last_fail}")
        assert fail_index < ready_index, (
            f"attempt {last_fail} got EAGAIN at {fail_t} s, after '{what}' at {ready_t} s")
    _, ok_t = kmsg_position(record, "bench: nonblock ok")
    assert ok_t >= ready_t - RACE_SLACK_S, (
        f"GRND_NONBLOCK succeeded at {ok_t} s, before '{what}' at {ready_t} s")


def blocking_return_time(record: BootRecord, ready: tuple[int, float], what: str,
                         must_start_before: bool = True) -> float:
    """Assert a blocking getrandom() returned the full length at or after `ready`
    (and, with must_start_before, that it began before, so it really waited);
    return the printk time it returned at."""
    ready_index, ready_t = ready
    blocking = record.probe_event("blocking")
    assert blocking, f"the blocking child did not report (log: {record.data_log})"
    assert blocking["ret"] == "32" and blocking["errno"] == "0", blocking
    start_index, start_t = kmsg_position(record, "bench: blocking attempt 1")
    assert start_index < ready_index or not must_start_before, (
        f"the blocking call started at {start_t} s, after '{what}' at {ready_t} s: "
        "it tested nothing")
    _, return_t = kmsg_position(record, f"{BLOCKING_RETURNED} 32")
    assert return_t >= ready_t - RACE_SLACK_S, (
        f"blocking getrandom() returned at {return_t} s, before '{what}' at {ready_t} s")
    return return_t
