"""Checks of the lrng variant, from the kernel log, /proc/crypto and the kprobe trace.

Functions, not tests, so the tests can run them on the lrng kernel and, expecting
a failure, on the negative control (test-lrng-fullbit).
"""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Optional

from ..core.bootrecord import BootRecord
from .credit import hits_by, window_hist
from .trace import (MARKER_EVENT, TRACE_TASK, TraceEvent, blind_spots, kprobe_misses, trace_of,
                    twinless, unarmed)

# The seed's numbers (kernel/patches/lrng): the primary DRBG's stages, by the
# trace's stage number, and the interrupts each needs in the pool: a pool word
# (32), 112 bits rounded up to whole words (128), 256 bits at 256/288 bits per
# interrupt (288).
STAGE_NAMES = {1: "initially seeded", 2: "minimally seeded", 3: "fully seeded"}
STAGE_INTERRUPTS = {1: 32, 2: 128, 3: 288}
SECONDARY_SEEDED = re.compile(r"^lrng: secondary DRBG on node (\d+) fully seeded$")
DRBG_KAT_PASSED = "lrng: DRBG known-answer test passed"
# /proc/crypto: one block per algorithm implementation, "key : value" lines.
CRYPTO_FIELD = re.compile(r"^(\w+)\s*:\s*(.*)$")
SELFTEST_PASSED = "passed"


# fixtures/trace-lrng's events: an interrupt credited (icred, with the pool's count),
# a read of the pool begun (getpool) and done (cred, the bits it gave).
CREDITED = "icred"
READ_START = "getpool"
POOL_READ = "cred"
# fixtures/trace-lrng-boot adds the function tracer from boot on the calls behind
# the kprobes at the interrupt's path (each paired with its kprobe twin by
# trace.twinless) and on the pool's read (READ_FN, paired by time instead: a read
# before the first kprobe event is one the kprobes could not see).
FN_INTERRUPT = "add_interrupt_randomness"
READ_FN = "lrng_get_pool"
FN_TWINS = {FN_INTERRUPT: "air", "lrng_pool_stuck_rejected": "stuck",
            "lrng_pool_add_credited": CREDITED}
FUNCTION_EVENTS = set(FN_TWINS) | {READ_FN}


def as_kprobe_events(events: list[TraceEvent]) -> list[TraceEvent]:
    """The trace with each call the function tracer alone saw on the interrupt's
    path renamed as its kprobe's event (without the kprobe's arguments), and its
    twins of kprobe events dropped."""
    return [dataclasses.replace(e, event=FN_TWINS.get(e.event, e.event))
            for e in twinless(events, FN_TWINS)]


def first_kprobe_event(events: list[TraceEvent]) -> Optional[float]:
    """The time of the trace's first kprobe event (not a function tracer call)."""
    return next((e.t for e in events if e.event not in FUNCTION_EVENTS), None)


def traced_from_boot(events: list[TraceEvent]) -> bool:
    """Whether the function tracer recorded the interrupts from boot: its first
    call of add_interrupt_randomness() precedes every kprobe event."""
    first_call = next((e.t for e in events if e.event == FN_INTERRUPT), None)
    first_kprobe = first_kprobe_event(events)
    return first_call is not None and (first_kprobe is None or first_call < first_kprobe)


def trace(record: BootRecord) -> list[TraceEvent]:
    events = trace_of(record.finished_task(TRACE_TASK).sections())
    assert events, f"the kprobe trace is empty ({record.data_log})"
    return events


def trace_misses(record: BootRecord, events: Optional[list[TraceEvent]] = None) -> int:
    """Hits the trace set's kprobes missed over the boot that the trace lacks
    altogether (so a count of interrupts may be short by this many). Given the
    events of a trace from boot, a missed hit of a kprobe with a function tracer
    twin is not counted: the call is in the trace (the function tracer records it
    when the kprobe, inside another kprobe's handler on that CPU, cannot)."""
    misses = kprobe_misses(record.finished_task(TRACE_TASK).sections())
    covered = set(FN_TWINS.values()) if events is not None and traced_from_boot(events) else set()
    return sum(count for name, count in misses.items() if name not in covered)


# ---- Stage thresholds ----------------------------------------------------------------

