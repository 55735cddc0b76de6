"""make run's boots: the cells (profile × variant) and the boots each needs, then the
boots made on the hosts' slots and filed into their cells.

A matrix cell boots its kernel with MATRIX_TASKS and keeps the guest up until the
variant's final milestone or the cap; a throughput cell runs the getrandom()
comparison's tasks (benchlib/report/throughput.py). plan_cell() turns a cell into its
boot requests (plan.request, the one place a request is made) or a skip that
names why; Boots.run() makes them, several at a time, and keeps what the run
needs to know of them: which failed, how long each took (the ETA), whether the
run was interrupted.
"""
from __future__ import annotations

import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from ..checks import measure
from ..boot import plan
from ..report import throughput
from ..core.errors import BenchError, Skip
from .eta import BootKey, Eta
from ..boot.guest import BootRequest, boot, prepare, reap_survivors
from ..boot.hosts import HostPool
from ..core.profiles import Profile, get_profile
from .progress import BootLabel, Progress
from ..core.bootrecord import BootRecord
from ..report.report import Cell
from ..boot.stages import INTERRUPTED
from ..core.userkernel import KernelUnderTest
from ..core.variants import load as load_variant

# The workload of a matrix boot: the probe with a blocking reader, as an early
# boot with one process waiting for randomness would have, then the guest stays
# up, idle, until the variant's final milestone (crng_init 3; crng init done for
# stock) or the cap, with the variant's kprobe trace set armed from boot.
MATRIX_TASKS = ["probe", "until"]
MATRIX_PROBE_FLAGS = "b"
# The first boot of each matrix cell also captures 100,000 interrupt time stamps
# after its final milestone (benchlib/report/entropy.py, about 10 s), for the entropy
# table (benchlib/report/entropy_report.py).
ENTROPY_TASK = "entropy_capture"
# The workloads of the run's boots, as the time estimate tells them apart.
MATRIX = "matrix"
THROUGHPUT = "throughput"   # one at a time (benchlib/report/throughput.py)
CLONES = "clones"           # the clone check's phase (its own batches: benchlib/commands/clones.py)


@dataclass
class Settings:
    """What every cell of a run shares: from the arguments and the accelerator."""
    outdir: Path
    accel: str
    boots: int
    cap_s: float
    timeout_s: float
    entropy: bool
    budget_s: dict[str, float] = field(default_factory=dict)
    users: Optional[KernelUnderTest] = None


@dataclass
class Job:
    """One boot to make: its cell, its number among the cell's boots, its request."""
    cell: Cell
    n: int
    of: int
    request: BootRequest
    workload: str

    @property
    def key(self) -> BootKey:
        return BootKey(self.cell.profile, self.cell.variant, self.workload)

    def label(self, host: Optional[str] = None) -> BootLabel:
        return BootLabel(self.key, self.n, self.of, host)


@dataclass
class BootOutcome:
    """How a boot ended: its record, or the error that ended it; its wall time."""
    record: Optional[BootRecord]
    error: Optional[BenchError]
    seconds: float


Plans = list[tuple[Cell, list[BootRequest]]]


def matrix_params(variant: str, cap_s: float) -> dict[str, str]:
    """The matrix tasks' parameters for a variant: its final milestone, the cap."""
    return {"probe": MATRIX_PROBE_FLAGS, "until": load_variant(variant).until_pattern(),
            "until_cap": f"{cap_s:.0f}"}


def plan_cell(settings: Settings, profile: Profile, variant: str, kernel: Path,
              tasks: list[str], params: dict[str, str], trace: Optional[str],
              say: Progress) -> tuple[Cell, list[BootRequest]]:
    """A cell and the boots it needs (none if it is skipped, saying why). A matrix
    cell (one with the until task) has the cap and its profile's budget, and its
    first boot captures interrupt time stamps unless the run said not to."""
    matrix = "until" in tasks
    cell = Cell(profile.name, variant, cap_s=settings.cap_s if matrix else None,
                budget_s=settings.budget_s.get(profile.name) if matrix else None)
    users = settings.users
    modular = users if users is not None and variant == users.label else None
    requests = []
    try:
        for n in range(1, settings.boots + 1):
            capture = [ENTROPY_TASK] if matrix and n == 1 and settings.entropy else []
            requests.append(plan.request(
                profile, outdir=settings.outdir / "boots", accel=settings.accel,
                tasks=tasks + capture, variant=None if modular else variant,
                kernel=None if modular else kernel, under_test=modular,
                params=params, timeout_s=settings.timeout_s, trace=trace))
    except Skip as exc:
        cell.skipped = str(exc)
        say.message(f"{profile.name} × {variant}: skipped: {exc}")
        return cell, []
    return cell, requests


def plan_matrix(settings: Settings, profiles: list[Profile], kernels: dict[str, Path],
                say: Progress) -> Plans:
    """Every profile × every kernel, in that order."""
    return [plan_cell(settings, profile, variant, kernel, MATRIX_TASKS,
                      matrix_params(variant, settings.cap_s), load_variant(variant).trace, say)
            for profile in profiles for variant, kernel in kernels.items()]


