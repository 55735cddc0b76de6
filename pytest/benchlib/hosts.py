"""Several libvirt hosts: which host a boot runs on, and how many boots each takes.

libvirt is the distributed engine: each host is a libvirt URI, and a boot is one
transient domain on one of them. What the bench adds is a slot per concurrent
boot: `--jobs-per-host N` slots a host, each an exclusive lock on a file
(fcntl.flock) under SLOT_DIR, so that every process that boots guests (make run's
threads, pytest-xdist's workers, two runs side by side) shares the hosts without
more than N boots on one at a time. A lock dies with its holder: a killed run
leaves no slot taken.

A host "shares files" with this process when it is this machine's own system
daemon (qemu:///system): it reads the kernel and initramfs where they lie and
writes the serial logs into the run's folder. Any other URI, a remote host or a
second daemon on its own socket, gets the kernel and initramfs uploaded as
storage volumes and its serial ports read through libvirt streams
(benchlib/remote.py).
"""
from __future__ import annotations

import fcntl
import hashlib
import os
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Optional
from urllib.parse import urlparse

import libvirt

from .errors import BenchError
from .libvirtconn import connect
from .remote import DEFAULT_POOL, find_pool

DEFAULT_URI = "qemu:///system"
# Where the slot locks live: one place for every process on this machine.
SLOT_DIR = Path(os.environ.get("BENCH_SLOT_DIR", "/run/lock/randomness-bench"))
# How often a boot that found every slot taken looks again.
SLOT_POLL_S = 0.2
# How often a held slot looks for boots beside it on the same host.
NEIGHBOUR_POLL_S = 0.5


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

    @property
    def shares_files(self) -> bool:
        return shares_files(self.uri)

    def slot_path(self, slot: int) -> Path:
        digest = hashlib.sha256(self.uri.encode()).hexdigest()[:16]
        return SLOT_DIR / f"{digest}.{slot}.lock"


@dataclass
class Lease:
    """A slot held on a host for one boot. `shared` turns True if another slot
    on the same host was seen held while this one was (at the start, at the end
    and every NEIGHBOUR_POLL_S between): its timing figures were then taken beside
    another guest."""
    host: Host
    slot: int
    shared: bool = False

    def note_neighbours(self) -> None:
        self.shared = self.shared or _others_held(self.host, self.slot)


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

    def __init__(self, uris: list[str], jobs_per_host: int = 1,
                 pool: str = DEFAULT_POOL) -> None:
        if jobs_per_host < 1:
            raise BenchError(f"--jobs-per-host {jobs_per_host}: must be at least 1")
        uris = list(dict.fromkeys(uris or [DEFAULT_URI]))   # in order, once each
        self.hosts = []
        if not all(shares_files(uri) for uri in uris):
            start_event_loop()
        for uri in uris:
            self.hosts.append(Host(uri, jobs_per_host, connect(uri), pool))
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
        while True:
            order = [only] if only is not None else \
                self.hosts[self._next:] + self.hosts[:self._next]
            for host in order:
                for slot in range(host.jobs):
                    fd = _try_lock(host.slot_path(slot))
                    if fd is None:
                        continue
                    self._next = (self.hosts.index(host) + 1) % len(self.hosts)
                    lease = Lease(host, slot)
                    lease.note_neighbours()
                    stop = threading.Event()
                    watcher = threading.Thread(target=_watch, args=(lease, stop), daemon=True)
                    watcher.start()
                    try:
                        yield lease
                    finally:
                        stop.set()
                        watcher.join()
                        lease.note_neighbours()
                        os.close(fd)
                    return
            time.sleep(SLOT_POLL_S)