# The pool is read out in whole 32-bit words of folded bits: a read uses a multiple
# of this many interrupts (drivers/char/lrng.c, lrng_get_pool()).
POOL_WORD_BITS = 32
# The pool's size: 128 words of folded bits, so it holds 4096 interrupts at most
# (lrng_get_pool() caps its count there).
POOL_BITS = 128 * POOL_WORD_BITS
# Bits the LRNG credits per interrupt, as num/den of the seed (256/288).
CREDIT_NUM, CREDIT_DEN = 256, 288
# The series' count at a read (the icred events= of the last credit before it) can
# hold an interrupt whose own events come after the read's start: one CPU's count
# was raised while another CPU's credit event was being written. Interrupts do not
# nest, so each CPU has at most one such interrupt in flight at a time: the series'
# count and the trace's may differ by one per CPU that took interrupts (a count,
# whatever the host's load does to the timing).
IN_FLIGHT_PER_CPU = 1


def in_flight(events: list[TraceEvent]) -> int:
    """How far the series' pool count and the trace's may differ: one per CPU the
    trace saw take an interrupt."""
    return IN_FLIGHT_PER_CPU * len({e.cpu for e in events if e.event == "air"})


@dataclass(frozen=True)
class Window:
    """The interrupts that went into the pool between two reads of it."""
    stage: int              # the stage the read at the end of the window gave
    t: float                # that read's time
    entered: int            # add_interrupt_randomness() entries seen (kprobe air)
    stuck: int              # of which the stuck test rejected (kprobe stuck)
    carried: Optional[int]  # interrupts the previous read left in the pool (None:
    #                         unknown, the previous read's pool held interrupts
    #                         from before the trace)
    pool: Optional[int]     # the series' own count at the read (kprobe icred events=)
    used: int               # interrupts the read took, by the bits it returned

    @property
    def counted(self) -> Optional[int]:
        """Interrupts in the pool at the read, by the trace's own count."""
        return None if self.carried is None else self.entered - self.stuck + self.carried

    def __str__(self) -> str:
        counted = "?" if self.counted is None else self.counted
        return (f"{STAGE_NAMES[self.stage]} at {self.t:.3f} s: {counted} interrupts in the "
                f"pool by the trace ({self.entered} entered, {self.stuck} stuck, "
                f"{'?' if self.carried is None else self.carried} carried over), "
                f"{'?' if self.pool is None else self.pool} by the series, {self.used} used")


