"""Several libvirt hosts: which host a boot runs on, and how many boots each takes.

libvirt is the distributed engine: each host is a libvirt URI, and a boot is one
transient domain on one of them. What the bench adds is a slot per concurrent
boot: `--jobs-per-host N` slots a host, each an exclusive lock on a file
(fcntl.flock) under SLOT_DIR, so that every process that boots guests (make run's
threads, pytest-xdist's workers, two runs side by side) shares the hosts without
more than N boots on one at a time. Of a host's guests one boots at a time (the
host's busy lock, held from the start of a boot until its guest only waits for
the RNG: tasks.SETTLED_STAGES); the others wait beside it. `--jobs-per-host auto`
(make run's default) sizes the slots from the host (auto_jobs). A lock dies with
its holder: a killed run leaves no slot taken.

A host "shares files" with this process when it is this machine's own system
daemon (qemu:///system): it reads the kernel and initramfs where they lie and
writes the serial logs into the run's folder. Any other URI, a remote host or a
second daemon on its own socket, gets the kernel and initramfs uploaded as
storage volumes and its serial ports read through libvirt streams
(benchlib/boot/remote.py).
"""
from __future__ import annotations

import fcntl
import hashlib
import os
import threading
import time
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Optional, TypeVar
from urllib.parse import urlparse

import libvirt

from ..core.errors import BenchError
from .libvirtconn import connect
from .remote import DEFAULT_POOL, find_pool

DEFAULT_URI = "qemu:///system"
# Where the slot locks live: one place for every process on this machine.
SLOT_DIR = Path(os.environ.get("BENCH_SLOT_DIR", "/run/lock/randomness-bench"))
# How often a boot that found every slot taken looks again.
SLOT_POLL_S = 0.2
# How often a held slot looks for boots beside it on the same host.
NEIGHBOUR_POLL_S = 0.5

# `--jobs-per-host auto` (make run's default): the slots of a host from what it has.
# A guest that waits for its RNG costs little (an idle TCG guest in tcg-quiet: 0.2
# of a core, measured with ps over 30 s); one that boots wants a core or two. So a
# host boots one guest at a time (the busy lock, Lease.booting) and keeps up to
# IDLE_GUESTS_PER_CORE waiting guests per core beside it, as its memory allows:
# the waiting guests of a 2-core host take about 0.8 of a core, the booting one
# has the rest.
AUTO = "auto"
IDLE_GUESTS_PER_CORE = 2
# auto on a host reached through uploads and streams: one boot at a time. The
# tests' second daemon (libvirt 9.0), given several streamed boots at once, twice
# stopped accepting connections (its main loop blocked), never with one.
STREAMED_AUTO_WHY = ("auto: one at a time on a host reached through uploads and streams "
                     "(several at once have hung a libvirt 9.0 daemon here)")
# What a guest may take of the host's memory: its 512 MiB, QEMU's own, the page
# cache of its kernel and initramfs (an upper bound, not a measurement).
GUEST_HOST_MIB = 1024


def shares_files(uri: str) -> bool:
    """True for this machine's own privileged QEMU daemon, reached the default way."""
    parsed = urlparse(uri)
    return (parsed.scheme == "qemu" and not parsed.netloc and parsed.path == "/system"
            and not parsed.query)


@dataclass
class Host:
    """One libvirt endpoint and its slots."""
    uri: str
    jobs: int
    conn: libvirt.virConnect
    # The storage pool that receives the uploads where the host does not share files.
    pool: str = DEFAULT_POOL
    # Serialises calls on the connection from make run's threads.
    lock: threading.Lock = field(default_factory=threading.Lock)
    # How `jobs` was chosen: "--jobs-per-host N", or what auto read of the host.
    jobs_why: str = ""

    @property
    def shares_files(self) -> bool:
        return shares_files(self.uri)

    def slot_path(self, slot: int) -> Path:
        return SLOT_DIR / f"{self._digest()}.{slot}.lock"

    def busy_path(self) -> Path:
        """The lock held by the one guest of this host that is booting."""
        return SLOT_DIR / f"{self._digest()}.busy.lock"

    def _digest(self) -> str:
        return hashlib.sha256(self.uri.encode()).hexdigest()[:16]


def auto_jobs(conn: libvirt.virConnect) -> tuple[int, str]:
    """Slots for a host under --jobs-per-host auto, and why, from what libvirt
    says it has (virNodeGetInfo: memory in MiB, active CPUs)."""
    _model, memory_mib, cores = conn.getInfo()[:3]
    return jobs_for(cores, memory_mib)


