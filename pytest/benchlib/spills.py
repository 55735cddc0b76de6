"""Fast-pool spills as the kprobe trace saw them, and what each one did.

A spill is mix_interrupt_randomness() running on one CPU: its entry (`mix`, with
the fast pool's interrupt count), then on the same CPU, until its return
(`mixret`), whatever it did: a fast load into the crng (`fl` returning 1) or a
credit to the input pool (`cred`). The cause of a spill is read from the trace
too: the fast pool's count against the threshold, or the time since the same
CPU's previous spill.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from .trace import TraceEvent

# drivers/char/random.c: the fast pool's count is a u32 whose bit 31 is
# MIX_INFLIGHT; crediting and thresholds use the low 16 bits.
COUNT_MASK = 0xFFFF
# A CPU's fast pool spills at a variant's count of interrupts (variant.toml's
# spill_interrupts: 1024 in 6.1, 64 for the crng series' fast loads), or after this
# long without a spill, whatever its count.
FLUSH_INTERVAL_S = 1.0
# jiffies granularity (HZ=250 in tinyconfig: 4 ms) plus timer latency, against
# trace time stamps: a flush may be seen this much before the full second.
FLUSH_SLACK_S = 0.02
FIRST_OR_FLUSH = "first-or-flush"
# Every cause() a spill can have, in the order reports give them.
CAUSES = ("threshold", "flush", FIRST_OR_FLUSH, "early")


@dataclass
class Spill:
    cpu: int
    t: float
    count: int                        # interrupts in the fast pool (masked)
    prev_t: Optional[float]           # this CPU's previous spill in the trace
    fast_loaded: bool = False         # crng_rfc_fast_load() returned 1
    fast_load_tried: bool = False     # crng_rfc_fast_load() was called at all
    credits: list[int] = field(default_factory=list)

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


def spills(events: list[TraceEvent]) -> list[Spill]:
    """Every traced spill in time order, with what happened inside it."""
    found: list[Spill] = []
    open_on: dict[int, Spill] = {}
    last_on: dict[int, float] = {}
    for event in events:
        if event.event == "mix":
            spill = Spill(event.cpu, event.t, event.int("count") & COUNT_MASK,
                          last_on.get(event.cpu))
            last_on[event.cpu] = event.t
            open_on[event.cpu] = spill
            found.append(spill)
        elif event.event == "mixret":
            open_on.pop(event.cpu, None)
        elif event.cpu in open_on:
            spill = open_on[event.cpu]
            if event.event == "fl":
                spill.fast_load_tried = True
                spill.fast_loaded = event.int("ret") == 1
            elif event.event == "cred":
                spill.credits.append(event.int("bits"))
    return found


def credited_bits(events: list[TraceEvent], before: Optional[float] = None) -> int:
    """Bits credited to the input pool (every source), optionally before a time."""
    return sum(e.int("bits") for e in events
               if e.event == "cred" and (before is None or e.t < before))


def first(events: list[TraceEvent], name: str, **args: int) -> Optional[TraceEvent]:
    return next((e for e in events if e.event == name
                 and all(e.int(k) == v for k, v in args.items())), None)
