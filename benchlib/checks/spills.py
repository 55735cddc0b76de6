"""Fast-pool spills as the kprobe trace saw them, and what each one did.

A spill is mix_interrupt_randomness() running on one CPU: its entry (`mix`, with
the fast pool's interrupt count), then on the same CPU, until its return
(`mixret`), whatever it did: a fast load into the crng (`fl` returning 1) or a
credit to the input pool (`cred`). The cause of a spill is read from the trace
too: the fast pool's count against the threshold, or the time since the same
CPU's previous spill.

A trace set may also have the function tracer record, from start_kernel on, the
calls of the functions behind those kprobes ("function" lines: CPU and time, no
arguments). Before the kprobes exist (fs_initcall) those calls are the only
record: a spill is then a call of mix_interrupt_randomness() whose count is the
calls of add_interrupt_randomness() on that CPU since its previous spill, a call
of crng_rfc_fast_load() inside it is a fast load tried (its return is not seen),
and a call of _credit_init_bits() inside it is a credit of unknown bits. Once the
kprobes exist, each call has a kprobe event just before it on its CPU (its twin),
and the kprobe's arguments are the record.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from . import trace
from .trace import TraceEvent

# drivers/char/random.c: the fast pool's count is a u32 whose bit 31 is
# MIX_INFLIGHT; crediting and thresholds use the low 16 bits.
COUNT_MASK = 0xFFFF
# A CPU's fast pool spills at a variant's count of interrupts (variant.toml's
# spill_interrupts: 1024 in 6.1, 64 for the crng series' fast loads), or after this
# long without a spill, whatever its count.
FLUSH_INTERVAL_S = 1.0
# The flush is decided in jiffies (HZ=100 in the bench's kernels: 10 ms), the trace
# is stamped by sched_clock: when ticks come late on a loaded host, jiffies lag and
# catch up, and a flush may be seen this much before the full second (seen: 0.971 s
# after the CPU's previous spill, in the early boot of a CI run on 2026-12-06).
FLUSH_SLACK_S = 0.05
FIRST_OR_FLUSH = "first-or-flush"
# The function tracer's events (named by their function) and, for the probes at a
# function's entry, the kprobe event that is their twin once the kprobes exist.
FN_INTERRUPT = "add_interrupt_randomness"
FN_SPILL = "mix_interrupt_randomness"
FN_FAST_LOAD = "crng_rfc_fast_load"
FN_CREDIT = "_credit_init_bits"
ENTRY_TWINS = {FN_INTERRUPT: "air", FN_SPILL: "mix", FN_CREDIT: "cred"}
# Every cause() a spill can have, in the order reports give them.
CAUSES = ("threshold", "flush", FIRST_OR_FLUSH, "early")


@dataclass
class Spill:
    cpu: int
    t: float
    count: int                        # interrupts in the fast pool (masked)
    prev_t: Optional[float]           # this CPU's previous spill in the trace
    # crng_rfc_fast_load() returned 1; None: it was called, its return not seen
    # (the function tracer alone saw the spill)
    fast_loaded: Optional[bool] = False
    fast_load_tried: bool = False     # crng_rfc_fast_load() was called at all
    credits: list[int] = field(default_factory=list)
    # Seen only by the function tracer (before the kprobes existed): count is the
    # interrupts traced on its CPU since the previous spill, and credits made in it
    # are counted here, their bits unknown.
    from_functions: bool = False
    unknown_credits: int = 0

    @property
    def since_prev_s(self) -> Optional[float]:
        return None if self.prev_t is None else self.t - self.prev_t

    def decided_by(self, threshold: int) -> tuple[str, ...]:
        """The triggers that can have decided this spill. The kernel decides (and
        the crng series records why) in add_interrupt_randomness(); the mix the
        trace sees runs later, from a timer. A spill decided by a CPU's first
        interrupt or by the 1 s flush, whose timer ran late (a loaded host), is
        mixed after more interrupts came, at or past the threshold: then the trace
        cannot rule those out, where it could have held."""
        seen = self.cause(threshold)
        if seen == FIRST_OR_FLUSH:
            return ("first", "flush")
        if seen != "threshold":
            return (seen,)
        if self.prev_t is None:
            return ("threshold", "first", "flush")
        if self.since_prev_s >= FLUSH_INTERVAL_S - FLUSH_SLACK_S:
            return ("threshold", "flush")
        return ("threshold",)

    def cause(self, threshold: int) -> str:
        """'threshold'; 'flush' (1 s after the CPU's previous spill); 'early' (too
        soon: below the threshold, less than 1 s after the previous spill); or
        'first-or-flush': no earlier spill of this CPU is in the trace, so this is
        its first spill since boot or a flush after one made before the kprobes
        were armed (at fs_initcall) - the trace cannot tell which."""
        if self.count >= threshold:
            return "threshold"
        if self.prev_t is None:
            return FIRST_OR_FLUSH
        if self.since_prev_s >= FLUSH_INTERVAL_S - FLUSH_SLACK_S:
            return "flush"
        return "early"


def twinless(events: list[TraceEvent]) -> list[TraceEvent]:
    """The events without the function tracer's twins of the crng kprobes."""
    return trace.twinless(events, ENTRY_TWINS)


