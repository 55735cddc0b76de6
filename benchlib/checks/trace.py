"""The guest's kprobe trace buffer (/sys/kernel/tracing/trace), parsed.

Trace sets (fixtures/trace-*) put kprobe events in the trace buffer: each event
keeps the CPU it ran on and its time stamp, so what the RNG did is read from its
code paths as they ran, never from counters the code under test keeps about itself.
"""
from __future__ import annotations

import dataclasses
import re
from collections import Counter
from dataclasses import dataclass
from typing import Iterable, Optional

TRACE_TASK = "trace"
# A line user space wrote to trace_marker ("name=value ..." in its args).
MARKER_EVENT = "tracing_mark_write"
# In a clone trace set (fixtures/trace-clone-*), the prefix of every event that is a
# reseed of the key getrandom() reads from (the clone and resume checks read them).
RESEED_PREFIX = "reseed"
EVENT_LINE = re.compile(r"^\s*(?P<comm>.*)-(?P<pid>\d+)\s+\[(?P<cpu>\d+)\]\s+\S+\s+"
                        r"(?P<ts>\d+\.\d+):\s+(?P<event>\w+):\s+\((?P<where>[^)]*)\)(?P<args>.*)$")
# The function tracer's line (a trace set's "function" lines, traced from boot):
# "FUNC <-CALLER", no arguments. Its event is named by the function.
FUNCTION_LINE = re.compile(r"^\s*(?P<comm>.*)-(?P<pid>\d+)\s+\[(?P<cpu>\d+)\]\s+\S+\s+"
                           r"(?P<ts>\d+\.\d+):\s+(?P<event>\w+)(?:\.\w+)*\s+<-(?P<where>\S+)$")
# A tracepoint's line (a trace set's "wakes" line: sched_waking), "name: field=value ...".
TRACEPOINT_LINE = re.compile(r"^\s*(?P<comm>.*)-(?P<pid>\d+)\s+\[(?P<cpu>\d+)\]\s+\S+\s+"
                             r"(?P<ts>\d+\.\d+):\s+(?P<event>\w+):\s+(?P<args>\S+=.*)$")
# A stacktrace trigger's entry: "<stack trace>", then one " => FUNC" line per frame;
# it belongs to the event just before it on the same CPU.
STACK_START = re.compile(r"^\s*.*-\d+\s+\[(?P<cpu>\d+)\]\s+\S+\s+\d+\.\d+:\s+<stack trace>$")
STACK_FRAME = re.compile(r"^ => (?P<function>\S+)")
ENTRIES = re.compile(r"entries-in-buffer/entries-written:\s+(\d+)/(\d+)")


class TraceIncomplete(ValueError):
    """The trace is missing, or the buffer overwrote events before the dump."""


@dataclass(frozen=True)
class TraceEvent:
    cpu: int
    t: float                 # trace clock seconds ("local": sched_clock, as printk)
    event: str
    args: dict[str, str]
    pid: int = 0             # the task the event ran in
    comm: str = ""           # its name, as the trace's comm cache had it
    where: str = ""          # "func+off/size", or "caller+off/size <- func" on return
    stack: tuple[str, ...] = ()   # a stacktrace trigger's frames, innermost first

    def int(self, key: str) -> int:
        return int(self.args[key], 0)


def parse_trace(lines: list[str]) -> list[TraceEvent]:
    """Events in time order; TraceIncomplete if the buffer lost any."""
    events: list[TraceEvent] = []
    written = None
    last_on: dict[int, int] = {}        # CPU -> index of its latest event
    stack_of: Optional[int] = None      # the event whose stack is being read
    for line in lines:
        entries = ENTRIES.search(line)
        if entries:
            written = (int(entries.group(1)), int(entries.group(2)))
            continue
        frame = STACK_FRAME.match(line)
        if frame and stack_of is not None:
            event = events[stack_of]
            events[stack_of] = dataclasses.replace(event,
                                                   stack=event.stack + (frame.group("function"),))
            continue
        stack = STACK_START.match(line)
        if stack:
            stack_of = last_on.get(int(stack.group("cpu")))
            continue
        stack_of = None
        match = EVENT_LINE.match(line) or FUNCTION_LINE.match(line) or TRACEPOINT_LINE.match(line)
        if not match:
            continue
        args = dict(word.split("=", 1) for word in (match.groupdict().get("args") or "").split()
                    if "=" in word)
        last_on[int(match.group("cpu"))] = len(events)
        events.append(TraceEvent(int(match.group("cpu")), float(match.group("ts")),
                                 match.group("event"), args, int(match.group("pid")),
                                 match.group("comm").strip(), match.groupdict().get("where") or ""))
    if written is None:
        raise TraceIncomplete("no trace header (entries-in-buffer/entries-written)")
    if written[0] != written[1]:
        raise TraceIncomplete(f"the trace buffer kept {written[0]} of {written[1]} events: "
                              "events were overwritten")
    return sorted(events, key=lambda e: e.t)


