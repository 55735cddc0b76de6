"""What the report measures in one boot, each figure on one named clock.

printk: guest seconds since boot, from the kernel log (the RNG's messages and the
probe's /dev/kmsg markers); trace: the kprobe trace, on printk's clock
(trace_clock=global); boottime: the probe's CLOCK_BOOTTIME; host: seconds since
the domain was created.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..core.bootrecord import BootRecord
from .spills import CAUSES, spills
from .trace import TRACE_TASK, TraceEvent, TraceIncomplete, armed_events, trace_of

# The trace sets' event of an interrupt the RNG sampled (add_interrupt_randomness
# and its lrng counterpart, fixtures/trace-*).
IRQ_EVENT = "air"


@dataclass(frozen=True)
class IrqsToReady:
    interrupts: int     # sampled interrupts (add_interrupt_randomness) before ready
    cpus: int           # on how many CPUs they came


def ready_printk(record: BootRecord) -> Optional[float]:
    """printk time the variant became ready: its ready milestone, or the first
    later one that stands for it when a state was skipped."""
    times = [t for t in (record.milestone(m) for m in record.spec().ready_milestones)
             if t is not None]
    return min(times, default=None)


def final_printk(record: BootRecord) -> Optional[float]:
    return record.milestone(record.spec().final)


def until_outcome(record: BootRecord) -> Optional[str]:
    """'reached' or 'cap' from the guest's `until` task, None if it did not run."""
    task = record.tasks.get("until")
    line = next((l for l in task.lines if l.startswith("until: ")), "") if task else ""
    return line.split()[1] if line else None


def trace_events(record: BootRecord) -> Optional[list[TraceEvent]]:
    """The boot's kprobe trace, or None where it is no evidence: the task failed,
    the buffer lost events, or it holds no event at all (a trace armed for a whole
    boot always sees interrupts: an empty one saw nothing)."""
    task = record.tasks.get(TRACE_TASK)
    if task is None or task.rc != 0:
        return None
    try:
        return trace_of(task.sections()) or None
    except TraceIncomplete:
        return None


def irqs_to_ready(record: BootRecord) -> Optional[IrqsToReady]:
    """Interrupts the RNG sampled before its ready milestone, from the trace
    (armed at fs_initcall: interrupts before it are not counted); None unless the
    interrupt event was armed, so that a count of 0 means none came."""
    ready = ready_printk(record)
    return None if ready is None else _irqs(record, ready)


def irqs_seen(record: BootRecord) -> Optional[IrqsToReady]:
    """Every interrupt the RNG sampled in the traced boot (for a boot never ready);
    None unless the interrupt event was armed."""
    return _irqs(record, float("inf"))


def _irqs(record: BootRecord, before: float) -> Optional[IrqsToReady]:
    """Interrupts the trace saw before a printk time, and on how many CPUs; None
    unless the trace is evidence and its interrupt event was armed."""
    events = trace_events(record)
    if events is None or IRQ_EVENT not in armed_events(record.tasks[TRACE_TASK].sections()):
        return None
    seen = [e for e in events if e.event == IRQ_EVENT and e.t < before]
    return IrqsToReady(len(seen), len({e.cpu for e in seen}))


def traced_until(record: BootRecord) -> Optional[float]:
    """printk time of the trace's last event: how far into the boot it saw."""
    events = trace_events(record)
    return events[-1].t if events else None


def spill_causes_to_ready(record: BootRecord) -> Optional[dict[str, int]]:
    """The fast-pool spills before ready, by what triggered each (spills.Spill.cause:
    the variant's spill_interrupts, the 1 s flush, a CPU's first spill in the
    trace); None for a variant without a fast pool (lrng: no spill_interrupts), a
    trace without the spill event armed, or one that saw nothing before ready (the
    kprobes are armed at fs_initcall: a crng ready earlier was made by spills the
    trace could not see, which is not "none")."""
    threshold, events, ready = record.spec().spill_interrupts, trace_events(record), \
        ready_printk(record)
    if threshold is None or events is None or ready is None or "mix" not in armed_events(
            record.tasks[TRACE_TASK].sections()):
        return None
    if not any(e.t < ready for e in events):
        return None
    causes = dict.fromkeys(CAUSES, 0)
    for spill in spills(events):
        if spill.t < ready:
            causes[spill.cause(threshold)] += 1
    return causes


def watched_never_ready(record: BootRecord) -> bool:
    """The probe polled GRND_NONBLOCK until its timeout without one success, and the
    boot then waited out its cap for the final milestone: the RNG was seen not
    ready to the end (a boot without that evidence proves nothing of the kind)."""
    return (record.probe_event("nonblock_timeout") is not None
            and record.probe_event("nonblock_ok") is None
            and until_outcome(record) == "cap")


def credit_rate(record: BootRecord) -> Optional[float]:
    """Bits credited to the input pool per second over the traced boot."""
    events = trace_events(record)
    if not events:
        return None
    bits = sum(e.int("bits") for e in events if e.event == "cred")
    span = events[-1].t - events[0].t
    return bits / span if span > 0 else None


def blocking_wait(record: BootRecord) -> Optional[float]:
    """How long the probe's blocking getrandom() blocked (boottime seconds)."""
    event = record.probe_event("blocking")
    if not event or event.get("ret") != "32":
        return None
    return float(event["t_end"]) - float(event["t_start"])


def first_nonblock_ok_printk(record: BootRecord) -> Optional[float]:
    """printk time of the probe's first successful GRND_NONBLOCK (its kmsg marker)."""
    return next((t for t, text in record.messages if text.startswith("bench: nonblock ok")), None)


def failed_tasks(record: BootRecord) -> list[str]:
    return [f"{name} rc={task.rc}" for name, task in record.tasks.items() if task.rc != 0]
