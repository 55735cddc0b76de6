"""Clones: one saved guest restored twice, and whether the two return the same bytes.

A guest running the init's `clone` task (fixtures/clonereads.c) waits for its RNG,
announces a save point on the data channel and then reads getrandom() on every CPU,
a few rounds apart. The host saves it at the save point and restores the saved
image twice, one clone after the other (benchlib/boot/restore.py says why not at once),
each with a new VM generation ID where the profile has one (`<genid/>`). Each clone prints its own reads; each clone's
whole story is the original's data log up to the save plus its own.

What is compared: the 16-byte blocks the two clones read after the restore. A
shared block is the hazard (two "different" machines repeating each other's keys,
nonces, UUIDs). What explains the outcome comes from outside the RNG's own
counters: a kprobe trace (fixtures/trace-clone-*) of add_vmfork_randomness and of
the variant's reseed paths, placed against the save point by the /dev/kmsg marks
the guest program writes (printk and the trace share one clock).

The save points: "early" just after the RNG is ready; "late" past two minutes of
uptime, when 6.1 reseeds only every 60 s, so that without a generation ID the
clones' next periodic reseed is far enough away for their first reads to repeat.
"""
from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

import libvirt

from ..boot import plan
from ..core import variants
from ..boot.stages import INTERRUPTED
from ..core.errors import BenchError
from ..boot.guest import BootRequest
from ..core.profiles import Profile
from ..boot.record import KmsgIncomplete, messages_from, parse_data, read_text
from ..core.bootrecord import TaskOutput
from ..boot.restore import RestoreFailed, SavedGuest, genid
from ..checks.lrngcheck import SECONDARY_RESEED
from ..checks.trace import (RESEED_PREFIX, TraceEvent, TraceIncomplete, armed_events,
                            kprobe_misses, parse_trace)
from ..core.userkernel import KernelUnderTest

CLONE_TASK = "clone"
# The kernel option of the generation ID's driver (drivers/virt/vmgenid.c).
VMGENID_OPTION = "CONFIG_VMGENID"
# The two clones of one saved image.
CLONE_SUFFIXES = ("clone-a", "clone-b")
# Save points. 6.1's reseed interval is max(1 s, uptime / 2) until the uptime
# reaches 2 x 60 s, then 60 s: past LATE_SAVE_UPTIME_S the next periodic reseed
# is up to a minute away.
EARLY, LATE = "early", "late"
LATE_SAVE_UPTIME_S = 125
SAVE_AT = {EARLY: 0, LATE: LATE_SAVE_UPTIME_S}
# Rounds of per-CPU reads after the save point, and the guest time before each:
# the host pauses the guest within this gap of seeing the save point, so each
# clone's first read comes a good second after its restore (time for the
# generation ID's ACPI notification to be handled).
ROUNDS = 3
GAP_MS = 3000
# Cases run at once (one guest each: the original, then its clones in turn). Their
# guests mostly wait for the late save point: twelve at once took 2 min 50 s on 2
# cores where six at a time took 3 min 42 s, with every save inside its gap.
CONCURRENT_CASES = 12
# Host wall time of one late case, measured (boot, 125 s, save, two clones): for
# estimates only.
CASE_WALL_S = 170
# How long the guest may take to get its RNG ready (clonereads' own cap is 300 s).
READY_CAP_S = 300
# Slack for the boot itself and for each clone's closing tasks (trace, kmsg dump).
BOOT_SLACK_S = 120
CLONE_END_S = ROUNDS * GAP_MS / 1000 + 180

SAVE_LINE = "save: uptime="
READ_LINE = re.compile(r"^read: round=(\d+) cpu=(\d+) uptime=([\d.]+) bytes=([0-9a-f]{32})\s*$")
SAVE_MARK = "bench: clone save"
DONE_MARK = "bench: clone reads done"
# What a clone-safe verdict says where the profile gave no generation ID.
NO_ID_GIVEN = "(no ID given)"
# In a clone trace set, the event on the generation ID's path, and the prefix of
# every event that is a reseed of the key that getrandom() reads from.
VMFORK_EVENT = "vmfork"
# The DRBG seeds of a clone trace set that arms them (lrng: drbg_raw_seed(), the
# first 16 bytes): the primary DRBG must take a vmfork's generation ID before the
# secondaries' reseed (lrngcheck.SECONDARY_RESEED).
DRBG_SEED_EVENT = "drbgseed"

