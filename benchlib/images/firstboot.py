"""An image's first boot, read from outside its userspace: who waited for randomness.

The image boot (benchlib/images/imageboot.py) arms a kprobe trace on the kernel command
line (fixtures/trace-image-VARIANT): every getrandom() call, every wait for the
RNG (wait_for_random_bytes(), which getrandom() without GRND_NONBLOCK, /dev/random
and kernel callers all go through) and its return, every credit, each with the
task's pid and name. The collector (fixtures/image/collect) stops the trace once
multi-user.target is reached and reports systemd's own time stamps of the units
that matter, with a /dev/kmsg clock mark that puts systemd's monotonic clock on
printk's (the trace uses the same clock as printk).

A wait counts as *blocked* when it began before the variant's ready milestone
(or the RNG never got ready): a wait begun once the RNG is ready returns at once
(the LRNG's /dev/random path calls it every time). A wait that never returned
before the trace stopped is blocked until then. All of this is evidence only if
the trace could see it: every event registered, no hit missed, no event lost
(TraceIncomplete otherwise), never "nothing blocked" from a trace that was off.
"""
from __future__ import annotations

import base64
import re
from dataclasses import dataclass, field
from typing import Optional

from ..core.errors import BenchError
from ..core.bootrecord import BootRecord
from ..checks.trace import (TraceEvent, TraceIncomplete, armed_events, missed_hits, parse_trace,
                            unarmed)

FIRSTBOOT_TASK = "firstboot"
TRACE_TASK = "trace"
CLOCK_MARK = re.compile(r"^bench: clock monotonic=([\d.]+)$")
# getrandom() flags (include/uapi/linux/random.h).
GRND_NONBLOCK, GRND_INSECURE = 0x1, 0x4
# Events every image trace set has (fixtures/trace-image).
WAIT_EVENT, WOKE_EVENT, CALL_EVENT, CREDIT_EVENT = "rngwait", "rngwoke", "getrandom", "credit"
# Events of every variant's image set (fixtures/trace-image-*): writes to the
# pool (never credited) and ioctls on the RNG's devices.
POOL_WRITE_EVENT, IOCTL_EVENT = "poolwrite", "rndioctl"
# A missed hit of these makes the boot's waits unknowable: the boot is refused. A
# missed hit of the others (a credit that fired inside another probe's handler,
# which ftrace-based kprobes allow) makes their sums a lower bound, said so.
WAIT_EVENTS = (WAIT_EVENT, WOKE_EVENT, CALL_EVENT)
RNDADDENTROPY = 0x40085203
# The first-boot milestones: name -> (unit, the systemd time stamp that marks it).
FIRST_BOOT_MILESTONES = {
    "random seed loaded": ("systemd-random-seed.service", "ActiveEnterTimestampMonotonic"),
    "host keys written": ("ssh-hostkeys-firstboot.service", "ExecMainExitTimestampMonotonic"),
    "sshd active": ("ssh.service", "ActiveEnterTimestampMonotonic"),
    "multi-user.target": ("multi-user.target", "ActiveEnterTimestampMonotonic"),
}
CONTROL_BLOCK, CONTROL_NONBLOCK = "bench-control-block.service", "bench-control-nonblock.service"


# fixtures/image/collect's "collected_by": multi-user.target reached, or its deadline.
COLLECTED_AT_TARGET, COLLECTED_AT_DEADLINE = "target", "deadline"


class CollectorFailed(BenchError):
    """The image's collector (fixtures/image/collect) did not report whole."""


@dataclass(frozen=True)
class Wait:
    """One wait for the RNG: who, through which function, from when to when."""
    pid: int
    comm: str
    via: str                    # its path: getrandom(), /dev/random, kernel: FUNCTION
    started: float              # printk clock, seconds
    ended: Optional[float]      # None: still waiting when the trace stopped
    unit: str = ""              # the systemd unit whose main process it was, if any

    def duration(self, trace_end: float) -> float:
        return (self.ended if self.ended is not None else trace_end) - self.started


@dataclass(frozen=True)
class UnitTimes:
    """A unit's state and its systemd time stamps, on printk's clock (None: never)."""
    unit: str
    load_state: str
    active_state: str
    result: str
    main_pid: int
    started: Optional[float]    # left inactive (its start job began)
    active: Optional[float]     # became active
    exited: Optional[float]     # its main process exited


