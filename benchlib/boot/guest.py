"""Every bench guest: render a profile, start a domain, follow it, record it.

`Guest` is the one way in (boot() for an ordinary boot, restore.SavedGuest for a
guest saved and restored). Lifecycle rules: the domain name is unique (profile,
variant, kind, random suffix); the domain is created paused, with autodestroy
unless it is to be saved (it dies with our connection), its channels wired before
it runs; it is destroyed again on leaving the `with` block, pass or fail; its
console and data logs stay in the boot's output folder.
"""
from __future__ import annotations

import faulthandler
import json
import re
import secrets
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

import libvirt

# Lookups of domains that autodestroy already removed are expected: keep libvirt
# from printing them on stderr.
libvirt.registerErrorHandler(lambda _ctx, _err: None, None)

from . import remote
from .channels import Channels, wire
from ..core.defaults import GUEST_PARAMS, PROBE_TIMEOUT_S
from .stages import DONE_STAGE, INTERRUPTED, StageFollower, boot_stages
# The stages from which a guest only waits, and those it runs alone among booting
# guests: benchlib/core/tasks.py says which tasks, and why.
from ..core.tasks import CAPPED, EXCLUSIVE_STAGES, SETTLED_STAGES, cmdline_words
from ..core.errors import BadKernel, BenchError, BootFailed, NeedsKvm, WaitFailed
from .hosts import Host, Lease
from ..core.kernels import check_bzimage
from ..core.modules import MODULES_TASK, ModuleTree, initrd_with_modules
from .kreports import reports
from ..core.paths import DEFAULT_EMULATOR, FIXTURE_DIR, patched_qemu
from .libvirtconn import host_tsc_hz
from ..core.profiles import (Profile, resize_memory, with_quick_cpu_readback, with_spare_vcpus,
                             with_suspend_to_mem, with_tsc_frequency)
from .record import (PACKED_START, KmsgIncomplete, messages_from, parse_console, parse_plain,
                     read_text, unpack_channel)
from ..core.bootrecord import BootRecord

# Always on the guest's command line: the kernel log on ttyS0 until the init takes
# the console down to warnings (the kernel log reaches the host whole from
# /dev/kmsg); /dev/console for init is ttynull, so that no UART is opened (and no
# serial interrupt raised) before the init's first getrandom(); a panic ends the boot (libvirt destroys the domain on reboot), the
# probe's /dev/kmsg markers are not rate-limited away, and a log buffer large
# enough that no record is overwritten before the dump (a lost one is an error).
BASE_CMDLINE = ("console=ttyS0,115200 console=ttynull panic=-1 loglevel=7 "
                "printk.devkmsg=on log_buf_len=4M")
# Beside data.log when the guest sent packed blocks (the trace): the same channel
# with each block's lines in its place, for a person to read.
UNPACKED_LOG = "data.unpacked.log"
# Slack above the probe's own timeout before a task counts as stalled.
TASK_SLACK_S = 60
# Per-CPU trace buffer for a trace set: spills, credits and reseeds fit many times.
TRACE_BUFFER = "4M"
# How often a boot's channels and domain are looked at (following a boot, or
# wait_for() on a log).
FOLLOW_POLL_S = 0.1
# A boot that stays this long in one stage says what it waits for (make run).
HEARTBEAT_S = 30
# Tasks the init always runs last: the kernel log, whole.
CLOSING_TASKS = ["kmsg"]


# How deep trace sets may include each other ("include NAME" lines).
TRACE_INCLUDE_DEPTH = 4


def trace_set_lines(name: str, keyword: str, depth: int = 0) -> list[str]:
    """The `keyword` lines of a trace set (fixtures/trace-NAME), in order: its own,
    and those of the sets its "include NAME" lines name, where they stand."""
    path = FIXTURE_DIR / f"trace-{name}"
    if not path.is_file():
        raise BenchError(f"unknown trace set '{name}': no {path}")
    if depth > TRACE_INCLUDE_DEPTH:
        raise BenchError(f"trace set '{name}': includes nested deeper than "
                         f"{TRACE_INCLUDE_DEPTH} (a loop?)")
    found: list[str] = []
    for line in path.read_text().splitlines():
        word, _, rest = line.partition(" ")
        if word == keyword:
            found.append(rest.strip())
        elif word == "include":
            found += trace_set_lines(rest.strip(), keyword, depth + 1)
    return found