def plan_throughput(settings: Settings, kernels: dict[str, Path], say: Progress) -> Plans:
    """The getrandom() comparison: every kernel booted as often in each measure's
    profile (benchlib/report/throughput.py), its boots of each measure one cell."""
    plans: Plans = []
    for way in throughput.MEASURES:
        here = Settings(**{**vars(settings), "boots": throughput.boots_for(way, settings.boots)})
        plans += [plan_cell(here, get_profile(way.profile), variant, kernel, throughput.TASKS,
                            dict(way.params), None, say)
                  for variant, kernel in kernels.items()]
    return plans


def preview(settings: Settings, profile: Profile, variant: str, kernel: Path,
            say: Progress) -> str:
    """The first matrix boot of a cell as it would start (the dry run's view, as
    virtme-ng's --dry-run shows its QEMU command): the kernel command line and the
    domain XML, rendered in a scratch folder that is removed after."""
    with tempfile.TemporaryDirectory(prefix="bench-dry-run-") as scratch:
        here = Settings(**{**vars(settings), "outdir": Path(scratch), "boots": 1})
        cell, requests = plan_cell(here, profile, variant, kernel, MATRIX_TASKS,
                                   matrix_params(variant, settings.cap_s),
                                   load_variant(variant).trace, say)
        if not requests:
            return f"domain of {profile.name} × {variant}: not shown: {cell.skipped}"
        ready = prepare(None, requests[0])      # type: ignore[arg-type]  # no upload
        xml = ready.xml.replace(scratch, str(settings.outdir))
    return (f"kernel command line of {profile.name} × {variant} (its first boot):\n"
            f"{ready.cmdline}\ndomain XML (libvirt; folders as the run will name them):\n"
            f"{xml}")


def jobs_of(plans: Plans, workload: str) -> list[Job]:
    """The boots of the planned cells, cell after cell."""
    return [Job(cell, n, len(requests), request, workload)
            for cell, requests in plans for n, request in enumerate(requests, 1)]


def in_rounds(jobs: list[Job]) -> list[Job]:
    """The same boots, every cell's first, then every cell's second, ...: a change in
    host load over the run falls on every cell alike. Each round starts one cell
    further on (crng lrng stock, lrng stock crng, stock crng lrng), so that a load
    that drifts within a round (a host still settling) favours no cell: in fixed
    order, the last cell of every round had the quietest host."""
    cells = list(dict.fromkeys(id(job.cell) for job in jobs))
    place = {cell: i for i, cell in enumerate(cells)}
    return sorted(jobs, key=lambda job: (job.n, (place[id(job.cell)] - job.n + 1) % len(cells)))


class Boots:
    """Makes a run's boots on its hosts, telling the progress and the ETA of each;
    `stop` holds why the run stopped early (a signal), once it did."""

    def __init__(self, pool: HostPool, say: Progress, eta: Eta) -> None:
        self.pool = pool
        self.say = say
        self.eta = eta
        self.stop: list[str] = []

    def _host_label(self, uri: Optional[str]) -> Optional[str]:
        return uri if len(self.pool.hosts) > 1 else None

    def _boot(self, job: Job) -> BootOutcome:
        """The boot, once a host's slot is free; its wall time from then."""
        with self.pool.lease() as lease:
            self.say.boot_started(job.label(self._host_label(lease.host.uri)), self.eta)
            started = time.monotonic()
            record, error = None, None
            try:
                record = boot(lease.host.conn, job.request, lease=lease,
                              heartbeat=self.say.message)
            except BenchError as exc:
                error = exc
            return BootOutcome(record, error, time.monotonic() - started)

    @staticmethod
    def _outcome_text(job: Job, outcome: BootOutcome) -> str:
        if outcome.record is None:
            return f"failed: {outcome.error}"
        if job.cell.cap_s is None:
            return "ok"
        return f"final milestone {measure.until_outcome(outcome.record) or '?'}"

    def run(self, jobs: list[Job], at_once: int) -> None:
        """Make the boots, `at_once` at a time (each holding a host's slot while it
        runs, in the order given as slots free up), and add each to its cell: a
        cell's records in the order of its boots. Once the run was interrupted
        (`stop`), no boot starts."""
        if self.stop or not jobs:
            return
        outcomes: dict[int, BootOutcome] = {}
        with ThreadPoolExecutor(max_workers=at_once) as executor:
            futures = {executor.submit(self._boot, job): i for i, job in enumerate(jobs)}
            try:
                for future in as_completed(futures):
                    job = jobs[futures[future]]
                    outcome = outcomes[futures[future]] = future.result()
                    if outcome.error is not None:
                        job.cell.failures.append(str(outcome.error))
                    self.eta.finished(job.key, outcome.seconds)
                    host = outcome.record.host if outcome.record is not None else None
                    self.say.boot_finished(job.label(self._host_label(host)),
                                           self._outcome_text(job, outcome), outcome.seconds,
                                           self.eta)
            except KeyboardInterrupt as exc:
                # The boots in flight stop following their channels, and their
                # domains go: the threads end at once. The boots that finished
                # make the report, marked incomplete.
                INTERRUPTED.set()
                for future in futures:
                    future.cancel()
                reap_survivors(self.pool.hosts)
                workload = jobs[0].workload
                self.stop.append(f"interrupted ({str(exc) or 'SIGINT'}) after "
                                 f"{self.eta.done(workload)} of {self.eta.planned(workload)} "
                                 f"{workload} boots")
        for i, job in enumerate(jobs):
            if i in outcomes and outcomes[i].record is not None:
                job.cell.records.append(outcomes[i].record)