# Where a credit came from, by the function that credited (a prefix of it: the
# compiler's .cold and .isra copies are the same function). The comm of a credit
# made from an interrupt is whichever task the interrupt came in on: only the
# "daemon" source, a user-space task's own ioctl or write, names its daemon.
CREDIT_SOURCES = (
    ("random_ioctl", "daemon"), ("lrng_write_iter_common", "daemon"),
    ("lrng_add_credited", "daemon"),
    ("add_hwgenerator_randomness", "hwrng"),
    ("entropy_timer", "jitter"), ("try_to_generate_entropy", "jitter"),
    ("mix_interrupt_randomness", "interrupts"), ("lrng_pdrbg_seed_internal", "interrupts"),
    ("add_timer_randomness", "input"), ("add_input_randomness", "input"),
    ("add_bootloader_randomness", "boot loader"),
)


def credit_source(function: str) -> str:
    return next((source for prefix, source in CREDIT_SOURCES if function.startswith(prefix)),
                function)


@dataclass(frozen=True)
class Credit:
    """Credits from one task through one function: calls and bits."""
    comm: str
    via: str
    calls: int
    bits: int
    bits_before_ready: int
    first: float

    @property
    def source(self) -> str:
        """daemon, hwrng, jitter, interrupts, input, boot loader (or the function)."""
        return credit_source(self.via)


@dataclass
class FirstBoot:
    record: BootRecord
    ready_at: Optional[float]
    ready_milestone: str
    trace_end: float
    waits: list[Wait]
    calls: list[TraceEvent]               # getrandom() entries
    pool_writes: list[TraceEvent]         # writes to /dev/(u)random
    ioctls: list[TraceEvent]              # ioctls on them
    credits: list[Credit]
    units: dict[str, UnitTimes]
    controls: dict[str, dict[str, str]]
    failed_units: list[str]
    system_state: str
    seed: Optional[bytes]
    missed: dict[str, int] = field(default_factory=dict)   # missed hits per event
    # Who collected: "target" (multi-user.target reached) or "deadline" (the boot
    # was still short of it at bench.collect_by, fixtures/image/collect).
    collected_by: str = COLLECTED_AT_TARGET
    pending_jobs: list[str] = field(default_factory=list)  # systemctl list-jobs then

    @property
    def reached_target(self) -> bool:
        return self.collected_by == COLLECTED_AT_TARGET

    def complete(self, event: str) -> bool:
        """The trace saw every hit of this event (an absence of it is evidence)."""
        return not self.missed.get(event)

    def blocked(self) -> list[Wait]:
        """Waits that began before the RNG was ready, in order."""
        return [w for w in self.waits if self.ready_at is None or w.started < self.ready_at]

    def blocked_of(self, unit: str) -> list[Wait]:
        return [w for w in self.blocked() if w.unit == unit]

    def calls_of(self, pid: int) -> list[TraceEvent]:
        return [c for c in self.calls if c.pid == pid]

    def milestones(self) -> dict[str, float]:
        """The first-boot milestones reached, on printk's clock."""
        out = {}
        for name, (unit, _) in FIRST_BOOT_MILESTONES.items():
            times = self.units.get(unit)
            when = None
            if times is not None:
                when = times.exited if name == "host keys written" else times.active
            if when is not None:
                out[name] = when
        return out

    def credited_before_ready(self) -> dict[str, int]:
        """Bits credited before the RNG was ready, per source ('daemon' per daemon:
        'daemon haveged')."""
        out: dict[str, int] = {}
        for credit in self.credits:
            key = credit.source + (f" {credit.comm}" if credit.source == "daemon" else "")
            out[key] = out.get(key, 0) + credit.bits_before_ready
        return {k: v for k, v in out.items() if v}

    def pool_bytes(self, comm_prefix: str) -> int:
        """Bytes that tasks named so wrote to /dev/random or /dev/urandom (uncredited)."""
        return sum(e.int("len") for e in self.pool_writes
                   if _unquote(e.args.get("comm", e.comm)).startswith(comm_prefix))

    def added_entropy(self, comm_prefix: str) -> bool:
        """A task named so called RNDADDENTROPY (a credited write)."""
        return any(_unquote(e.args.get("comm", e.comm)).startswith(comm_prefix)
                   and e.int("cmd") == RNDADDENTROPY for e in self.ioctls)

    def entropy_adds(self) -> dict[str, tuple[int, float]]:
        """RNDADDENTROPY calls per task name: (how many, when the first came)."""
        out: dict[str, tuple[int, float]] = {}
        for event in self.ioctls:
            if event.int("cmd") == RNDADDENTROPY:
                comm = _unquote(event.args.get("comm", event.comm))
                count, first = out.get(comm, (0, event.t))
                out[comm] = (count + 1, first)
        return out

    def seed_credit_bits(self) -> int:
        """Bits credited by systemd-random-seed (its seed file, through RNDADDENTROPY)."""
        return sum(c.bits for c in self.credits
                   if c.source == "daemon" and c.comm.startswith("systemd-random"))


