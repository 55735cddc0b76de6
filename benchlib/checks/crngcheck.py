"""Checks of the crng variant's state machine, read from the kprobe trace.

Each check takes one boot's record and asserts something that a kernel broken on
purpose fails (kernel/patches/test-crng-*): they are functions, not tests, so the
tests can run them on the real variant and, expecting a failure, on the negative
controls.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Optional

from .credit import signed_key, stock_spill_credit, window_hist
from .crngstate import CrngState, parse_crng_state
from .ordering import assert_nonblock_eagain_until_ready, blocking_return_time, ready_position
from ..core.bootrecord import BootRecord
from .spills import Spill, credited_bits, first, spills, unknown_credits
from .trace import TRACE_TASK, TraceEvent, blind_spots, missed_hits, trace_of

READY_STATE = 2
RESEEDED_STATE = 3
# drivers/char/random.c in rfc mode: a fast load after this many interrupts (or
# the 1 s flush, or a CPU's first interrupt), the reseed to 3 at this many bits.
FAST_LOAD_INTERRUPTS = 64
RESEED_BITS = 128
NO_DATA = -61                  # -ENODATA from __crng_reseed()
# 6.1's input pool holds at most this many credited bits.
POOL_BITS = 256


def states_printed(record: BootRecord) -> list[tuple[float, int]]:
    """(printk time, state) of every 'random: crng_init N' in the kernel log."""
    return [(t, int(text.split()[-1])) for t, text in record.messages
            if text.startswith("random: crng_init ")]


def first_time_at_least(record: BootRecord, level: int) -> float | None:
    return next((t for t, s in states_printed(record) if s >= level), None)


def at_least(level: int):
    def is_at_least(text: str) -> bool:
        return text.startswith("random: crng_init ") and int(text.split()[-1]) >= level
    return is_at_least


def debugfs(record: BootRecord, task: str = "crngstate") -> CrngState:
    return parse_crng_state(record.finished_task(task).lines)


def trace(record: BootRecord) -> list[TraceEvent]:
    events = trace_of(record.finished_task(TRACE_TASK).sections())
    assert events, f"the kprobe trace is empty ({record.data_log})"
    return events


# ---- State order -------------------------------------------------------------

def assert_states_in_order(record: BootRecord, interrupt_only: bool) -> list[int]:
    """States print strictly increasing, each once, ending at 3; where only
    interrupts feed the crng, 1 and 2 both print (no state skipped)."""
    seen = [s for _, s in states_printed(record)]
    assert seen, f"no 'random: crng_init N' at all in the kernel log ({record.data_log})"
    assert seen == sorted(set(seen)), f"states printed as {seen}"
    assert seen[-1] == RESEEDED_STATE, f"states printed {seen}: never reached 3 in this boot"
    if interrupt_only:
        assert seen == [1, 2, 3], f"interrupts alone feed this crng, yet states were {seen}"
    return seen


# ---- Who blocks ----------------------------------------------------------------

def assert_nonblock_fails_below_2(record: BootRecord) -> None:
    """GRND_NONBLOCK got EAGAIN at least once, and every EAGAIN came before state 2."""
    first_call = record.probe_event("nonblock_first")
    assert first_call, f"the probe made no GRND_NONBLOCK call ({record.data_log})"
    assert first_call["errno"] == "EAGAIN", (
        f"the first GRND_NONBLOCK call at {first_call['t']} s already succeeded: the probe "
        "never saw the crng below state 2")
    assert_nonblock_eagain_until_ready(
        record, ready_position(record, at_least(READY_STATE), "crng_init >= 2"), "crng_init 2")


def assert_blocking_returns_at_2(record: BootRecord) -> float:
    """A blocking getrandom() that started below 2 returned at 2, before the reseed
    to 3 began: the probe's "returned" marker, written after the call returned, has
    an earlier printk time than the trace's __crng_reseed(seed_fully) (trace and
    printk share one clock), an order of observed events and no margin."""
    two = first_time_at_least(record, READY_STATE)
    assert two is not None, f"state 2 never came ({record.data_log})"
    full = first(trace(record), "reseed", full=1)
    assert full is not None, (
        f"no reseed to state 3 in the trace: cannot tell 2 from 3 ({record.data_log})")
    killed = record.probe_event("blocking_timeout")
    assert not killed, (
        f"blocking getrandom() was still blocked at the probe's limit ({killed and killed['t']} s): "
        f"it returned neither at 2 ({two} s) nor before the limit; not at 2")
    returned = blocking_return_time(
        record, ready_position(record, at_least(READY_STATE), "crng_init 2"), "crng_init 2",
        must_start_before=True)
    assert returned < full.t, (
        f"blocking getrandom() returned at {returned} s, after the reseed to 3 began at "
        f"{full.t} s, not at 2 ({two} s)")
    return returned


# ---- What the kernel did, from the trace ----------------------------------------

def assert_could_see(record: BootRecord, *names: str) -> None:
    """An event absent from the trace proves its absence only if its kprobe was
    armed and missed no hit (trace.kprobe_misses): else the check cannot judge."""
    blind = blind_spots(record.finished_task(TRACE_TASK).sections(), names)
    assert not blind, (f"the trace could not see every event ({', '.join(blind)}): an event "
                       f"absent from it may have happened ({record.data_log})")


def fast_loads(events: list[TraceEvent]) -> list[Spill]:
    """Spills that fast-loaded. Where the function tracer alone saw a spill
    (fast_loaded None), one that tried and credited nothing: a try that fails (at
    state 1, racing another CPU's step to 2) credits the input pool instead."""
    return [s for s in spills(events)
            if s.fast_loaded or (s.fast_loaded is None and not s.unknown_credits)]


def assert_fast_loads(record: BootRecord) -> list[Spill]:
    """Every fast load had a cause the RFC allows (>= 64 interrupts, the 1 s flush,
    or the CPU's first interrupt), credited nothing, and happened only below state
    2; each step to 1 and 2 that printed was a fast load the trace saw. The fast
    loads before fs_initcall are seen by the function tracer (trace-crng's
    "function" lines), whose interrupt counts are the calls it saw."""
    events = trace(record)
    loads = fast_loads(events)
    steps = [s for _, s in states_printed(record) if s < RESEEDED_STATE]
    confirmed = [load for load in loads if load.fast_loaded]
    assert len(confirmed) <= len(steps), (
        f"{len(confirmed)} fast loads in the trace but only states {steps} printed: a fast "
        "load that moved no state")
    assert len(loads) >= len(steps), (
        f"{len(loads)} fast loads in the trace for the steps {steps} printed: a step the "
        f"trace did not see (the function tracer not running from boot?) ({record.data_log})")
    for load in loads:
        cause = load.cause(FAST_LOAD_INTERRUPTS)
        assert cause != "early", (
            f"fast load on CPU {load.cpu} at {load.t} s after {load.count} interrupts, "
            f"{load.since_prev_s:.3f} s after that CPU's previous spill: below "
            f"{FAST_LOAD_INTERRUPTS} interrupts and before the 1 s flush")
        assert not load.credits, (
            f"fast load at {load.t} s also credited the input pool {load.credits} bits")
    ready = first(events, "reseed", full=1)
    if ready is not None:
        assert_could_see(record, "mix", "fl")        # no fast load after it
    assert ready is None or loads[-1].t < ready.t, (
        f"fast load at {loads[-1].t} s after the reseed to 3 at {ready.t} s")
    return loads


def assert_fast_load_waited(record: BootRecord) -> list[Spill]:
    """assert_fast_loads, where a fast load is judged: on one vCPU the step to 2 is
    that CPU's second spill, which must wait for 64 interrupts or the 1 s flush
    (on two, each step may be a CPU's first interrupt, which judges nothing)."""
    loads = assert_fast_loads(record)
    judged = [load for load in loads if load.prev_t is not None]
    assert judged, (
        "every fast load was its CPU's first spill: the 64-interrupt threshold was not "
        f"judged in this boot ({record.data_log})")
    return loads


def assert_reseed_after_128_bits(record: BootRecord) -> TraceEvent:
    """State 3 came from a reseed after >= 128 bits were credited, and nothing
    reseeded the crng before it (no timer, ioctl, vmfork or resume path). Bits are
    the kprobes' (armed at fs_initcall); before that, the function tracer sees each
    credit's call, not its bits: a credit inside a spill it saw counts as 6.1's
    interrupt credit for the spill's traced interrupt count (count/64, at least 1:
    the rule the vmbus credit tests check from kprobes, credit.CREDIT_RULES['rfc']);
    one outside any spill has bits unknown, and then a sum short of 128 cannot be
    told from a kernel that reseeded early."""
    events = trace(record)
    full = first(events, "reseed", full=1)
    assert full is not None, f"no reseed to state 3 in the trace ({record.data_log})"
    assert_could_see(record, "reseed", "cred")       # no reseed before it, every credit
    early = [e for e in events if e.event == "reseed" and e.t < full.t]
    assert not early, f"reseeds before state 3: {[(e.t, e.args) for e in early]}"
    seen = credited_bits(events, before=full.t)
    unseen = [s for s in spills(events) if s.from_functions and s.t < full.t]
    inferred = sum(stock_spill_credit(s.count) * s.unknown_credits for s in unseen)
    unknown = unknown_credits(events, before=full.t) - sum(s.unknown_credits for s in unseen)
    bits = seen + inferred
    assert bits >= RESEED_BITS or not unknown, (
        f"reseeded to state 3 at {full.t} s after {seen} bits the kprobes saw credited, "
        f"{inferred} inferred, and {unknown} credits of unknown bits outside any spill: "
        "cannot tell")
    assert bits >= RESEED_BITS, (
        f"reseeded to state 3 at {full.t} s after {bits} credited bits (< {RESEED_BITS}; "
        f"{seen} seen by the kprobes, {inferred} inferred for spills before them)")
    return full


def assert_no_jitter(record: BootRecord) -> None:
    """The jitter entropy generator never ran (the RFC has none), though the probe
    made a blocking getrandom() call."""
    assert record.probe_event("blocking"), f"no blocking getrandom() call ({record.data_log})"
    assert_could_see(record, "jitter")
    jitter = [e.t for e in trace(record) if e.event == "jitter"]
    assert not jitter, f"the jitter entropy generator ran at {jitter[:5]} s"


def assert_debugfs_causes_match_trace(record: BootRecord) -> None:
    """The series' own record of each traced fast load's trigger is the cause the
    trace shows (its bookkeeping is secondary; the trace is the evidence)."""
    loads = assert_fast_loads(record)
    recorded = [t for t in debugfs(record).transitions() if t.cause == "fastload"]
    # Fast loads before the trace started come first in debugfs: pair from the end.
    assert len(recorded) >= len(loads), f"debugfs records {recorded}; the trace {loads}"
    for load, noted in zip(loads, recorded[len(recorded) - len(loads):]):
        seen = load.cause(FAST_LOAD_INTERRUPTS)
        allowed = load.decided_by(FAST_LOAD_INTERRUPTS)
        assert noted.cpu == load.cpu and noted.trigger in allowed, (
            f"debugfs says CPU {noted.cpu} trigger={noted.trigger} for the fast load the "
            f"trace shows on CPU {load.cpu} at {load.t} s: {seen} ({load.count} interrupts, "
            f"{load.since_prev_s} s since that CPU's previous spill)")


# ---- How a reseed changes the key, read from memory ------------------------------

# The trace set fixtures/trace-crng-boot reads the base crng's key (32 bytes) when
# __crng_reseed() is entered and returns, and around crng_rfc_mix_key(), which the
# RFC mode's reseed calls with base_crng.lock held to hash the key extracted from
# the input pool into the base key: BLAKE2s-256 over the old key, then the new.
KEY_EVENTS = ("rskey", "rskeyret", "mixkey", "mixkeyret")
KEY_BYTES = 32


def key_bytes(text: str) -> bytes:
    """A kprobe's x8[N] fetch as printed, "{0x1,0xab,...}", as bytes."""
    return bytes(int(b, 16) for b in text.strip("{}").split(","))


@dataclass
class KeyChange:
    """One call of __crng_reseed(), with the key as it was around it."""
    cpu: int
    t: float                          # its entry
    before: bytes                     # the key at its entry
    after: bytes = b""                # the key at its return
    ret: int = NO_DATA                # its return: crng_init before, or -ENODATA
    full: bool = False                # the reseed to state 3 (seed_fully)
    end: float = 0.0                  # its return's time
    mixes: list[tuple[bytes, bytes, bytes]] = field(default_factory=list)
    # (key in, material, key out) of each crng_rfc_mix_key() inside it

    @property
    def happened(self) -> bool:
        return self.ret >= 0

    def mixed(self) -> Optional[bool]:
        """The last mix inside made BLAKE2s-256(key in || material); None without one."""
        if not self.mixes:
            return None
        key_in, material, key_out = self.mixes[-1]
        return hashlib.blake2s(key_in + material, digest_size=KEY_BYTES).digest() == key_out


def key_changes(events: list[TraceEvent]) -> list[KeyChange]:
    """Every call of __crng_reseed() the key events saw, with the mixes on its CPU
    between its entry and its return."""
    found: list[KeyChange] = []
    open_on: dict[int, KeyChange] = {}
    mix_in: dict[int, tuple[bytes, bytes]] = {}
    for event in events:
        cpu, change = event.cpu, open_on.get(event.cpu)
        if event.event == "rskey":
            open_on[cpu] = KeyChange(cpu, event.t, key_bytes(event.args["key"]))
        elif change is None:
            continue
        elif event.event == "reseed":
            change.full = event.int("full") == 1
        elif event.event == "mixkey":
            material = key_bytes(event.args["in"])[:event.int("len")]
            mix_in[cpu] = (key_bytes(event.args["key"]), material)
        elif event.event == "mixkeyret" and cpu in mix_in:
            key_in, material = mix_in.pop(cpu)
            change.mixes.append((key_in, material, key_bytes(event.args["key"])))
        elif event.event == "rskeyret":
            change.after, change.ret, change.end = key_bytes(event.args["key"]), \
                event.int("ret"), event.t
            found.append(open_on.pop(cpu))
    return found


def assert_reseeds_mix_into_the_key(record: BootRecord) -> list[KeyChange]:
    """Every reseed that happened mixed the key extracted from the input pool into
    the base key, and none replaced it: inside each, the key went from K to
    BLAKE2s-256(K || extracted key), computed here from the bytes the kprobes read;
    and the key the reseed left is never the extracted key itself (6.1's memcpy).
    A boot with no reseed judges nothing, and fails."""
    assert_could_see(record, *KEY_EVENTS)
    changes = [c for c in key_changes(trace(record)) if c.happened]
    assert changes, f"no reseed happened in the trace: nothing judged ({record.data_log})"
    for change in changes:
        assert change.mixed() is not None, (
            f"the reseed at {change.t} s (CPU {change.cpu}) changed the key "
            f"{change.before[:4].hex()}.. -> {change.after[:4].hex()}.. without a mix: "
            "replaced, not mixed")
        key_in, material, key_out = change.mixes[-1]
        assert change.mixed(), (
            f"the reseed at {change.t} s: the key after its mix {key_out[:4].hex()}.. is not "
            f"BLAKE2s-256 of the key before {key_in[:4].hex()}.. and the extracted "
            f"{material[:4].hex()}..: not mixed")
        assert change.after != material, (
            f"the reseed at {change.t} s left the extracted key itself as the base key "
            f"({material[:4].hex()}..): replaced after the mix")
    return changes


def reseed_after_3(record: BootRecord) -> tuple[KeyChange, int]:
    """The one reseed tried after the reseed to state 3 (RNDRESEEDCRNG, from task
    reseed), and the bits the input pool held for it: the kprobes' credits since
    the reseed to 3 returned (a reseed debits all the pool holds, at most its 256)."""
    events = trace(record)
    changes = key_changes(events)
    three = next((c for c in changes if c.full and c.happened), None)
    assert three is not None, f"no reseed to state 3 among the key events ({record.data_log})"
    later = [c for c in changes if c.t > three.end]
    assert len(later) == 1, (
        f"{len(later)} reseeds tried after state 3 ({[(c.t, c.ret) for c in later]}): not "
        "the one RNDRESEEDCRNG alone")
    assert_could_see(record, "cred")
    held = sum(e.int("bits") for e in events
               if e.event == "cred" and three.end < e.t < later[0].t)
    return later[0], min(held, POOL_BITS)


# ---- A reseed due while the input pool is short --------------------------------

# Task crngdue (fixtures/init): with the reseed made due at once, grbench uses the
# crng in a window of the kprobe set crngdue (its cases tagged phase=window; the
# untraced phases not_due and due before it are for the throughput, not judged). The RFC tries a due reseed whenever
# the crng is used; one that finds fewer than RESEED_BITS credited bits returns
# -ENODATA and is tried again only a second later (CRNG_RFC_RESEED_RETRY), not on
# every use: on an idle guest a reseed stays due for as long as the pool is short.
DUE_TASK = "crngdue"
RETRY_S = 1.0
# Tries a window may hold beyond one per RETRY_S of grbench's time: both vCPUs can
# pass the retry test at once, and the window opens and closes outside grbench.
RETRY_SLACK = 4
# The crng's uses must outnumber the tries allowed by this much, or a kernel that
# tries on every use would pass the bound too.
USES_PER_ALLOWED_TRY = 10


def assert_due_reseed_retried_once_a_second(record: BootRecord) -> dict[str, int]:
    """In crngdue's window the reseed was due with the input pool short (tries
    answered -ENODATA), and it was tried about once a second, not on each of the
    crng's many uses. Counts from kprobe hists; a missed hit fails the check."""
    sections = record.finished_task(DUE_TASK).sections()
    missed = missed_hits(sections, ("use", "try", "done"))
    assert not missed, f"the crngdue kprobes missed hits {missed}: counts unknown"
    uses = sum(hits for _, hits in window_hist(sections, "use"))
    tries = sum(hits for _, hits in window_hist(sections, "try"))
    outcomes = {signed_key(keys["ret"]): hits for keys, hits in window_hist(sections, "done")}
    seconds = sum(float(p["seconds"]) for p in record.probe_events("throughput")
                  if p.get("phase") == "window")
    assert seconds > 0, f"grbench reported no throughput case in the window ({record.data_log})"
    allowed = int(seconds / RETRY_S) + 1 + RETRY_SLACK
    found = {"uses": uses, "tries": tries, "short": outcomes.get(NO_DATA, 0),
             "allowed": allowed}
    assert found["short"] >= 1, (
        f"no reseed found the input pool short in the window {found}, outcomes "
        f"{outcomes}: the due reseed with a short pool was not exercised")
    assert uses >= USES_PER_ALLOWED_TRY * allowed, (
        f"the crng was used {uses} times in the window, too few to tell tries on every "
        f"use from tries once a second ({found})")
    assert tries <= allowed, (
        f"{tries} reseed tries in {seconds:.1f} s of grbench ({uses} uses of the crng): "
        f"a due reseed with a short input pool is tried on every use, not once a "
        f"second ({found})")
    return found