def interrupts_used(bits: int, num: int = CREDIT_NUM, den: int = CREDIT_DEN) -> int:
    """Interrupts a read took for the bits it returned (whole pool words), at the
    num/den bits per interrupt the kernel credits (icred events say which)."""
    irqs = -(-bits * den // num)
    return -(-irqs // POOL_WORD_BITS) * POOL_WORD_BITS


def assert_each_entry_credited_or_stuck(events: list[TraceEvent], missed: int = 0) -> None:
    """Every interrupt that entered the LRNG was, on its CPU and before that CPU's
    next one, either credited once or rejected as stuck: nothing else. Each hit the
    kprobes missed can break this once (an entry or an outcome the trace lacks)."""
    pending: dict[int, float] = {}
    broken: list[str] = []
    for e in events:
        if e.event == "air":
            if e.cpu in pending:
                broken.append(f"interrupt on CPU {e.cpu} at {pending[e.cpu]} s neither "
                              f"credited nor stuck before the next one at {e.t} s")
            pending[e.cpu] = e.t
        elif e.event in (CREDITED, "stuck"):
            if pending.pop(e.cpu, None) is None:
                broken.append(f"{e.event} on CPU {e.cpu} at {e.t} s without an interrupt "
                              "entering")
    assert len(broken) <= missed, (
        f"{broken[0]} ({len(broken)} such, the kprobes missed {missed} hits)")


def windows(events: list[TraceEvent]) -> list[Window]:
    """One window per stage the trace saw, ending at the pool read whose seeding
    printed it; reads that gave no stage carry their leftovers on.

    lrng_get_pool() takes the pool's count first thing: an interrupt credited while a
    read runs (between its entry, READ_START, and its return, POOL_READ) stays in
    the pool for the next read, whichever CPU it came on. The trace counts it there.

    A trace with the function tracer from boot (trace-lrng-boot) starts from an
    empty pool; one without it, from a pool holding the interrupts from before the
    kprobes (unknown). So does a trace after a read only the function tracer saw."""
    found: list[Window] = []
    entered = stuck = 0
    # interrupts in the pool before the first read: none at boot, unknown otherwise
    carried: Optional[int] = 0 if traced_from_boot(events) else None
    first_kprobe = first_kprobe_event(events)
    pool: Optional[int] = None          # the series' count, once an icred event told it
    reading = False
    flight_entered = flight_stuck = 0   # interrupts while a read runs
    rate = (CREDIT_NUM, CREDIT_DEN)     # bits per interrupt, as the last icred said
    last_read: Optional[Window] = None
    for e in as_kprobe_events(events):
        if e.event == READ_FN:
            if first_kprobe is None or e.t < first_kprobe:
                # a read no kprobe saw: what it took, and so what it left, is unknown
                carried = None
                entered = stuck = 0
        elif e.event == READ_START:
            reading = True
        elif e.event == "air":
            if reading:
                flight_entered += 1
            else:
                entered += 1
        elif e.event == "stuck":
            if reading:
                flight_stuck += 1
            else:
                stuck += 1
        elif e.event == CREDITED:
            # A call the function tracer alone saw (before the kprobes, or a hit they
            # missed) has no arguments: the series' count is unknown until the next.
            if "num" in e.args:
                rate = (e.int("num"), e.int("den"))
            if not reading:
                pool = e.int("events") if "events" in e.args else None
        elif e.event == POOL_READ:
            used = interrupts_used(e.int("bits"), *rate)
            last_read = Window(0, e.t, entered, stuck, carried, pool, used)
            # what the read left, by the trace's count (the pool holds POOL_BITS
            # interrupts at most), and what came in while it ran
            counted = last_read.counted
            carried = (None if counted is None
                       else max(min(counted, POOL_BITS) - used, 0) + flight_entered - flight_stuck)
            entered = stuck = flight_entered = flight_stuck = 0
            pool = None
            reading = False
        elif e.event == "stage" and last_read is not None:
            found.append(dataclasses.replace(last_read, stage=e.int("stage")))
    return found


def assert_stage_thresholds(record: BootRecord) -> list[Window]:
    """From a trace that counts from boot (trace-lrng-boot): every interrupt was
    credited once or rejected as stuck; the stages came in order, each once; the
    read behind each stage took a pool that held the seed's number of non-stuck
    interrupts (32, 128, 288) by the trace's own count, and took the seed's worth
    of credited bits. The series' own pool count, where the kprobes fetched it, is
    only checked against the trace's, never used to judge."""
    events = trace(record)
    missed = trace_misses(record, events)
    seen = as_kprobe_events(events)
    flight = in_flight(seen)
    assert_each_entry_credited_or_stuck(seen, missed)
    found = windows(events)
    assert found, f"no stage of the primary DRBG in the trace ({record.data_log})"
    stages = [w.stage for w in found]
    assert stages == sorted(set(stages)), f"stages in the trace: {stages}"
    for w in found:
        need = STAGE_INTERRUPTS[w.stage]
        # What the read took, by the bits it returned at the rate the credits were
        # given (both fetched by the kprobes): the seed's interrupts, whatever else
        # came into the pool before the read ran.
        assert w.used >= need, (
            f"{STAGE_NAMES[w.stage]} after {w.used} interrupts' worth of credited bits "
            f"(the bits its read returned, at the credit events' rate), below the "
            f"seed's {need}: {w}")
        assert w.counted is not None, (
            f"the trace cannot count the interrupts behind {STAGE_NAMES[w.stage]} (not "
            f"traced from boot, fixtures/trace-lrng-boot, or a read the kprobes missed): {w}")
        assert w.counted + missed >= need, (
            f"{STAGE_NAMES[w.stage]} after {w.counted} non-stuck interrupts by the trace, "
            f"below the seed's {need}: {w}; kprobes missed {missed}")
        # The series' count, where the kprobes fetched it after the last credit
        # before the read, only checked against the trace's.
        assert w.pool is None or abs(w.pool - w.counted) <= flight + missed, (
            f"the series' pool count is not the trace's: {w}; kprobes missed {missed}")
    assert max(stages) == max(STAGE_INTERRUPTS), (
        f"the trace saw stages {stages}, not {STAGE_NAMES[max(STAGE_INTERRUPTS)]}")
    return found


# ---- The CPU's RNG ------------------------------------------------------------------

# lrng_pdrbg_seed_internal() puts LRNG_DRBG_SECURITY_STRENGTH_BYTES of the CPU's RNG
# output in front of the pool's, in one seed buffer: the getpool event fetches those
# four words from before the pool's part, the inject event the bits the primary DRBG
# was credited for the whole buffer.
ARCH_WORDS = ("arch0", "arch1", "arch2", "arch3")
INJECT = "inject"
# The seed's estimate for the CPU's RNG: a 32nd of the DRBG's 256-bit security
# strength, credited only with random.trust_cpu=on.
ARCH_CREDIT_BITS = 256 >> 5


@dataclass(frozen=True)
class Seeding:
    """One seeding of the primary DRBG from the internal noise sources."""
    t: float                # the pool read's start
    words: tuple[int, ...]  # the CPU RNG's words leading the seed buffer
    pool_bits: int          # the bits the pool gave (cred)
    credited: int           # the bits the primary DRBG was credited (inject)
    length: int             # the seed's bytes (inject)

    def __str__(self) -> str:
        words = " ".join(f"{w:#018x}" for w in self.words)
        return (f"seeding at {self.t:.3f} s: CPU RNG words {words}, pool {self.pool_bits} "
                f"bits, credited {self.credited}, {self.length} bytes")


def seedings(events: list[TraceEvent]) -> list[Seeding]:
    """Each traced getpool -> cred -> inject sequence of one task, in order: the
    three steps of one lrng_pdrbg_seed_internal() call."""
    started: dict[int, TraceEvent] = {}
    pool_bits: dict[int, int] = {}
    found = []
    for e in events:
        if e.event == READ_START:
            started[e.pid] = e
            pool_bits.pop(e.pid, None)
        elif e.event == POOL_READ and e.pid in started:
            pool_bits[e.pid] = e.int("bits")
        elif e.event == INJECT and e.pid in pool_bits:
            start = started.pop(e.pid)
            found.append(Seeding(start.t, tuple(start.int(w) for w in ARCH_WORDS),
                                 pool_bits.pop(e.pid), e.int("bits"), e.int("len")))
    return found


def traced_seedings(record: BootRecord) -> list[Seeding]:
    """The boot's seedings from the noise sources, asserting that the trace armed
    the three events that make one and saw at least one."""
    never = unarmed(record.finished_task(TRACE_TASK).sections(), (READ_START, POOL_READ, INJECT))
    assert not never, f"trace events {never} never armed ({record.data_log})"
    found = seedings(trace(record))
    assert found, f"no seeding of the primary DRBG from its noise sources traced ({record.data_log})"
    return found


def assert_cpu_rng_in_seedings(record: BootRecord, has_cpu_rng: bool,
                               trusted: bool) -> list[Seeding]:
    """Every seeding of the primary DRBG from the internal sources carries the CPU
    RNG's output where the guest has one: four words, none zero, none seen twice over
    the boot; none (zeros) where it has none. The credit is the pool's, plus the
    seed's 8 bits where the CPU's RNG is trusted. Judged on what the trace fetched
    from the seed buffer, not on the series' own counts."""
    missed = trace_misses(record)
    found = traced_seedings(record)
    if has_cpu_rng:
        empty = [s for s in found if not all(s.words)]
        assert not empty, (f"{len(empty)} of {len(found)} seedings without the CPU RNG's "
                           f"output, the first: {empty[0]}")
        words = [w for s in found for w in s.words]
        assert len(set(words)) == len(words), (
            f"the CPU RNG's words repeat across {len(found)} seedings: "
            + "; ".join(map(str, found)))
    else:
        filled = [s for s in found if any(s.words)]
        assert not filled, f"CPU RNG words in a guest without one: {filled[0]}"
    extra = ARCH_CREDIT_BITS if has_cpu_rng and trusted else 0
    wrong = [s for s in found if s.credited != s.pool_bits + extra]
    assert len(wrong) <= missed, (
        f"{len(wrong)} of {len(found)} seedings not credited the pool's bits"
        f"{f' + {extra}' if extra else ''}, the first: {wrong[0]}; kprobes missed {missed}")
    return found


# The seed buffer: the CPU RNG's 32 bytes (always written, zeros without one), then
# the whole pool words the read took. Its size is room for nine words (288
# interrupts); a read at a lower stage fills less of it.
CPU_RNG_BYTES = 32


def assert_seeds_hold_only_what_was_read(record: BootRecord) -> list[Seeding]:
    """Every seeding of the primary DRBG from the internal sources is as long as
    what was written into its buffer: the CPU RNG's 32 bytes and the pool words the
    read took for the bits it credited, never the whole buffer with stale stack
    bytes in it. At least one seeding must have read less than the full buffer,
    or the check tells nothing."""
    found = traced_seedings(record)
    read = [(s, CPU_RNG_BYTES + interrupts_used(s.pool_bits) // 8) for s in found]
    assert min(n for _, n in read) < max(s.length for s in found), (
        f"every seeding read the whole buffer: nothing to tell ({record.data_log})")
    wrong = [f"{s} (read {n})" for s, n in read if s.length != n]
    assert not wrong, (f"{len(wrong)} of {len(found)} seedings longer or shorter than what "
                       f"was read into the seed buffer: " + "; ".join(wrong[:3]))
    return found


# ---- Out of service -----------------------------------------------------------------

# lrng 0014: when the DRBGs cannot serve (a failed known-answer test, a failed
# allocation), what waits for readiness fails with EIO; /dev/urandom is served by
# the init RNG.
KAT_FAILED = "lrng: DRBG known-answer test failed"
OUT_OF_SERVICE = "lrng: the DRBGs stay out of service"
STAGE_MESSAGE = re.compile(r"^lrng: (primary DRBG (initially|minimally|fully) seeded"
                           r"|secondary DRBG on node \d+ fully seeded)$")
URANDOM_TASK = "urandom"


def assert_out_of_service(record: BootRecord) -> None:
    """The DRBG failed its known-answer test, so it never served: no seeding stage
    was reached, early user space's blocking getrandom() returned EIO (it did not
    block to the probe's timeout) and so did GRND_NONBLOCK, and /dev/urandom still
    gave two different non-zero reads."""
    said = [text for _, text in record.messages]
    assert any(text.startswith(KAT_FAILED) for text in said), (
        f"no '{KAT_FAILED}' in the kernel log: nothing tested ({record.data_log})")
    stages = [text for text in said if STAGE_MESSAGE.match(text)]
    assert not stages, f"a DRBG that failed its known-answer test was seeded: {stages}"
    assert any(text.startswith(OUT_OF_SERVICE) for text in said), (
        f"no '{OUT_OF_SERVICE}' in the kernel log ({record.data_log})")
    blocking = record.probe_event("blocking")
    assert blocking is not None, (
        f"early user space's blocking getrandom() never returned: "
        f"{record.probe_events('blocking_timeout')} ({record.data_log})")
    assert (blocking["ret"], blocking["errno"]) == ("-1", "EIO"), (
        f"blocking getrandom() with the DRBGs out of service answered {blocking}, not EIO")
    nonblock = record.probe_events("nonblock_error") + record.probe_events("nonblock_ok")
    assert nonblock and nonblock[0].get("errno") == "EIO", (
        f"GRND_NONBLOCK with the DRBGs out of service: {nonblock}, not EIO")
    reads = [line.split() for line in record.finished_task(URANDOM_TASK).lines if line.strip()]
    assert len(reads) == 2 and all(len(r) == 32 for r in reads), (
        f"/dev/urandom did not give two 32-byte reads: {reads}")
    assert reads[0] != reads[1] and all(any(b != "00" for b in r) for r in reads), (
        f"/dev/urandom repeated itself or gave zeros: {reads}")


# ---- RNDADDENTROPY ---------------------------------------------------------------------
# ---- RNDADDENTROPY ---------------------------------------------------------------------

# fixtures/addentropy.c: each write's claim, as 6.1 credits it only for a whole write.
WRITE_CREDIT_BITS = 256


def assert_credited_only_whole_writes(record: BootRecord) -> dict[str, int]:
    """The whole RNDADDENTROPY write succeeded and was credited its 256 bits once;
    the one that faulted part-way failed with EFAULT and was credited nothing,
    though the trace saw its first chunk go in. Judged on the inject events of each
    writer's pid (kprobe on lrng_pdrbg_inject()); returns the bits per write."""
    writes = {p["write"]: p for p in record.probe_events("addentropy")}
    assert set(writes) == {"whole", "fault"}, (
        f"addentropy reported {sorted(writes)}, not both writes ({record.data_log})")
    assert writes["whole"]["ret"] == "0", f"the whole write failed: {writes['whole']}"
    assert writes["fault"]["errno"] == "EFAULT", (
        f"the faulting write did not fail with EFAULT: {writes['fault']}")
    blind = blind_spots(record.finished_task(TRACE_TASK).sections(), [INJECT])
    assert not blind, f"the trace could not see every injection ({', '.join(blind)})"
    events = trace(record)
    credited: dict[str, int] = {}
    for name, write in writes.items():
        injects = [e for e in events if e.event == INJECT and e.pid == int(write["pid"])]
        assert injects, (f"no injection traced from the {name} write (pid {write['pid']}): "
                         "the trace could not have seen its credit")
        credited[name] = sum(e.int("bits") for e in injects)
    assert credited["fault"] == 0, (
        f"the write that failed with EFAULT was credited {credited['fault']} bits")
    assert credited["whole"] == WRITE_CREDIT_BITS, (
        f"the whole write was credited {credited['whole']} bits, not {WRITE_CREDIT_BITS}")
    return credited


# ---- NUMA ---------------------------------------------------------------------------

def assert_secondaries_seeded(record: BootRecord, nodes: int) -> None:
    """Every node's secondary DRBG announced itself fully seeded, once."""
    seeded = [int(m.group(1)) for _, text in record.messages
              if (m := SECONDARY_SEEDED.search(text))]
    assert sorted(seeded) == list(range(nodes)), (
        f"secondary DRBGs fully seeded on nodes {seeded}, not each of 0..{nodes - 1} once "
        f"({record.data_log})")


def lrng_state(lines: list[str]) -> dict[str, dict[str, str] | str]:
    """/sys/kernel/debug/lrng/state: "key: value" lines; the per-node and per-CPU
    lines ("node0: fully_seeded=1 ...", "cpu1: node=1 last_served_by_node=1")
    become {"k": "v"} dicts under their key."""
    state: dict[str, dict[str, str] | str] = {}
    for line in lines:
        key, sep, value = line.partition(": ")
        if not sep:
            continue
        if re.fullmatch(r"(node|cpu)\d+", key):
            state[key] = dict(word.split("=", 1) for word in value.split() if "=" in word)
        else:
            state[key] = value.strip()
    return state


# What task lrngnoderead reads on each CPU (fixtures/init: dd bs=4096 count=16).
NODEREAD_BYTES = 16 * 4096
# With the ChaCha20 output generator (lrng 0008) a read takes a 32-byte key from
# its node's secondary DRBG only when a reseed made the CPU's key stale: a pinned
# read may cause a few such fetches, never anything near its own size.
CHACHA_KEY_BYTES = 32
MAX_KEYS_PER_READ = 4


@dataclass(frozen=True)
class PinnedRead:
    """One of task lrngnoderead's reads, pinned to a CPU, seen in the debugfs state."""
    cpu: int
    node: int                # the CPU's node
    served_by: int           # the node whose secondary DRBG served the CPU last
    calls: int               # generate calls of the CPU's node's DRBG during the read
    generated: int           # bytes that DRBG generated during the read


def pinned_reads(record: BootRecord) -> list[PinnedRead]:
    sections = record.finished_task("lrngnoderead").sections()
    cpus = sorted(int(title.split("cpu")[1]) for title in sections if title.startswith("after"))
    assert cpus, f"no pinned read reported ({record.data_log})"
    reads = []
    for cpu in cpus:
        before = lrng_state(sections[f"before cpu{cpu}"])
        after = lrng_state(sections[f"after cpu{cpu}"])
        line = after[f"cpu{cpu}"]
        assert isinstance(line, dict)
        node = int(line["node"])
        grew = {key: int(after[f"node{node}"][key]) - int(before[f"node{node}"][key])  # type: ignore[index]
                for key in ("generate_calls", "generated_bytes")}
        reads.append(PinnedRead(cpu, node, int(line["last_served_by_node"]),
                                grew["generate_calls"], grew["generated_bytes"]))
    return reads


def assert_reads_served_by_own_node(record: BootRecord, nodes: int) -> None:
    """With the secondary DRBGs as the output generator (lrng.drbg_output=1):
    reads pinned to each CPU were served, whole, by the secondary DRBG of that
    CPU's node; the CPUs cover every node."""
    served = {}
    for read in pinned_reads(record):
        assert read.served_by == read.node, (
            f"a read pinned to CPU {read.cpu} (node {read.node}) was served by node "
            f"{read.served_by}")
        assert read.calls > 0 and read.generated >= NODEREAD_BYTES, (
            f"node {read.node}'s secondary DRBG generated {read.generated} bytes in "
            f"{read.calls} calls for CPU {read.cpu}'s read of {NODEREAD_BYTES}")
        served[read.cpu] = read.node
    assert sorted(set(served.values())) == list(range(nodes)), (
        f"CPUs and the nodes that served them: {served}; expected every node 0..{nodes - 1}")


def assert_output_from_chacha20(record: BootRecord) -> None:
    """With the default output generator: each pinned read came from the CPU's
    ChaCha20 generator, its node's secondary DRBG giving at most a few keys."""
    most = MAX_KEYS_PER_READ * CHACHA_KEY_BYTES
    for read in pinned_reads(record):
        assert read.generated <= most, (
            f"node {read.node}'s secondary DRBG generated {read.generated} bytes for CPU "
            f"{read.cpu}'s read of {NODEREAD_BYTES}: the read was served by the DRBG, "
            f"not by a ChaCha20 generator keyed from it (at most {most} bytes of keys)")


# ---- Reseed interval ------------------------------------------------------------------
# Task lrngreseed (fixtures/init): phase "due" sets urandom_min_reseed_secs to
# bench.reseed_secs and reads once, then again past the interval; phase "long"
# sets an interval whose jiffies overflow an int and reads LONG_RESEED_READS times.
RESEED_PHASES = ("due", "long")
LONG_RESEED_READS = 16


@dataclass(frozen=True)
class ReseedPhase:
    name: str
    settings: tuple[str, ...]  # "accepted N" / "refused N", in the order tried
    reseeds: int               # node 0's secondary DRBG reseeds during the phase

    def __str__(self) -> str:
        return f"{self.name}: {', '.join(self.settings)}; {self.reseeds} reseed(s)"


def reseed_phases(record: BootRecord) -> dict[str, ReseedPhase]:
    sections = record.finished_task("lrngreseed").sections()
    phases = {}
    for name in RESEED_PHASES:
        before, after = sections.get(f"{name} before"), sections.get(f"{name} after")
        assert before is not None and after is not None, (
            f"task lrngreseed did not report phase {name!r} ({record.data_log})")
        counts = []
        for lines in (before, after):
            node0 = lrng_state(lines).get("node0")
            assert isinstance(node0, dict), (
                f"no node0 line in the LRNG state of phase {name!r}: were the DRBGs up? "
                f"({record.data_log})")
            counts.append(int(node0["reseeds"]))
        settings = tuple(line[len("set: "):] for line in before if line.startswith("set: "))
        phases[name] = ReseedPhase(name, settings, counts[1] - counts[0])
    return phases


def assert_reseed_interval_kept(record: BootRecord) -> dict[str, ReseedPhase]:
    """A read past the reseed interval reseeds node 0's secondary DRBG, whatever
    hands out the output; an interval too long for jiffies never makes every
    read reseed (it is refused, or kept in full)."""
    phases = reseed_phases(record)
    due, long = phases["due"], phases["long"]
    assert due.settings and due.settings[0].startswith("accepted"), (
        f"the kernel refused the short reseed interval: {due}")
    assert due.reseeds >= 1, (
        f"no reseed of node 0's secondary DRBG for a read past the reseed interval "
        f"({due}): the output generator outlives the interval")
    assert long.reseeds == 0, (
        f"{long.reseeds} reseeds in {LONG_RESEED_READS} reads with a reseed interval of "
        f"months ({long}): the interval overflowed into the past")
    return phases


# ---- DRBG ---------------------------------------------------------------------------

def crypto_algorithms(lines: list[str]) -> list[dict[str, str]]:
    """/proc/crypto as one dict per algorithm implementation."""
    blocks: list[dict[str, str]] = [{}]
    for line in lines:
        match = CRYPTO_FIELD.match(line.strip())
        if match:
            blocks[-1][match.group(1)] = match.group(2).strip()
        elif not line.strip() and blocks[-1]:
            blocks.append({})
    return [b for b in blocks if b]


def assert_drbg_self_tests(record: BootRecord) -> None:
    """The series' known-answer test of its HMAC DRBG passed at boot, and the crypto
    manager's self-tests passed for every DRBG the kernel registered."""
    texts = [text for _, text in record.messages]
    assert DRBG_KAT_PASSED in texts, (
        f"no '{DRBG_KAT_PASSED}' in the kernel log ({record.data_log})")
    failed = [t for t in texts if t.startswith("alg: ") and "fail" in t]
    assert not failed, f"crypto self-test failures: {failed}"
    drbgs = [a for a in crypto_algorithms(record.finished_task("crypto").lines)
             if "drbg" in a.get("driver", "")]
    assert drbgs, f"/proc/crypto lists no DRBG ({record.data_log})"
    untested = [f"{a['driver']}: selftest {a.get('selftest')}" for a in drbgs
                if a.get("selftest") != SELFTEST_PASSED]
    assert not untested, f"DRBG self-tests not passed: {untested}"


# ---- A writer to /dev/urandom beside a reader (task writerekey) ------------------------------

WRITEREKEY_TASK = "writerekey"
# The reader's process name in the rekey hist (common_pid.execname).
WRITEREKEY_READER = "grbench"


def assert_write_renews_no_key(record: BootRecord) -> str:
    """While a writer floods /dev/urandom, a reader on another CPU fetches a new
    ChaCha20 key only after the LRNG's own reseeds (one for each, and its first):
    a write must not renew every CPU's key (lrng 0021). Counted by kprobe hists in
    a window (fixtures/kprobes-writerekey); says what was counted."""
    task = record.finished_task(WRITEREKEY_TASK)
    sections = task.sections()
    missed = {event: n for event, n in kprobe_misses(sections).items() if n}
    assert not missed, f"the window's kprobes missed hits: {missed} ({record.data_log})"
    fetches = hits_by(window_hist(sections, "rekey", required=True), "common_pid")
    reader = sum(n for who, n in fetches.items() if who.startswith(WRITEREKEY_READER))
    injected = hits_by(window_hist(sections, "sinject", required=True), "internal")
    writes, internal = injected.get("0", 0), injected.get("1", 0)
    calls = sum(int(p.get("calls", 0)) for p in record.probe_events("throughput"))
    assert writes and calls, (
        f"nothing to judge: {writes} injections from the writer and {calls} reader requests "
        f"in the window ({record.data_log})")
    seen = (f"{reader} key fetches by the reader in {calls} requests, while the writer made "
            f"{writes} injections into the secondary DRBGs and the LRNG reseeded them "
            f"{internal} times")
    assert reader <= internal + 1, f"a write renews the CPUs' keys: {seen} ({record.data_log})"
    return seen


# ---- A CPU taken offline and back (task cpukey) -----------------------------------------

CPUKEY_TASK = "cpukey"
CPUKEY_EVENT = "cpukey"
MARKER = MARKER_EVENT


def assert_cpu_key_renewed(record: BootRecord) -> str:
    """Between CPU 1's offline and its first read after coming back, the trace
    shows a key fetch on that CPU (lrng 0024): it serves no key from before it went
    down. Says where the fetch was."""
    sections = record.finished_task(CPUKEY_TASK).sections()
    blind = blind_spots(sections, (CPUKEY_EVENT,))
    assert not blind, f"the key fetches could not all be seen: {blind} ({record.data_log})"
    events = trace_of(sections)
    marks = {e.args.get("cpukey"): e for e in events if e.event == MARKER and "cpukey" in e.args}
    assert {"offline", "read"} <= set(marks), (
        f"the task's trace markers are missing (found {sorted(marks)}) ({record.data_log})")
    cpu = int(marks["offline"].args["cpu"])
    fetches = [e for e in events if e.event == CPUKEY_EVENT and e.cpu == cpu
               and marks["offline"].t <= e.t <= marks["read"].t]
    assert fetches, (
        f"CPU {cpu} went offline and came back, then served a read without fetching a new "
        f"key: it used the key it had before it went down ({record.data_log})")
    return f"CPU {cpu} fetched a key at {fetches[0].t:.6f} s ({fetches[0].comm})"


# ---- RNDRESEEDCRNG after a write (task reseedioctl) -----------------------------------------

RESEEDIOCTL_TASK = "reseedioctl"
# fixtures/init, task reseedioctl: calls in a row (the first ones drain the primary DRBG).
RESEEDIOCTL_CALLS = 16
SECONDARY_RESEED = "reseed"          # the clone trace set's lrng_sdrbg_inject()


def assert_reseed_ioctl_reseeds(record: BootRecord, nodes: int = 1) -> str:
    """Each RNDRESEEDCRNG of several in a row answers 0 and reseeds
    every secondary DRBG at the call (the trace between its /dev/kmsg marks), as 6.1
    reseeds its CRNG whatever its credit (lrng 0025)."""
    record.finished_task(RESEEDIOCTL_TASK)
    answers = [(p.get("ret"), p.get("errno")) for p in record.probe_events("reseed")]
    assert answers == [("0", "0")] * RESEEDIOCTL_CALLS, (
        f"RNDRESEEDCRNG answered {answers}, not 0 each time ({record.data_log})")
    sections = record.task(TRACE_TASK).sections()
    blind = blind_spots(sections, (SECONDARY_RESEED,))
    assert not blind, f"the reseeds could not all be seen: {blind} ({record.data_log})"
    events = trace_of(sections)
    said = []
    for call in range(1, RESEEDIOCTL_CALLS + 1):
        marks = {text: t for t, text in record.messages}
        start, end = (marks.get(f"bench: reseed ioctl {call}"),
                      marks.get(f"bench: reseed ioctl {call} done"))
        assert start is not None and end is not None, \
            f"call {call}: its /dev/kmsg marks are missing ({record.data_log})"
        reseeds = [e for e in events if e.event == SECONDARY_RESEED and start <= e.t <= end]
        assert len(reseeds) >= nodes, (
            f"RNDRESEEDCRNG call {call} reseeded {len(reseeds)} of {nodes} secondary DRBG(s): "
            f"clones without a generation ID that follow the recipe keep their state "
            f"({record.data_log})")
        said.append(f"call {call}: {len(reseeds)} reseed(s)")
    return "; ".join(said)