def spills(events: list[TraceEvent]) -> list[Spill]:
    """Every traced spill in time order, with what happened inside it (by the
    kprobes, or before they existed by the function tracer)."""
    found: list[Spill] = []
    open_on: dict[int, Spill] = {}
    last_on: dict[int, float] = {}
    interrupts_on: dict[int, int] = {}
    for event in twinless(events):
        cpu = event.cpu
        if event.event in ("mix", FN_SPILL):
            by_functions = event.event == FN_SPILL
            count = interrupts_on.get(cpu, 0) if by_functions else event.int("count") & COUNT_MASK
            spill = Spill(cpu, event.t, count, last_on.get(cpu), from_functions=by_functions)
            last_on[cpu] = event.t
            interrupts_on[cpu] = 0
            open_on[cpu] = spill
            found.append(spill)
        elif event.event in ("air", FN_INTERRUPT):
            # (A spill seen by the function tracer alone has no return event: it
            # lasts until its CPU's next spill. An interrupt inside it does not end
            # it; only spills fast-load, and before fs_initcall only they credit.)
            interrupts_on[cpu] = interrupts_on.get(cpu, 0) + 1
        elif event.event == "mixret":
            open_on.pop(cpu, None)
        elif cpu in open_on and open_on[cpu].from_functions:
            # Only the function tracer's own events: a kprobe's event on this CPU
            # comes after the kprobes exist, outside any spill they did not see.
            spill = open_on[cpu]
            if event.event == FN_FAST_LOAD:
                spill.fast_load_tried, spill.fast_loaded = True, None
            elif event.event == FN_CREDIT:
                spill.unknown_credits += 1
        elif cpu in open_on:
            spill = open_on[cpu]
            if event.event == "fl":
                spill.fast_load_tried = True
                spill.fast_loaded = event.int("ret") == 1
            elif event.event == "cred":
                spill.credits.append(event.int("bits"))
    return found


def unknown_credits(events: list[TraceEvent], before: Optional[float] = None) -> int:
    """Credits to the input pool that only the function tracer saw (before the
    kprobes existed): their bits are unknown."""
    return sum(1 for e in twinless(events)
               if e.event == FN_CREDIT and (before is None or e.t < before))


def credited_bits(events: list[TraceEvent], before: Optional[float] = None) -> int:
    """Bits credited to the input pool (every source), optionally before a time."""
    return sum(e.int("bits") for e in events
               if e.event == "cred" and (before is None or e.t < before))


def first(events: list[TraceEvent], name: str, **args: int) -> Optional[TraceEvent]:
    return next((e for e in events if e.event == name
                 and all(e.int(k) == v for k, v in args.items())), None)