def trace_events(name: str) -> list[str]:
    """The kprobe events of a trace set ("event" lines)."""
    return trace_set_lines(name, "event")


def trace_functions(name: str) -> list[str]:
    """The functions a trace set has the function tracer record from boot
    ("function" lines)."""
    return trace_set_lines(name, "function")


def trace_wakes(name: str) -> list[str]:
    """The task names whose wakes a trace set has the guest trace ("wakes" lines;
    one at most: the init filters on one name)."""
    names = trace_set_lines(name, "wakes")
    if len(names) > 1:
        raise BenchError(f"trace set '{name}': more than one \"wakes\" line ({', '.join(names)})")
    return names


def trace_options(name: Optional[str]) -> list[str]:
    """What a trace set needs of a kernel's config: kprobe events; the function
    tracer for its "function" lines; stack traces (the wakes' trigger) for "wakes"."""
    if not name:
        return []
    return (["CONFIG_KPROBE_EVENTS"]
            + (["CONFIG_FUNCTION_TRACER"] if trace_functions(name) else [])
            + (["CONFIG_STACKTRACE"] if trace_wakes(name) else []))


# A trace set's "@{SYMBOL}" is the address of a kernel data symbol, as a kprobe
# fetch argument (@ADDR) reads it: fetch arguments name data symbols only with
# CONFIG_KALLSYMS_ALL, which the bench's kernels lack; they have no KASLR, so the
# link-time address in the kernel's System.map is where the data is.
SYMBOL_REF = re.compile(r"@\{(\w+)\}")


def system_map(kernel: Path) -> Path:
    """The System.map beside a kernel's bzImage (kernel/build.sh installs it there)."""
    path = kernel.parent / "System.map"
    if not path.is_file():
        raise BenchError(f"no System.map beside {kernel}: a trace set that reads kernel "
                         "data (@{SYMBOL}) needs one (kernel/build.sh installs it; "
                         "`make kernels` rebuilds a kernel built without it)")
    return path


def resolve_symbols(text: str, kernel: Optional[Path]) -> str:
    """`text` with each @{SYMBOL} replaced by @0xADDRESS from the kernel's System.map."""
    wanted = set(SYMBOL_REF.findall(text))
    if not wanted:
        return text
    if kernel is None:
        raise BenchError(f"a trace set reads kernel data ({', '.join(sorted(wanted))}): "
                         "it needs the kernel it is for")
    path = system_map(kernel)
    found = {fields[2]: fields[0] for fields in map(str.split, path.read_text().splitlines())
             if len(fields) >= 3 and fields[2] in wanted}
    missing = sorted(wanted - set(found))
    if missing:
        raise BenchError(f"{path}: no symbol {', '.join(missing)} (asked for by a trace set)")
    return SYMBOL_REF.sub(lambda m: f"@0x{found[m.group(1)]}", text)


def trace_cmdline(name: str, kernel: Optional[Path] = None) -> str:
    """kprobe_event= for a trace set (fixtures/trace-NAME): armed at fs_initcall,
    before any user space runs; comma-separated fields, ';' between events. A set
    with "function" lines also starts the function tracer, filtered to those
    functions, in start_kernel (early_trace_init), before the first interrupt: it
    records their calls (CPU and time, no arguments) where no kprobe exists yet.
    A "wakes COMM" line has the init trace those tasks' wakes (bench.wakes).
    An event's @{SYMBOL} is read from the System.map beside `kernel`."""
    probes = resolve_symbols(";".join(e.replace(" ", ",") for e in trace_events(name)), kernel)
    functions = trace_functions(name)
    # The global trace clock is printk's (local_clock()), so trace time stamps and
    # kernel log times can be compared. The ring buffer stays one page per CPU
    # until something expands it: naming the boot tracer (nop, the default one,
    # or function) makes it trace_buf_size from the start.
    tracer = (f"ftrace=function ftrace_filter={','.join(functions)}" if functions
              else "ftrace=nop")
    # A "wakes COMM" line: the init traces the wakes of the tasks named COMM, each
    # with the waker's stack (sched_waking, filtered in the guest: fixtures/init).
    wakes = "".join(f" bench.wakes={comm}" for comm in trace_wakes(name))
    return (f"kprobe_event={probes} "
            f"{tracer} trace_buf_size={TRACE_BUFFER} trace_clock=global bench.trace={name}"
            f"{wakes}")