# /sys/kernel/tracing/kprobe_profile: "event hits missed" per kprobe. A kprobe misses
# a hit when it fires while another kprobe's handler runs on that CPU (or a
# kretprobe has no free instance): the event is then neither in the trace nor in a
# hist, and a count built from them is short by up to that many.
PROFILE_LINE = re.compile(r"^\s*(?P<event>\S+)\s+(?P<hits>\d+)\s+(?P<missed>\d+)\s*$")


def kprobe_misses(sections: dict[str, list[str]]) -> dict[str, int]:
    """Missed hits per kprobe event, from a task's kprobe_profile section."""
    if "kprobe_profile" not in sections:
        raise TraceIncomplete("the task printed no kprobe_profile section: "
                              "the kprobes' missed hits are unknown")
    return {m.group("event"): int(m.group("missed"))
            for line in sections["kprobe_profile"] if (m := PROFILE_LINE.match(line))}


# /sys/kernel/tracing/kprobe_events: "p:kprobes/NAME SYMBOL ARGS", or "rN:kprobes/NAME"
# for a return probe with N instances.
ARMED_LINE = re.compile(r"^[pr]\d*:kprobes/(\w+) ")


def armed_events(sections: dict[str, list[str]]) -> list[str]:
    """The kprobe events registered, from a task's kprobe_events section."""
    return [m.group(1) for m in map(ARMED_LINE.match, sections.get("kprobe_events", [])) if m]


def unarmed(sections: dict[str, list[str]], names: Iterable[str]) -> list[str]:
    """Those of the named kprobe events that were never registered."""
    armed = armed_events(sections)
    return [n for n in names if n not in armed]


def missed_hits(sections: dict[str, list[str]], names: Iterable[str]) -> dict[str, int]:
    """Those of the named kprobe events that missed hits (a handler ran while
    another's did), with how many."""
    wanted = set(names)
    return {n: count for n, count in kprobe_misses(sections).items() if n in wanted and count}


def blind_spots(sections: dict[str, list[str]], names: Iterable[str]) -> list[str]:
    """Why the trace could not have seen every event of the named kprobes (never
    armed, or hits missed), one reason each; empty when it could. An event absent
    from the trace proves its absence only then."""
    names = list(names)
    reasons = [f"'{n}' never armed" for n in unarmed(sections, names)]
    if "kprobe_profile" not in sections:
        return reasons + ["missed hits unknown (no kprobe_profile section)"]
    return reasons + [f"'{n}' missed {count} hits"
                      for n, count in missed_hits(sections, names).items()]


# ---- The function tracer's twins ---------------------------------------------------------

# A trace set's "function" lines have the function tracer record calls from boot,
# long before the kprobes exist (fs_initcall). Once they do, a call that a kprobe at
# the function's entry also sees is recorded twice: the kprobe's event, then on the
# same CPU the function tracer's. Both handlers run at the function's entry, one
# after the other, with interrupts as the caller has them: where they are on (a
# workqueue's credit or spill), an interrupt's own events can come between the two
# (seen under TCG: 10 serial interrupts and 2.5 ms between a credit's kprobe event
# and its function tracer twin; 40 ms for a spill's).

def twinless(events: list[TraceEvent], twins: dict[str, str]) -> list[TraceEvent]:
    """The events without the function tracer's twins of kprobe events (`twins`:
    function name -> the kprobe event at its entry): a call traced by both is kept
    once, as the kprobe saw it. A function tracer event is a twin when a kprobe
    event of its function came earlier on its CPU and is not yet paired (a count
    per CPU and function: an interrupt between the two may nest a call of its own);
    one without is a call the kprobes did not see (made before they existed)."""
    kept: list[TraceEvent] = []
    unpaired: Counter[tuple[int, str]] = Counter()
    kprobe_events = set(twins.values())
    for event in events:
        twin = twins.get(event.event)
        if twin is not None and unpaired[(event.cpu, twin)]:
            unpaired[(event.cpu, twin)] -= 1
        else:
            if event.event in kprobe_events:
                unpaired[(event.cpu, event.event)] += 1
            kept.append(event)
    return kept


def trace_of(sections: dict[str, list[str]]) -> list[TraceEvent]:
    if "trace" not in sections:
        raise TraceIncomplete("the trace task printed no trace section")
    return parse_trace(sections["trace"])