Read = tuple[int, int]          # (round, cpu)


def clone_trace(variant: str) -> str:
    """The variant's clone trace set (fixtures/trace-NAME), from its variant.toml."""
    return variants.load(variant).clone_trace


def clone_case(profile: Profile, variant: str, kernel: Path, initrd: Path, outdir: Path,
               accel: str, point: str, users: Optional[KernelUnderTest] = None) -> "CloneCase":
    """A clone case: the boot it starts from (the clone task at this save point, the
    variant's clone trace set armed on the command line; a user's kernel with its
    modules), and whether the kernel has the vmgenid driver (a kernel the bench
    built does: base.config; a user's, as its config says, or assumed without one)."""
    params = {"clone_at": str(SAVE_AT[point]), "clone_rounds": str(ROUNDS),
              "clone_gap_ms": str(GAP_MS)}
    config = users.config if users is not None else None
    request = plan.request(profile, variant=variant, kernel=kernel, initrd=initrd,
                           outdir=outdir, accel=accel, tasks=[CLONE_TASK], params=params,
                           trace=clone_trace(variant), timeout_s=READY_CAP_S,
                           modules=users.modules if users is not None else None,
                           kernel_config=config)
    return CloneCase(request, point,
                     driver=config is None or config.get(VMGENID_OPTION) in ("y", "m"))


def parse_reads(text: str) -> dict[Read, str]:
    """The whole read lines of a data log: (round, cpu) -> 32 hex digits."""
    reads = {}
    for line in text.splitlines():
        match = READ_LINE.match(line.rstrip("\r"))
        if match:
            reads[(int(match.group(1)), int(match.group(2)))] = match.group(4)
    return reads


@dataclass
class CloneView:
    """One clone: its reads after the restore, its trace, its kernel log."""
    name: str
    data_log: Path                      # the clone's own data log (after the restore)
    whole_log: Path                     # the original's up to the save, then the clone's
    reads: dict[Read, str]
    tasks: dict[str, TaskOutput]
    messages: list[tuple[float, str]]
    events: list[TraceEvent]
    armed: list[str]                    # kprobe events registered (kprobe_events)
    missed: dict[str, int]              # kprobe misses per event (kprobe_profile)
    problems: list[str] = field(default_factory=list)

    def mark(self, text: str) -> Optional[float]:
        """printk time of the guest's own /dev/kmsg mark, the last one."""
        times = [t for t, message in self.messages if message == text]
        return times[-1] if times else None

    def after_save(self) -> list[TraceEvent]:
        """Trace events between the save point and the end of the reads."""
        start, end = self.mark(SAVE_MARK), self.mark(DONE_MARK)
        if start is None or end is None:
            return []
        return [e for e in self.events if start <= e.t <= end]

    def vmforks(self) -> list[TraceEvent]:
        return [e for e in self.after_save() if e.event == VMFORK_EVENT]

    def reseeds(self) -> list[TraceEvent]:
        """Reseeds after the save point; one that says it took 0 bytes is none."""
        return [e for e in self.after_save() if e.event.startswith(RESEED_PREFIX)
                and e.args.get("len") not in ("0", "0x0")]

    def reseeds_after_vmfork(self) -> list[TraceEvent]:
        forks = self.vmforks()
        return [e for e in self.reseeds() if forks and e.t >= forks[0].t]

    def vmfork_id_seeds(self) -> list[TraceEvent]:
        """DRBG seeds that begin with the first vmfork's generation ID, between
        that vmfork and the first secondary reseed after it (the trace's fetched
        words, compared as numbers)."""
        forks = self.vmforks()
        if not forks:
            return []
        fork = forks[0]
        ends = [e.t for e in self.after_save()
                if e.event == SECONDARY_RESEED and e.t >= fork.t]
        end = min(ends) if ends else float("inf")
        wanted = (fork.int("id0"), fork.int("id1"))
        return [e for e in self.after_save() if e.event == DRBG_SEED_EVENT
                and fork.t <= e.t <= end and (e.int("d0"), e.int("d1")) == wanted]

    def could_see(self, event: str) -> bool:
        """The trace could have recorded `event`: registered, and no hit missed."""
        return event in self.armed and not any(self.missed.values())


