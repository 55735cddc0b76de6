"""Suspend to RAM and back, judged from the trace (task "suspend").

A resumed system must not serve from the state it had before it slept: 6.1
reseeds its CRNG when the system comes back from suspend (random_pm_notification),
the crng series keeps that, and the lrng series reseeds every secondary DRBG
(lrng 0022). The guest marks its suspend and its return in the kernel log
(/dev/kmsg); the variant's clone trace set (fixtures/trace-clone-*: every event
named "reseed..." changes what getrandom() reads) is armed on the command line,
and a reseed must lie between the two marks. The trace's clock is printk's, so the
two compare.
"""
from __future__ import annotations

from . import trace
from ..core.bootrecord import BootRecord

TASK = "suspend"
SUSPEND_MARK = "bench: suspend"
RESUMED_MARK = "bench: resumed"
RESEED_PREFIX = trace.RESEED_PREFIX
# The trace's clock and printk's may disagree by a few microseconds around a resume
# (seen: the resume's reseed traced at 3.119639 s, the mark written after it stamped
# 3.119638 s): the window ends this much after the return mark.
CLOCK_SLACK_S = 0.001


def reseeds_on_resume(record: BootRecord) -> list[trace.TraceEvent]:
    """The reseeds between the guest's suspend and its return to user space;
    AssertionError (naming the data log) where the trace could not have seen one."""
    record.finished_task(TASK)
    marks = {text: t for t, text in record.messages if text in (SUSPEND_MARK, RESUMED_MARK)}
    assert set(marks) == {SUSPEND_MARK, RESUMED_MARK}, (
        f"the kernel log lacks the suspend marks (found {sorted(marks)}): nothing to place "
        f"the trace against ({record.data_log})")
    sections = record.task(trace.TRACE_TASK).sections()
    reseed_events = [e for e in trace.armed_events(sections) if e.startswith(RESEED_PREFIX)]
    assert reseed_events, f"the trace set arms no reseed event ({record.data_log})"
    blind = trace.blind_spots(sections, reseed_events)
    assert not blind, f"the trace could not see every reseed: {'; '.join(blind)} ({record.data_log})"
    return [e for e in trace.trace_of(sections)
            if e.event.startswith(RESEED_PREFIX)
            and marks[SUSPEND_MARK] <= e.t <= marks[RESUMED_MARK] + CLOCK_SLACK_S]