def _unquote(value: str) -> str:
    return value.strip('"')


def _function(symbol: str) -> str:
    """'random_ioctl+0x1a/0x2b0' -> 'random_ioctl'."""
    return symbol.split("+", 1)[0]


def clock_offset(messages: list[tuple[float, str]]) -> Optional[float]:
    """printk time minus CLOCK_MONOTONIC, from the collector's clock mark."""
    for t, text in messages:
        match = CLOCK_MARK.match(text)
        if match:
            return t - float(match.group(1))
    return None


def parse_units(lines: list[str], offset: float) -> dict[str, UnitTimes]:
    """`systemctl show` blocks (blank-line separated) -> unit -> UnitTimes."""
    units: dict[str, UnitTimes] = {}
    block: dict[str, str] = {}

    def stamp(key: str) -> Optional[float]:
        value = int(block.get(key, "0") or 0)
        return value / 1e6 + offset if value else None

    for line in [*lines, ""]:
        if "=" in line:
            key, _, value = line.partition("=")
            block[key.strip()] = value.strip()
            continue
        if "Id" in block:
            units[block["Id"]] = UnitTimes(
                unit=block["Id"], load_state=block.get("LoadState", ""),
                active_state=block.get("ActiveState", ""), result=block.get("Result", ""),
                main_pid=int(block.get("ExecMainPID", "0") or 0),
                started=stamp("InactiveExitTimestampMonotonic"),
                active=stamp("ActiveEnterTimestampMonotonic"),
                exited=stamp("ExecMainExitTimestampMonotonic"))
        block = {}
    return units


def _key_values(line: str) -> dict[str, str]:
    return dict(word.split("=", 1) for word in line.split() if "=" in word)


# The functions that call wait_for_random_bytes(), by the path a task took to them.
WAIT_PATHS = {
    "__do_sys_getrandom": "getrandom()", "__x64_sys_getrandom": "getrandom()",
    "__se_sys_getrandom": "getrandom()",
    "random_read_iter": "/dev/random", "lrng_random_read_iter": "/dev/random",
}


def wait_path(caller: str) -> str:
    """A wait's path from the function it returned to ('?' if it never returned)."""
    function = _function(caller)
    return WAIT_PATHS.get(function, f"kernel: {function}" if function != "?" else "?")


def pair_waits(events: list[TraceEvent], unit_of: dict[int, str]) -> list[Wait]:
    """Each wait entry with the next return in the same task. A wait that never
    returned took getrandom() if its task's last call before it was a blocking one."""
    waits: list[Wait] = []
    open_waits: dict[int, TraceEvent] = {}
    last_call: dict[int, TraceEvent] = {}
    for event in events:
        if event.event == CALL_EVENT:
            last_call[event.pid] = event
        elif event.event == WAIT_EVENT:
            open_waits[event.pid] = event
        elif event.event == WOKE_EVENT and event.pid in open_waits:
            start = open_waits.pop(event.pid)
            caller = event.where.split(" <- ", 1)[0]
            waits.append(_wait(start, event.t, wait_path(caller), unit_of))
    for pid, start in open_waits.items():
        call = last_call.get(pid)
        via = "getrandom()" if call is not None and blocking_call(call) else "?"
        waits.append(_wait(start, None, via, unit_of))
    return sorted(waits, key=lambda w: w.started)


def _wait(start: TraceEvent, ended: Optional[float], via: str,
          unit_of: dict[int, str]) -> Wait:
    comm = _unquote(start.args.get("comm", start.comm))
    return Wait(start.pid, comm, via, start.t, ended, unit_of.get(start.pid, ""))


def sum_credits(events: list[TraceEvent], ready_at: Optional[float]) -> list[Credit]:
    groups: dict[tuple[str, str], list[TraceEvent]] = {}
    for event in events:
        if event.event == CREDIT_EVENT:
            key = (_unquote(event.args.get("comm", event.comm)),
                   _function(event.args.get("caller", "?")))
            groups.setdefault(key, []).append(event)
    return [Credit(comm, via, len(found), sum(e.int("bits") for e in found),
                   sum(e.int("bits") for e in found if ready_at is None or e.t < ready_at),
                   found[0].t)
            for (comm, via), found in sorted(groups.items(), key=lambda kv: kv[1][0].t)]