def clone_view(name: str, prefix: str, own_log: Path) -> CloneView:
    """A clone's reads (its own log only: after the restore), and its trace, kernel
    log and problems (the original's log up to the save, then its own)."""
    own = read_text(own_log)
    whole_log = own_log.with_name("whole-data.log")
    whole_log.write_text(prefix + own)
    problems: list[str] = []
    tasks, _ = parse_data(prefix + own, str(whole_log), problems)
    try:
        messages = messages_from(tasks)
    except KmsgIncomplete as exc:
        messages = []
        problems.append(f"kernel log: {exc}")
    events: list[TraceEvent] = []
    armed: list[str] = []
    missed: dict[str, int] = {}
    trace = tasks.get("trace")
    if trace is None or trace.rc != 0:
        problems.append("no trace dump (task 'trace' did not finish)")
    else:
        sections = trace.sections()
        armed = armed_events(sections)
        try:
            missed = kprobe_misses(sections)
        except TraceIncomplete as exc:
            problems.append(f"trace: {exc}")
        try:
            events = parse_trace(sections.get("trace", []))
        except TraceIncomplete as exc:
            problems.append(f"trace: {exc}")
    clone = tasks.get(CLONE_TASK)
    if clone is None or clone.rc != 0:
        problems.append(f"task 'clone' did not finish ({own_log})")
    errors = [line for line in own.splitlines() if line.startswith("read:") and "error=" in line]
    problems += errors
    return CloneView(name, own_log, whole_log, parse_reads(own), tasks, messages, events,
                     armed, missed, problems)


@dataclass
class CloneOutcome:
    """Two clones of one saved guest, compared."""
    profile: str
    variant: str
    point: str
    generation_id: bool          # the profile gives the guest a VM generation ID
    driver: bool                 # the kernel has a vmgenid driver (CONFIG_VMGENID)
    folder: Path
    save_uptime: float
    pre_save_rounds: set[int]
    clones: list[CloneView]
    genids: list[Optional[str]]      # the original's, then each clone's (libvirt's)

    @property
    def cpus(self) -> list[int]:
        return sorted({cpu for c in self.clones for _, cpu in c.reads})

    def compared_rounds(self) -> list[int]:
        """Rounds both clones read after their restore (the save came before them)."""
        rounds = [set(r for r, _ in c.reads) - self.pre_save_rounds for c in self.clones]
        return sorted(set.intersection(*rounds)) if rounds else []

    def first_reads(self) -> dict[int, tuple[str, str]]:
        """Per CPU, both clones' first read after the restore."""
        rounds = self.compared_rounds()
        if not rounds:
            return {}
        a, b = self.clones
        return {cpu: (a.reads[(rounds[0], cpu)], b.reads[(rounds[0], cpu)])
                for cpu in self.cpus if (rounds[0], cpu) in a.reads and (rounds[0], cpu) in b.reads}

    def identical(self) -> list[Read]:
        """(round, cpu) pairs both clones read alike after the restore."""
        a, b = self.clones
        return [key for key in sorted(a.reads) if key[0] in self.compared_rounds()
                and b.reads.get(key) == a.reads[key]]

    def shared_blocks(self) -> list[tuple[str, Read, Read]]:
        """Any 16-byte block that both clones read after the restore, wherever."""
        a, b = self.clones
        rounds = set(self.compared_rounds())
        seen = {v: k for k, v in b.reads.items() if k[0] in rounds}
        return [(v, k, seen[v]) for k, v in sorted(a.reads.items())
                if k[0] in rounds and v in seen]

    def verdict(self) -> str:
        """The report's clone-safe cell: yes, no: identical for N reads, no driver;
        '(no ID given)' after it where the profile gave no generation ID (its
        clones are expected to repeat: the negative control, not the hazard); 'not
        judged: WHY' where no round of reads was compared, never 'yes'."""
        problems = [p for c in self.clones for p in c.problems]
        if problems or not self.compared_rounds():
            return "not judged: " + (problems[0] if problems else
                                     "no read of either clone came after the restore")
        shared = self.shared_blocks()
        if self.generation_id and not self.driver:
            return "no driver" if shared else "no driver (diverged by another reseed)"
        said = f"no: identical for {len(shared)} reads" if shared else "yes"
        return said if self.generation_id else f"{said} {NO_ID_GIVEN}"

    def summary(self) -> dict[str, object]:
        return {"profile": self.profile, "variant": self.variant, "point": self.point,
                "generation_id": self.generation_id, "driver": self.driver,
                "save_uptime_s": self.save_uptime, "verdict": self.verdict(),
                "generation_ids": self.genids,
                "compared_rounds": self.compared_rounds(), "identical_reads": len(self.identical()),
                "shared_blocks": len(self.shared_blocks()),
                "clones": {c.name: {"vmforks": len(c.vmforks()), "reseeds": len(c.reseeds()),
                                    "problems": c.problems, "data_log": str(c.whole_log)}
                           for c in self.clones}}

    def explain(self) -> str:
        """Per clone, what the trace saw after the save point: for failure messages."""
        parts = []
        for c in self.clones:
            events = ", ".join(f"{e.event}@{e.t:.3f}s cpu{e.cpu}" for e in c.after_save()) \
                or "nothing traced"
            blind = [e for e in (VMFORK_EVENT, RESEED_PREFIX) if not c.could_see(e)]
            unseen = f" (the trace could not see: {', '.join(blind)})" if blind else ""
            parts.append(f"{c.name}: {events}{unseen}")
        return "; ".join(parts) + f" (logs: {self.folder})"