def local_auto_jobs() -> tuple[int, str]:
    """The same for this machine, without asking libvirt (the dry run's plan)."""
    memory_mib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") >> 20
    return jobs_for(len(os.sched_getaffinity(0)), memory_mib)


def host_jobs(uri: str, jobs_per_host: int | str,
              conn: Optional[libvirt.virConnect] = None) -> tuple[int, str]:
    """A host's slots and why, for the pool and the dry run alike: the number asked
    for; under auto, one on a streamed host, else what the host has (from libvirt
    when connected, else from this machine: the only host that shares its files)."""
    if jobs_per_host != AUTO:
        return int(jobs_per_host), f"--jobs-per-host {jobs_per_host}"
    if not shares_files(uri):
        return 1, STREAMED_AUTO_WHY
    return auto_jobs(conn) if conn is not None else local_auto_jobs()


def jobs_for(cores: int, memory_mib: int) -> tuple[int, str]:
    """One booting guest and IDLE_GUESTS_PER_CORE waiting ones per core, no more
    than the memory holds; and why."""
    by_cores = 1 + IDLE_GUESTS_PER_CORE * cores
    by_memory = max(1, memory_mib // GUEST_HOST_MIB)
    why = (f"auto: {cores} core(s), one guest booting and up to "
           f"{min(by_cores, by_memory) - 1} waiting for their RNG beside it")
    if by_memory < by_cores:
        why += f" ({memory_mib} MiB of memory: {GUEST_HOST_MIB} MiB a guest)"
    return min(by_cores, by_memory), why


# Before a comparison of timings (the throughput phase), the host must have settled
# from what ran before it (the clone check's 30 guests and their saved images): no
# more than QUIET_BUSY_CORES of its cores busy over a QUIET_WINDOW_S window, waited
# for up to QUIET_WAIT_S (then the comparison runs anyway, and says so).
QUIET_BUSY_CORES = 0.25
QUIET_WINDOW_S = 2.0
QUIET_WAIT_S = 90.0


def busy_cores(conn: libvirt.virConnect, window_s: float = QUIET_WINDOW_S) -> float:
    """How many of the host's cores were busy over the window (virNodeGetCPUStats)."""
    def sample() -> dict[str, int]:
        return conn.getCPUStats(libvirt.VIR_NODE_CPU_STATS_ALL_CPUS)
    before = sample()
    time.sleep(window_s)
    after = sample()
    busy = sum(after[k] - before[k] for k in ("kernel", "user"))
    return busy / 1e9 / window_s


def wait_until_quiet(conn: libvirt.virConnect, window_s: float = QUIET_WINDOW_S,
                     wait_s: float = QUIET_WAIT_S) -> tuple[bool, float]:
    """Wait until the host is quiet (or wait_s passed): whether it got quiet, and
    the busy cores last measured."""
    deadline = time.monotonic() + wait_s
    while True:
        busy = busy_cores(conn, window_s)
        if busy <= QUIET_BUSY_CORES or time.monotonic() >= deadline:
            return busy <= QUIET_BUSY_CORES, busy



@dataclass
class Lease:
    """A slot held on a host for one boot. `shared` turns True if another slot
    on the same host was seen held while this one was (at the start, at the end
    and every NEIGHBOUR_POLL_S between): its timing figures were then taken beside
    another guest."""
    host: Host
    slot: int
    shared: bool = False
    # The host's busy lock while this boot holds it (booting() to settled()).
    _busy_fd: Optional[int] = None

    def note_neighbours(self) -> None:
        self.shared = self.shared or _others_held(self.host, self.slot)

    def booting(self, interrupted: Optional[threading.Event] = None,
                paused: bool = False) -> None:
        """Wait until no other guest of this host is booting (any process's), and
        hold the host's busy lock until settled(): the guest's boot then has the
        host's cores to itself but for the waiting guests beside it. A `paused`
        guest (one that waits for the lock for a stage of its own) goes before the
        boots of this process that have not started."""
        def take() -> Optional[int]:
            if paused or not _paused[self.host.uri]:
                return _try_lock(self.host.busy_path())
            return None

        if paused:
            with _paused_lock:
                _paused[self.host.uri] += 1
        try:
            if self._busy_fd is None:
                self._busy_fd = _poll(take, interrupted)
        finally:
            if paused:
                with _paused_lock:
                    _paused[self.host.uri] -= 1

    def settled(self) -> None:
        """The guest only waits now (or is gone): the next one may boot."""
        if self._busy_fd is not None:
            os.close(self._busy_fd)
            self._busy_fd = None


T = TypeVar("T")

# Guests of this process paused until they hold their host's busy lock, per host
# URI: a boot of this process that has not started waits for them (Lease.booting).
_paused: Counter[str] = Counter()
_paused_lock = threading.Lock()


def _poll(take: Callable[[], Optional[T]],
          interrupted: Optional[threading.Event] = None) -> Optional[T]:
    """take() every SLOT_POLL_S until it gives something (None if interrupted)."""
    while True:
        got = take()
        if got is not None or (interrupted is not None and interrupted.is_set()):
            return got
        time.sleep(SLOT_POLL_S)


def _try_lock(path: Path) -> Optional[int]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def _others_held(host: Host, mine: int) -> bool:
    """Whether any other slot of the host is held right now (by anyone)."""
    for slot in range(host.jobs):
        if slot == mine:
            continue
        fd = _try_lock(host.slot_path(slot))
        if fd is None:
            return True
        os.close(fd)
    return False


# A host that does not share our files is reached over a connection that may
# stop answering (a remote host gone, a daemon hung): libvirt's keepalive closes
# it after KEEPALIVE_INTERVAL_S * KEEPALIVE_COUNT seconds of silence, and every
# call blocked on it fails instead of waiting for ever. Keepalive needs libvirt's
# event loop, run in a thread of its own, registered before the connection opens.
KEEPALIVE_INTERVAL_S = 5
KEEPALIVE_COUNT = 3
_event_loop = threading.Lock()
_event_loop_running = False


def _run_event_loop() -> None:
    while True:
        libvirt.virEventRunDefaultImpl()


def start_event_loop() -> None:
    global _event_loop_running
    with _event_loop:
        if _event_loop_running:
            return
        libvirt.virEventRegisterDefaultImpl()
        threading.Thread(target=_run_event_loop, name="libvirt-events", daemon=True).start()
        _event_loop_running = True


def _watch(lease: Lease, stop: threading.Event) -> None:
    """While a boot holds its slot, look for neighbours now and then: a boot that
    starts and ends inside this one's time shares the host too."""
    while not stop.wait(NEIGHBOUR_POLL_S):
        lease.note_neighbours()


class HostPool:
    """The hosts of a run, opened once; `lease()` picks a free slot."""

    def __init__(self, uris: list[str], jobs_per_host: int | str = 1,
                 pool: str = DEFAULT_POOL) -> None:
        if jobs_per_host != AUTO and (not isinstance(jobs_per_host, int) or jobs_per_host < 1):
            raise BenchError(f"--jobs-per-host {jobs_per_host}: must be at least 1, or auto")
        uris = list(dict.fromkeys(uris or [DEFAULT_URI]))   # in order, once each
        self.hosts = []
        if not all(shares_files(uri) for uri in uris):
            start_event_loop()
        for uri in uris:
            conn = connect(uri)
            jobs, why = host_jobs(uri, jobs_per_host, conn)
            self.hosts.append(Host(uri, jobs, conn, pool, jobs_why=why))
            if not shares_files(uri):
                self.hosts[-1].conn.setKeepAlive(KEEPALIVE_INTERVAL_S, KEEPALIVE_COUNT)
                find_pool(self.hosts[-1].conn, pool)    # missing: say so before any boot
        SLOT_DIR.mkdir(parents=True, exist_ok=True)
        self._next = 0

    @property
    def first(self) -> Host:
        return self.hosts[0]

    @property
    def slots(self) -> int:
        return sum(h.jobs for h in self.hosts)

    def close(self) -> None:
        for host in self.hosts:
            host.conn.close()

    @contextmanager
    def lease(self, only: Optional[Host] = None) -> Iterator[Lease]:
        """Hold a free slot for the duration of one boot, waiting for one if all
        are taken. The hosts are tried in turn from where the last lease left
        off, so that boots spread over them; `only` restricts it to one host."""
        def free_slot() -> Optional[tuple[Host, int, int]]:
            order = [only] if only is not None else \
                self.hosts[self._next:] + self.hosts[:self._next]
            for host in order:
                for slot in range(host.jobs):
                    fd = _try_lock(host.slot_path(slot))
                    if fd is not None:
                        return host, slot, fd
            return None

        found = _poll(free_slot)
        assert found is not None        # _poll without an interruption waits for one
        host, slot, fd = found
        self._next = (self.hosts.index(host) + 1) % len(self.hosts)
        lease = Lease(host, slot)
        lease.note_neighbours()
        stop = threading.Event()
        watcher = threading.Thread(target=_watch, args=(lease, stop), daemon=True)
        watcher.start()
        try:
            yield lease
        finally:
            lease.settled()
            stop.set()
            watcher.join()
            lease.note_neighbours()
            os.close(fd)