@dataclass
class BootRequest:
    profile: Profile
    variant: str
    kernel: Path
    initrd: Path
    outdir: Path
    accel: str = "tcg"                      # "tcg" or "kvm"
    tasks: list[str] = field(default_factory=lambda: ["probe"])
    params: dict[str, str] = field(default_factory=dict)   # bench.* parameters
    extra_cmdline: str = ""
    emulator: Optional[Path] = None         # None: choose_emulator() decides (plan.request does)
    timeout_s: float = PROBE_TIMEOUT_S      # the probe's own limit (bench.timeout)
    stage_deadline_s: Optional[float] = None  # cap on every stage's deadline
    total_deadline_s: Optional[float] = None  # cap on the whole boot
    trace: Optional[str] = None             # a kprobe trace set, dumped as task "trace"
    # A WARN, BUG, lockdep, KASAN... report in the kernel log fails the boot (a test
    # that judges the reports itself turns this off).
    fail_on_reports: bool = True
    # A modular kernel's module tree and config: the profile's drivers are packed
    # into an initramfs segment of this boot's own (benchlib/core/modules.py).
    modules: Optional[ModuleTree] = None
    kernel_config: Optional[dict[str, str]] = None
    # An image boot (benchlib/images/imageboot.py): initrd is a whole userspace whose
    # collector prints the init marker once multi-user.target is reached, within
    # timeout_s; the guest gets memory_mib instead of the profile's memory.
    image: Optional[str] = None
    memory_mib: Optional[int] = None
    # Empty vCPU slots beside the profile's vCPUs, for a vCPU the host plugs in
    # while the guest runs (profiles.with_spare_vcpus).
    spare_vcpus: int = 0
    # The guest may suspend to RAM (ACPI S3) and wait for the host to wake it
    # (profiles.with_suspend_to_mem; the resume test).
    suspend_to_mem: bool = False

    def cmdline(self, with_modules: bool = False) -> str:
        # Every cap a task of this boot obeys is given, and the closing tasks in
        # their order, so the init's fallbacks never decide.
        caps = {param: f"{GUEST_PARAMS[param]:g}" for task, param in CAPPED.items()
                if task in self.tasks}
        bench = {"tasks": ",".join(self.tasks), "variant": self.variant,
                 "timeout": f"{self.timeout_s:.0f}", **caps,
                 "closing": ",".join(self.closing_tasks(with_modules)), **self.params}
        words = [BASE_CMDLINE] + [f"bench.{k}={v}" for k, v in bench.items()]
        if self.trace:
            words.append(trace_cmdline(self.trace, self.kernel))
        words += cmdline_words(self.tasks)
        if self.extra_cmdline:
            words.append(self.extra_cmdline)
        return " ".join(words)

    def closing_tasks(self, with_modules: bool = False) -> list[str]:
        """What the init runs after the requested tasks, in order (bench.closing):
        the trace dump if a trace set is armed, the modules' report if the
        initramfs carries modules, the kernel log, whole."""
        return (["trace"] if self.trace and "trace" not in self.tasks else []) \
            + ([MODULES_TASK] if with_modules else []) + CLOSING_TASKS

    def stage_tasks(self, with_modules: bool = False) -> list[str]:
        """Every task the init runs, in order: the requested ones, then the closing."""
        return self.tasks + self.closing_tasks(with_modules)

    def task_deadlines(self) -> dict[str, float]:
        """Tasks that may legitimately take longer than the probe's limit."""
        return {task: float(self.params.get(param, GUEST_PARAMS[param])) + TASK_SLACK_S
                for task, param in CAPPED.items()}


def domain_type(accel: str) -> str:
    return {"tcg": "qemu", "kvm": "kvm"}[accel]