def run_case(conn: libvirt.virConnect, request: BootRequest, point: str,
             driver: bool) -> CloneOutcome:
    """Boot, save at the save point, restore twice at once, let both clones finish;
    every domain destroyed and the saved image deleted, pass or fail."""
    with SavedGuest(conn, request, kind=f"clone-{point}") as guest:
        save_deadline = READY_CAP_S + SAVE_AT[point] + BOOT_SLACK_S
        guest.wait_for(SAVE_LINE, save_deadline)
        original_genid = genid(guest.dom)
        image = guest.save()
        prefix = read_text(guest.ready.data_log)
        clones, genids = [], [original_genid]
        for suffix in CLONE_SUFFIXES:
            clone = guest.restore_clone(image, suffix)
            genids.append(genid(clone.dom))
            guest.wait_for("@@END kmsg", CLONE_END_S, log=clone.data_log, gone=clone.gone)
            clones.append(clone)
    save_uptime = float(prefix.split(SAVE_LINE, 1)[1].split()[0])
    views = [clone_view(c.name, prefix, c.data_log) for c in clones]
    return CloneOutcome(profile=request.profile.name, variant=request.variant, point=point,
                        generation_id=request.profile.caps.vm_generation_id, driver=driver,
                        folder=guest.ready.outdir, save_uptime=save_uptime,
                        pre_save_rounds={r for r, _ in parse_reads(prefix)}, clones=views,
                        genids=genids)


@dataclass(frozen=True)
class CloneCase:
    request: BootRequest
    point: str
    driver: bool


def run_cases(conn: libvirt.virConnect, cases: dict[str, CloneCase], workers: int,
              done: Optional[Callable[[str, CloneOutcome | BenchError], None]] = None
              ) -> dict[str, CloneOutcome | BenchError]:
    """Several cases at once (their guests mostly wait for an uptime), the late
    ones first; each case's result, or the one-line error that ended it. `done` is
    told of each as it ends. An interruption (Ctrl-C, SIGTERM) stops every wait at
    once, and every case's domains go."""
    def one(key: str) -> CloneOutcome | BenchError:
        case = cases[key]
        result: CloneOutcome | BenchError
        try:
            result = run_case(conn, case.request, case.point, case.driver)
        except BenchError as exc:
            result = exc
        except libvirt.libvirtError as exc:
            result = RestoreFailed(f"clone case {key}: {exc.get_error_message()}")
        if done is not None:
            done(key, result)
        return result

    order = sorted(cases, key=lambda key: cases[key].point != LATE)
    executor = ThreadPoolExecutor(max_workers=max(1, workers))
    try:
        futures = {key: executor.submit(one, key) for key in order}
        return {key: futures[key].result() for key in cases}
    except KeyboardInterrupt:
        INTERRUPTED.set()
        raise
    finally:
        executor.shutdown(wait=True, cancel_futures=True)