def view(record: BootRecord, armed_set: list[str]) -> FirstBoot:
    """The first boot of one image boot record. TraceIncomplete when the trace
    could not have seen everything (an event not armed, a hit missed, an event
    overwritten, no clock mark): then no figure of this boot is evidence."""
    firstboot = record.task(FIRSTBOOT_TASK)
    if firstboot.rc != 0:
        raise CollectorFailed(f"boot {record.name}: the collector's firstboot task ended "
                              f"with rc={firstboot.rc}: {' | '.join(firstboot.lines[-3:])} "
                              f"({record.data_log})")
    trace = record.task(TRACE_TASK)
    if trace.rc != 0:
        raise TraceIncomplete(f"boot {record.name}: the trace task failed: "
                              f"{' '.join(trace.lines[-2:])}")
    sections = trace.sections()
    never = unarmed(sections, armed_set)
    if never:
        raise TraceIncomplete(f"boot {record.name}: trace events {', '.join(never)} were "
                              f"never armed (kprobe_events: {len(armed_events(sections))} "
                              "registered)")
    missed = missed_hits(sections, armed_events(sections))
    blind = missed_hits(sections, WAIT_EVENTS)
    if blind:
        raise TraceIncomplete(f"boot {record.name}: kprobes missed hits: {blind}")
    events = parse_trace(sections.get("trace", []))
    offset = clock_offset(record.messages)
    if offset is None:
        raise TraceIncomplete(f"boot {record.name}: no clock mark in the kernel log "
                              "(the collector's 'grcontrol clock' did not run)")
    parts = firstboot.sections()
    units = parse_units(parts.get("units", []), offset)
    unit_of = {u.main_pid: name for name, u in units.items() if u.main_pid}
    spec = record.spec()
    found = [(record.milestone(m), m) for m in spec.ready_milestones]
    reached = sorted((t, m) for t, m in found if t is not None)
    ready_at, ready_name = reached[0] if reached else (None, spec.ready)
    controls = {}
    for line in parts.get("controls", []):
        facts = _key_values(line)
        if "control" in facts:
            controls[facts["control"]] = facts
    system = {k: v for line in parts.get("system", []) for k, v in _key_values(line).items()}
    seed_lines = dict(line.split("=", 1) for line in parts.get("seed", []) if "=" in line)
    seed = base64.b64decode(seed_lines["base64"]) if seed_lines.get("base64") else None
    # The trace stopped when the collector started: just before its clock mark.
    mark = next(t for t, text in record.messages if CLOCK_MARK.match(text))
    return FirstBoot(
        record=record, ready_at=ready_at, ready_milestone=ready_name, trace_end=mark,
        waits=pair_waits(events, unit_of),
        calls=[e for e in events if e.event == CALL_EVENT],
        pool_writes=[e for e in events if e.event == POOL_WRITE_EVENT],
        ioctls=[e for e in events if e.event == IOCTL_EVENT],
        credits=sum_credits(events, ready_at), units=units, controls=controls,
        failed_units=[line.split()[0] for line in parts.get("failed", []) if line.strip()],
        system_state=str(system.get("state", "")), seed=seed, missed=missed,
        collected_by=str(system.get("collected_by", COLLECTED_AT_TARGET)),
        pending_jobs=[line.strip() for line in parts.get("pending", []) if line.strip()])


def blocking_call(event: TraceEvent) -> bool:
    """A getrandom() call that waits if the RNG is not ready."""
    flags = event.int("flags")
    return not flags & (GRND_NONBLOCK | GRND_INSECURE)


# The task that loads and saves the seed file (its comm is cut to 15 characters).
SEED_COMM = "systemd-random"


def seed_fed(first: FirstBoot, second: FirstBoot) -> bool:
    """The second boot's systemd-random-seed gave the kernel the seed file the first
    boot saved: RNDADDENTROPY, or at least the seed's size more written to the pool
    than the first boot wrote (it writes something even without a seed file)."""
    if first.seed is None:
        return False
    extra = second.pool_bytes(SEED_COMM) - first.pool_bytes(SEED_COMM)
    return second.added_entropy(SEED_COMM) or extra >= len(first.seed)