def choose_emulator(profile: Profile, accel: str) -> Path:
    """The QEMU a profile runs on here, or NeedsKvm saying why it cannot run.

    Hyper-V profiles need SynIC and VP_INDEX: Debian's QEMU has them only under
    KVM; under TCG they come from our patched QEMU (qemu/build.sh)."""
    if profile.requires == "any" or accel == "kvm":
        return DEFAULT_EMULATOR
    if profile.requires == "hyperv":
        if patched_qemu().is_file():
            return patched_qemu()
        raise NeedsKvm(f"profile '{profile.name}' needs Hyper-V SynIC: KVM is not usable here "
                       f"and the patched QEMU '{patched_qemu()}' is not built (make qemu)")
    if profile.requires == "kvm":
        raise NeedsKvm(f"profile '{profile.name}' needs KVM (<bench:requires>kvm</bench:"
                       f"requires>), and guests run under {accel.upper()} on this host")
    raise NeedsKvm(f"profile '{profile.name}' needs '{profile.requires}', which this host "
                   f"({accel.upper()}) does not provide")


# Every domain this process created, in order: a finalizer checks none survives.
CREATED: list[str] = []
DOMAIN_PREFIX = "bench-"


def _interrupt(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(f"{signal.Signals(signum).name}")


def install_signal_handlers() -> None:
    """SIGINT, SIGTERM and SIGHUP end a run with KeyboardInterrupt, so that every
    boot's `finally` destroys its domain and keeps its logs. SIGINT is set too:
    a process started in the background by a non-interactive shell (a CI job
    run with `&`) inherits it ignored, and Python then leaves it ignored, so
    that `kill -INT` would not stop the run at all. SIGUSR1 prints every
    thread's stack to stderr and lets the run go on: a run that seems stuck says
    where it is."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _interrupt)
    faulthandler.register(signal.SIGUSR1, all_threads=True)


def running_bench_domains(conn: libvirt.virConnect) -> list[str]:
    """Names of every bench domain libvirt knows, this run's or a killed run's."""
    return sorted(d.name() for d in conn.listAllDomains() if d.name().startswith(DOMAIN_PREFIX))


def surviving(conn: libvirt.virConnect) -> list[str]:
    """Domains this process created that still exist: a leak."""
    alive = set(running_bench_domains(conn))
    return [name for name in CREATED if name in alive]


def reap(conn: libvirt.virConnect, names: list[str]) -> None:
    for name in names:
        destroy_if_running(conn, name)
        try:
            conn.lookupByName(name).undefine()
        except libvirt.libvirtError:
            pass        # transient: gone with destroy


def clear_stale(hosts: list[Host], destroy: bool) -> list[str]:
    """Bench domains of another run on each host: destroyed if `destroy`, else
    named; one line per host that has any, to print."""
    lines = []
    for host in hosts:
        stale = running_bench_domains(host.conn)
        if stale and destroy:
            reap(host.conn, stale)
            lines.append(f"destroyed {len(stale)} stale domain(s) on {host.uri}: "
                         f"{' '.join(stale)}")
        elif stale:
            lines.append(f"{len(stale)} bench domain(s) from another run are running on "
                         f"{host.uri} ({' '.join(stale)}); destroy them with --reap")
    return lines


def reap_survivors(hosts: list[Host]) -> list[str]:
    """Destroy the domains this process created that still exist on any host;
    return their names (a leak, unless a run was interrupted)."""
    leaked = []
    for host in hosts:
        found = surviving(host.conn)
        reap(host.conn, found)
        leaked += found
    return leaked


def destroy_if_running(conn: libvirt.virConnect, name: str) -> None:
    try:
        dom = conn.lookupByName(name)
    except libvirt.libvirtError:
        return  # already gone: autodestroy did it
    try:
        dom.destroy()
    except libvirt.libvirtError:
        pass


@dataclass
class Prepared:
    """A boot made ready to start: its unique name, its folder, its rendered domain."""
    name: str
    outdir: Path
    kernel: Path
    cmdline: str
    xml: str
    console_log: Path
    data_log: Path
    with_modules: bool


def prepare(conn: libvirt.virConnect, request: BootRequest, streamed: bool = False,
            lease: Optional[Lease] = None, kind: str = "", append: bool = False) -> Prepared:
    """Everything before a domain starts, for every kind of boot: the emulator, the
    checked kernel, a unique name (profile, variant, `kind`, random suffix), the
    boot's folder, the initramfs with the kernel's modules, uploads to a host that
    does not share our files, the rendered domain XML (kept as domain.xml)."""
    emulator = request.emulator or choose_emulator(request.profile, request.accel)
    kernel = check_bzimage(request.kernel)
    if not request.initrd.is_file():
        raise BadKernel(f"initramfs '{request.initrd}' does not exist: run 'make fixtures'")
    words = [request.profile.name, request.variant, kind, secrets.token_hex(4)]
    name = DOMAIN_PREFIX + "-".join(w for w in words if w)
    outdir = request.outdir / name
    outdir.mkdir(parents=True, exist_ok=True)
    console_log, data_log = outdir / "console.log", outdir / "data.log"
    initrd = request.initrd.resolve()
    if request.modules is not None:
        initrd = initrd_with_modules(initrd, request.modules, request.profile.caps,
                                     request.profile.name, outdir / "initrd-with-modules.img",
                                     request.kernel_config)
    with_modules = initrd != request.initrd.resolve()
    cmdline = request.cmdline(with_modules)
    host_kernel, host_initrd = str(kernel), str(initrd)
    if streamed:
        assert lease is not None
        with lease.host.lock:
            host_kernel = remote.upload(conn, lease.host.pool, kernel, "kernel")
            host_initrd = remote.upload(conn, lease.host.pool, initrd, "initrd")
    xml = request.profile.render(
        name=name, domain_type=domain_type(request.accel), emulator=str(emulator),
        kernel=host_kernel, initrd=host_initrd, cmdline=cmdline,
        console_log=str(console_log), data_log=str(data_log))
    if request.memory_mib is not None:
        xml = resize_memory(xml, request.memory_mib)
    if request.spare_vcpus:
        xml = with_spare_vcpus(xml, request.spare_vcpus)
    if request.suspend_to_mem:
        xml = with_suspend_to_mem(xml)
    # Under TCG the guest's TSC is the host's cycle counter: a fixed TSC rate in the
    # profile is the host's own, which libvirt then accepts (it refuses a rate
    # more than 250 ppm from the host's, unless the host CPU scales its TSC).
    host_hz = host_tsc_hz(conn) if conn is not None and request.accel == "tcg" else None
    if host_hz is not None:
        xml = with_tsc_frequency(xml, host_hz)
    xml = with_quick_cpu_readback(xml)
    xml = wire(xml, console_log, data_log, request.profile.name, streamed, append)
    (outdir / "domain.xml").write_text(xml)
    return Prepared(name, outdir, kernel, cmdline, xml, console_log, data_log, with_modules)


class Guest:
    """`with Guest(conn, request) as guest:` one bench guest, from its request to its
    end: every bench guest is one (boot() below, restore.SavedGuest). Entering
    prepares the boot (prepare()) and starts the domain (start()); inside, `dom` is
    the running domain (to save, restore or clone), `follow()` follows its stages;
    leaving destroys every domain it created (`domains`: a restore adds its own),
    pass or fail, and closes the channels after reading what the guest wrote last.
    `verdict()` then judges the boot and writes record.json.

    With a lease (benchlib/boot/hosts.py), the guest runs on the lease's host, and on a
    host that does not share our files through uploads and streams (remote.py,
    channels.py). A saveable guest has no autodestroy (libvirt refuses to save such
    a domain) and channel files that a restored QEMU appends to."""

    # What wait_for() raises (restore.SavedGuest: RestoreFailed).
    WAIT_FAILED: type[BenchError] = WaitFailed

    def __init__(self, conn: libvirt.virConnect, request: BootRequest,
                 lease: Optional[Lease] = None, kind: str = "", saveable: bool = False) -> None:
        self.conn = lease.host.conn if lease is not None else conn
        self.request = request
        self.lease = lease
        self.kind = kind
        self.saveable = saveable
        self.streamed = lease is not None and not lease.host.shares_files
        self.domains: list[str] = []
        self.error: Optional[BenchError] = None
        self._ready: Optional[Prepared] = None
        self._dom: Optional[libvirt.virDomain] = None
        self._record: Optional[BootRecord] = None
        self._follower: Optional[StageFollower] = None
        self._channels: Optional[Channels] = None
        self._followed = False
        self._start_failed = False

    @property
    def ready(self) -> Prepared:
        assert self._ready is not None, "Guest used before its with block"
        return self._ready

    @property
    def prepared(self) -> bool:
        """Whether the boot got as far as its record (prepare() succeeded)."""
        return self._record is not None

    @property
    def dom(self) -> libvirt.virDomain:
        assert self._dom is not None, "Guest's domain used before it started"
        return self._dom

    @dom.setter
    def dom(self, dom: libvirt.virDomain) -> None:
        self._dom = dom

    @property
    def record(self) -> BootRecord:
        assert self._record is not None, "Guest used before its with block"
        return self._record

    def __enter__(self) -> "Guest":
        request, lease = self.request, self.lease
        # A restored QEMU reopens a saveable guest's channel files: append to them.
        ready = prepare(self.conn, request, self.streamed, lease, self.kind,
                        append=self.saveable)
        self._ready = ready
        self._record = BootRecord(
            name=ready.name, profile=request.profile.name, variant=request.variant,
            kernel=str(ready.kernel), accel=request.accel, cmdline=ready.cmdline,
            console_log=ready.console_log, data_log=ready.data_log, host=self.conn.getURI())
        stages = boot_stages(request.stage_tasks(ready.with_modules),
                             request.timeout_s + TASK_SLACK_S, cap_s=request.stage_deadline_s,
                             deadlines=request.task_deadlines(),
                             userspace_s=request.timeout_s if request.image else None)
        self._follower = StageFollower(ready.name, stages, str(ready.console_log),
                                       total_s=request.total_deadline_s)
        self._channels = Channels(ready.console_log, ready.data_log)
        if lease is not None:
            lease.booting(INTERRUPTED)      # the stage clock starts once this guest may boot
        if INTERRUPTED.is_set():
            # The run stopped while this guest waited for its turn: it never starts.
            self._start_failed = True
            self.__exit__(None, None, None)
            raise BootFailed(f"guest {ready.name}: the run was interrupted before it started",
                             "starting", str(ready.console_log))
        self.record.host_slot = lease.slot if lease is not None else None
        self.record.started_at = time.time()
        self.domains.append(ready.name)
        try:
            self._dom = start(self.conn, ready, self._channels if self.streamed else None,
                              autodestroy=not self.saveable)
        except BenchError:
            self._start_failed = True
            self.__exit__(None, None, None)
            raise
        return self

    def follow(self, heartbeat: Optional[Callable[[str], None]] = None) -> None:
        """Follow the boot's stages to its end (see follow()); BenchError with the
        stage reached when it fails. heartbeat: told what a boot long in one stage
        waits for."""
        assert self._follower is not None and self._channels is not None
        self._followed = True
        turns = HostTurns(self.lease, self._follower) if self.lease is not None else None
        if turns is not None:
            turns.dom = self.dom
        follow(self.dom, self._channels, self._follower, heartbeat, turns)

    def wait_for(self, text: str, deadline_s: float, log: Optional[Path] = None,
                 gone: Optional[Callable[[], bool]] = None) -> None:
        """Wait until `text` is in the data log (this guest's, or `log`, with `gone`
        telling when its domain ended), while the guest runs, to act on it in the
        middle of its boot; WAIT_FAILED naming what was awaited if the deadline
        passes, the domain ends or the run is interrupted first."""
        log = log or self.ready.data_log
        is_gone = gone or self.gone
        deadline = time.monotonic() + deadline_s
        while text not in read_text(log):
            if INTERRUPTED.is_set():
                raise self.WAIT_FAILED(f"{log.parent.name}: interrupted while waiting for "
                                       f"'{text}'")
            if is_gone():
                if text in read_text(log):
                    return
                raise self.WAIT_FAILED(f"{log.parent.name}: the guest ended before '{text}' "
                                       f"appeared in {log}")
            if time.monotonic() > deadline:
                raise self.WAIT_FAILED(f"{log.parent.name}: no '{text}' in {log} within "
                                       f"{deadline_s:.0f} s")
            time.sleep(FOLLOW_POLL_S)

    def gone(self) -> bool:
        """Whether the guest's domain has ended (or never started)."""
        try:
            return self._dom is None or not self._dom.isActive()
        except libvirt.libvirtError:
            return True

    def __exit__(self, exc_type: object, exc: object, _tb: object) -> None:
        if isinstance(exc, BenchError):
            self.error = exc
        if self.lease is not None:
            self.lease.settled()
        for name in self.domains:
            destroy_if_running(self.conn, name)
        if self._channels is not None:
            # What the guest wrote last, for the logs, when a followed boot ended
            # early or the with block failed (a guest nobody followed is not waited on).
            unfinished = (self._followed and self._follower is not None
                          and not self._follower.finished)
            if exc is not None or unfinished or self._start_failed:
                self._channels.drain()
            self._channels.close()
            self._channels = None
        if self._record is not None:
            self._record.ended_at = time.time()
        if self.lease is not None:
            self.lease.note_neighbours()
            self.record.shared_host = self.lease.shared

    def verdict(self) -> BootRecord:
        """After the with block: the boot's data parsed into its record (kept as
        record.json) and the verdict: the record, or the first error (the stages',
        then a kernel log not whole, modules not loaded, a kernel report) raised."""
        assert self._follower is not None
        record = self.record
        record.stages = self._follower.reached
        error = _judge(record, self.request, self.ready, self._follower.stage, self.error)
        (self.ready.outdir / "record.json").write_text(_json(record))
        if error is not None:
            raise error
        return record


def boot(conn: libvirt.virConnect, request: BootRequest, lease: Optional[Lease] = None,
         heartbeat: Optional[Callable[[str], None]] = None,
         meanwhile: Optional[Callable[["Guest"], None]] = None) -> BootRecord:
    """Boot once, return the record; raise BenchError (with the stage reached) on failure.
    heartbeat: told what a boot long in one stage waits for (see follow); meanwhile:
    what the host does to the running guest before following it to its end (it
    waits for the guest's own lines with guest.wait_for)."""
    guest = Guest(conn, request, lease)
    try:
        with guest:
            if meanwhile is not None:
                meanwhile(guest)
            guest.follow(heartbeat)
    except BenchError as exc:
        guest.error = exc
        if not guest.prepared:      # it failed before it had a record (a bad kernel...)
            raise
    return guest.verdict()


class HostTurns:
    """When a guest may use its host's cores beside others (hosts.Lease.booting):
    it boots holding the busy lock, lets it go once it only waits (a SETTLED_STAGES
    stage reached, or passed within one read of the channels), and takes it again, paused
    meanwhile, for an EXCLUSIVE_STAGES stage. Called with each stage reached."""

    def __init__(self, lease: Lease, follower: StageFollower) -> None:
        self.lease = lease
        self.follower = follower
        self.dom: Optional[libvirt.virDomain] = None     # once started
        self.settled = False
        self.exclusive = False

    def __call__(self, stage: str) -> None:
        if not self.settled and any(s in self.follower.reached for s in SETTLED_STAGES):
            self.lease.settled()
            self.settled = True
        if self.exclusive and stage not in EXCLUSIVE_STAGES:
            self.lease.settled()
            self.exclusive = False
        if (stage in EXCLUSIVE_STAGES and self.settled and not self.exclusive
                and self.lease.host.jobs > 1 and self.dom is not None):
            try:
                self.dom.suspend()
                try:
                    self.lease.booting(INTERRUPTED, paused=True)
                finally:
                    self.dom.resume()
            except libvirt.libvirtError:
                return          # gone: the follower says so
            self.exclusive = True


def start(conn: libvirt.virConnect, ready: Prepared, streams: Optional[Channels] = None,
          autodestroy: bool = True) -> libvirt.virDomain:
    """Create the domain paused (destroyed with our connection, should this process
    die, unless it is to be saved: libvirt refuses to save such a domain), wire
    its channels' streams if it runs on another host, then let it run: its
    channels hold its output from the first byte. Every bench guest starts here."""
    CREATED.append(ready.name)
    flags = libvirt.VIR_DOMAIN_START_PAUSED
    if autodestroy:
        flags |= libvirt.VIR_DOMAIN_START_AUTODESTROY
    try:
        dom = conn.createXML(ready.xml, flags)
        if streams is not None:
            streams.stream_from(conn, dom)
        dom.resume()
    except libvirt.libvirtError as exc:
        raise BootFailed(f"guest {ready.name}: {exc.get_error_message()}", "starting",
                         str(ready.console_log)) from None
    return dom


def follow(dom: libvirt.virDomain, channels: Channels, follower: StageFollower,
           heartbeat: Optional[Callable[[str], None]] = None,
           on_stage: Optional[Callable[[str], None]] = None) -> None:
    """Feed the follower the channels' text until every stage is reached (the
    domain gone) or it fails; BootFailed when the run is interrupted. heartbeat,
    if given, hears what the boot waits for every HEARTBEAT_S of one stage;
    on_stage, each stage as it is reached."""
    beat = time.monotonic()
    last_stage = follower.stage
    while not follower.step():
        if follower.stage != last_stage:
            last_stage, beat = follower.stage, time.monotonic()
            if on_stage is not None:
                on_stage(last_stage)
        elif heartbeat is not None and time.monotonic() - beat >= HEARTBEAT_S:
            beat = time.monotonic()
            heartbeat(follower.waiting())
        if INTERRUPTED.is_set():
            raise BootFailed(f"guest {follower.name}: the run was interrupted",
                             follower.stage, follower.console_log)
        time.sleep(FOLLOW_POLL_S)
        gone = not _active(dom)
        if gone and follower.stage != DONE_STAGE:
            channels.drain()    # it ended before its data were whole: wait for them
        follower.console(channels.console.read())
        follower.data(channels.data.read())
        if gone:
            follower.guest_gone()


def _active(dom: libvirt.virDomain) -> bool:
    try:
        return bool(dom.isActive())
    except libvirt.libvirtError:
        return False        # gone: autodestroy or on_poweroff removed it


def _judge(record: BootRecord, request: BootRequest, ready: Prepared, stage: str,
           error: Optional[BenchError]) -> Optional[BenchError]:
    """The boot's data parsed into the record, and the verdict: the first error
    (the stages', then a kernel log not whole, modules not loaded, a kernel report)."""
    name, data_log, console_log = ready.name, ready.data_log, str(ready.console_log)
    text = read_text(data_log)
    corrupt: list[str] = []         # a packed block that did not decode fails the boot
    unpacked = unpack_channel(text, str(data_log), corrupt)
    record.tasks, record.probe = parse_plain(unpacked)
    if PACKED_START in text:        # the log as a person reads it: blocks unpacked
        (ready.outdir / UNPACKED_LOG).write_text(unpacked)
    if corrupt and error is None:
        error = BootFailed(f"guest {name}: {corrupt[0]}", stage, console_log)
    try:
        record.messages = messages_from(record.tasks)
    except KmsgIncomplete as exc:
        if error is None:
            error = BootFailed(f"guest {name}: {exc} (data log: {data_log})", stage, console_log)
        # A failed boot: what the console caught is better than nothing to read.
        record.messages = parse_console(read_text(ready.console_log))
    if error is None and ready.with_modules:
        loaded = record.tasks.get(MODULES_TASK)
        if loaded is None or loaded.rc != 0:
            failed = [line for line in (loaded.lines if loaded else []) if line.startswith("failed")]
            error = BootFailed(f"guest {name}: the modules of {request.modules.path} did not all "
                               f"load: {'; '.join(failed) or 'no report'} (data log: {data_log})",
                               stage, console_log)
    if error is None and request.fail_on_reports:
        found = reports(record.messages)
        if found:
            more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
            error = BootFailed(f"guest {name}: the kernel reported '{found[0]}'{more} "
                               f"(data log: {data_log})", stage, console_log)
    return error


def _json(record: BootRecord) -> str:
    return json.dumps(record.summary(), indent=2, sort_keys=True)
