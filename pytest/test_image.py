"""An image's first boot: a real Debian 12 userspace (systemd, sshd with first-boot
host keys, systemd-random-seed) booted on the kernel under test, timed from outside
its userspace (benchlib/images/firstboot.py): who waited for randomness, from when, for
how long, through which call, against the RNG's ready milestone and systemd's own
time stamps.

The image is built once from Debian's registry (vm-definitions/images/
debian-12-cloud.toml, benchlib/images/images.py) and cached. The cases boot at once, on
the first test that needs one (benchlib/images/imageboot.py):

  controls  a quiet TCG profile, with the two controls in the image: an early
            blocking getrandom() and a GRND_NONBLOCK loop (fixtures/grcontrol.c)
  first     the image as it ships, same profile, then again with the seed file
            its first boot saved (the second boot)
  virtio    the image as it ships with virtio-rng
  distro    Debian's cloud kernel as shipped, its module tree in the image

The controls judge the observer: a trace that sees the one and not the other can
be believed about sshd and systemd-random-seed. The first-boot figures are checked
against a second observer (systemd's clock), never against themselves.
"""
from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from typing import Callable
from xml.etree import ElementTree as ET

import pytest

from benchlib.report import image_report
from benchlib.images import imageboot, images
from benchlib.boot import plan
from benchlib.core.errors import NeedsKvm
from benchlib.images.firstboot import (CONTROL_BLOCK, CONTROL_NONBLOCK, GRND_NONBLOCK, SEED_COMM,
                                       FirstBoot, blocking_call, seed_fed)
from benchlib.boot.hosts import HostPool
from benchlib.images.imageboot import ImageCase, ImageOutcome
from benchlib.images.images import BadImage
from benchlib.core.paths import REPO, kernel_image
from benchlib.report.pngcheck import drawn
from benchlib.core.profiles import get_profile
from benchlib.core.bootrecord import TaskOutput
from benchlib.checks.trace import TraceIncomplete
from benchlib.core.userkernel import KernelUnderTest

IMAGE = "debian-12-cloud"
QUIET, VIRTIO = "tcg-quiet", "tcg-virtio-rng"
CONTROLS, FIRST, WITH_VIRTIO, DISTRO = "controls", "first", "virtio", "distro"
# Generous bounds (semantics, not timing): a wait that began before the RNG was
# ready ends within this long after the ready milestone; a blocking getrandom()
# call enters its wait within this long.
WAKE_SLACK_S = 1.0
CALL_TO_WAIT_S = 0.5
KEYGEN_UNIT, SEED_UNIT = "ssh-hostkeys-firstboot.service", "systemd-random-seed.service"

Outcomes = Callable[[str], ImageOutcome]


@pytest.fixture(scope="module")
def image_root() -> images.Root:
    try:
        return images.build_root(images.load(IMAGE))
    except BadImage as exc:
        pytest.fail(str(exc), pytrace=False)


def _case(name: str, root: images.Root, under: KernelUnderTest,
          cloud: KernelUnderTest) -> ImageCase:
    kernel = cloud if name == DISTRO else under
    modular = kernel if kernel.modules is not None else None
    return ImageCase(images.load(IMAGE), root,
                     get_profile(VIRTIO if name == WITH_VIRTIO else QUIET),
                     kernel.label, kernel.image, modular, controls=name == CONTROLS,
                     second_boot=name == FIRST)


@pytest.fixture(scope="module")
def image_outcome(host_pool: HostPool, accel: str, run_dir: Path, image_root: images.Root,
                  kernel_under_test: KernelUnderTest, cloud_kernel: KernelUnderTest
                  ) -> Outcomes:
    """image_outcome(case): that case's outcome; the first call boots every case."""
    results: dict[str, ImageOutcome] = {}

    def get(name: str) -> ImageOutcome:
        case = _case(name, image_root, kernel_under_test, cloud_kernel)
        try:
            plan.check(case.profile, accel)
        except NeedsKvm as exc:
            pytest.skip(str(exc))
        if not results:
            cases = {n: _case(n, image_root, kernel_under_test, cloud_kernel)
                     for n in (CONTROLS, FIRST, WITH_VIRTIO, DISTRO)}
            with host_pool.lease(host_pool.first):
                done = imageboot.run_cases(host_pool.first.conn, list(cases.values()),
                                           run_dir, accel)
            results.update({n: done[c.key] for n, c in cases.items()})
        outcome = results[name]
        if outcome.failures:
            pytest.fail(f"{case.key}: " + "; ".join(outcome.failures), pytrace=False)
        return outcome

    return get


def first_of(outcome: ImageOutcome) -> FirstBoot:
    assert outcome.first is not None
    return outcome.first


def describe(boot: FirstBoot) -> str:
    """The boot's blocked tasks and milestones, for messages and -s output."""
    lines = [f"{boot.record.name}: ready ({boot.ready_milestone}) at "
             f"{boot.ready_at if boot.ready_at is None else round(boot.ready_at, 3)} s"]
    lines += [f"  blocked: {w.comm}[{w.pid}] {w.unit or '-'} via {w.via} from "
              f"{w.started:.3f} s for {w.duration(boot.trace_end):.3f} s"
              for w in boot.blocked()] or ["  blocked: nobody"]
    lines += [f"  {name}: {t:.3f} s" for name, t in boot.milestones().items()]
    lines.append(f"  credited before ready: {boot.credited_before_ready()}")
    return "\n".join(lines)


def blocked_seconds(boot: FirstBoot) -> float:
    return sum(w.duration(boot.trace_end) for w in boot.blocked())


# --- The observer: controls ----------------------------------------------------------

def test_image_control_blocking_getrandom_is_reported_blocked(image_outcome: Outcomes) -> None:
    """The early blocking getrandom() waits from its call until the RNG is ready,
    exactly once, and the trace says so through getrandom()."""
    boot = first_of(image_outcome(CONTROLS))
    control = boot.controls.get("block")
    assert control is not None, f"the blocking control reported nothing ({boot.record.data_log})"
    pid = int(control["pid"])
    calls = [c for c in boot.calls_of(pid) if blocking_call(c)]
    assert calls, f"the trace has no getrandom() call of the control (pid {pid}):\n{describe(boot)}"
    assert boot.ready_at is not None and calls[0].t < boot.ready_at, (
        f"the control called at {calls[0].t:.3f} s, after the RNG was ready: it cannot "
        f"show a wait\n{describe(boot)}")
    waits = [w for w in boot.waits if w.pid == pid]
    assert len(waits) == 1, f"the control waited {len(waits)} times:\n{describe(boot)}"
    wait = waits[0]
    assert wait in boot.blocked() and wait.unit == CONTROL_BLOCK and wait.via == "getrandom()"
    assert wait.ended is not None and 0 <= wait.ended - boot.ready_at <= WAKE_SLACK_S, (
        f"the control's wait ended at {wait.ended} s, the RNG was ready at "
        f"{boot.ready_at:.3f} s\n{describe(boot)}")
    assert 0 <= wait.started - calls[0].t <= CALL_TO_WAIT_S


def test_image_control_nonblocking_loop_is_never_blocked(image_outcome: Outcomes) -> None:
    """The GRND_NONBLOCK loop is seen calling while the RNG is not ready (so the
    trace could have seen it wait), and never waiting."""
    boot = first_of(image_outcome(CONTROLS))
    control = boot.controls.get("nonblock")
    assert control is not None, f"the non-blocking control reported nothing ({boot.record.data_log})"
    pid = int(control["pid"])
    calls = boot.calls_of(pid)
    assert boot.ready_at is not None
    early = [c for c in calls if c.t < boot.ready_at]
    assert len(early) >= 2, (f"the trace saw {len(early)} calls of the loop before the RNG "
                             f"was ready: it proves nothing\n{describe(boot)}")
    assert all(c.int("flags") & GRND_NONBLOCK for c in calls)
    assert int(control["eagain"]) >= 1, control
    assert not [w for w in boot.waits if w.pid == pid], describe(boot)
    assert CONTROL_NONBLOCK not in {w.unit for w in boot.blocked()}


def test_image_trace_that_never_armed_is_an_error(image_outcome: Outcomes) -> None:
    """Negative control of the reader: the same boot with one event missing from
    kprobe_events, or one missed hit, is refused (never read as "nobody blocked")."""
    record = first_of(image_outcome(CONTROLS)).record
    trace = record.task("trace")
    unarmed = TaskOutput("trace", trace.rc, [l for l in trace.lines if "kprobes/rngwoke" not in l])
    broken = dataclasses.replace(record, tasks={**record.tasks, "trace": unarmed})
    with pytest.raises(TraceIncomplete, match="rngwoke"):
        imageboot.first_boot(broken)
    missed = [l.replace(" 0", " 3") if l.strip().startswith("rngwait ") else l
              for l in trace.lines]
    broken = dataclasses.replace(record, tasks={**record.tasks,
                                                "trace": TaskOutput("trace", 0, missed)})
    with pytest.raises(TraceIncomplete, match="missed"):
        imageboot.first_boot(broken)


# --- The image as it ships ---------------------------------------------------------

def test_image_first_boot_reaches_sshd_in_order(image_outcome: Outcomes) -> None:
    boot = first_of(image_outcome(FIRST))
    reached = boot.milestones()
    order = ["host keys written", "sshd active", "multi-user.target"]
    assert all(m in reached for m in [*order, "random seed loaded"]), describe(boot)
    assert [reached[m] for m in order] == sorted(reached[m] for m in order), describe(boot)
    assert not boot.failed_units, f"failed units: {boot.failed_units}\n{describe(boot)}"
    assert boot.ready_at is not None, describe(boot)


def test_image_first_boot_blocked_tasks_agree_with_systemd(image_outcome: Outcomes) -> None:
    """Every blocking getrandom() before the RNG was ready enters a wait, and every
    wait of a unit's process lies inside that unit's run as systemd timed it: the
    kernel's trace and systemd's clock, two observers, tell one story."""
    boot = first_of(image_outcome(FIRST))
    print("\n" + describe(boot))
    assert boot.ready_at is not None
    for call in boot.calls:
        if blocking_call(call) and call.t < boot.ready_at:
            assert any(w.pid == call.pid and 0 <= w.started - call.t <= CALL_TO_WAIT_S
                       for w in boot.waits), (
                f"blocking getrandom() of pid {call.pid} at {call.t:.3f} s has no wait\n"
                f"{describe(boot)}")
    for wait in boot.blocked():
        if not wait.unit:
            continue
        unit = boot.units[wait.unit]
        end = wait.ended if wait.ended is not None else boot.trace_end
        assert unit.started is not None and unit.started <= wait.started, (wait, unit)
        finished = unit.exited or unit.active
        assert finished is None or end <= finished + CALL_TO_WAIT_S, (wait, unit)


def test_image_first_boot_on_a_quiet_profile_waits_for_randomness(
        image_outcome: Outcomes) -> None:
    """On a quiet profile the image's own first-boot steps wait for the RNG: who,
    for how long. "Nobody waited" here would be a finding to look at, not a pass."""
    boot = first_of(image_outcome(FIRST))
    blocked = boot.blocked()
    print("\n" + describe(boot))
    assert blocked, f"nobody waited for randomness in a quiet profile:\n{describe(boot)}"
    for unit in (SEED_UNIT, KEYGEN_UNIT):
        waits = boot.blocked_of(unit)
        print(f"{unit}: " + (", ".join(f"{w.duration(boot.trace_end):.3f} s via {w.via}"
                                       for w in waits) or "did not wait"))


def test_image_virtio_rng_shrinks_the_blocked_time(image_outcome: Outcomes) -> None:
    quiet, virtio = first_of(image_outcome(FIRST)), first_of(image_outcome(WITH_VIRTIO))
    print(f"\nquiet:\n{describe(quiet)}\nvirtio-rng:\n{describe(virtio)}")
    assert blocked_seconds(quiet) > 0, f"premise: something waits in {QUIET}\n{describe(quiet)}"
    assert blocked_seconds(virtio) < blocked_seconds(quiet), (
        f"with virtio-rng {blocked_seconds(virtio):.3f} s blocked, without "
        f"{blocked_seconds(quiet):.3f} s")
    assert virtio.credited_before_ready().get("hwrng", 0) > 0 or virtio.ready_at is not None \
        and virtio.ready_at < quiet.ready_at, describe(virtio)


def test_image_second_boot_loads_the_first_boots_seed(image_outcome: Outcomes) -> None:
    """The second boot gets the seed file the first one saved, and systemd-random-seed
    feeds it to the kernel: RNDADDENTROPY if it deems it creditable, else a write of
    at least the seed's size more than the first boot wrote with no seed file.
    Whether it was credited is reported."""
    outcome = image_outcome(FIRST)
    first, second = first_of(outcome), outcome.second
    assert second is not None, "no second boot"
    assert first.seed, f"the first boot saved no seed ({first.record.data_log})"
    assert not first.added_entropy(SEED_COMM)
    assert seed_fed(first, second), (
        f"systemd-random-seed wrote {second.pool_bytes(SEED_COMM)} bytes in the second boot, "
        f"{first.pool_bytes(SEED_COMM)} in the first, for a {len(first.seed)}-byte seed")
    print(f"\nseed: {len(first.seed)} bytes; written {first.pool_bytes(SEED_COMM)} then "
          f"{second.pool_bytes(SEED_COMM)} bytes; credited {second.seed_credit_bits()} bits "
          f"(RNDADDENTROPY: {second.added_entropy(SEED_COMM)})\n"
          f"first:\n{describe(first)}\nsecond:\n{describe(second)}")


def test_image_boots_on_debian_cloud_kernel(image_outcome: Outcomes) -> None:
    """The same image on Debian's cloud kernel as shipped: its modules come in the
    image, systemd reaches sshd, and the trace reads the same way."""
    boot = first_of(image_outcome(DISTRO))
    print("\n" + describe(boot))
    assert "sshd active" in boot.milestones(), describe(boot)
    assert boot.ready_at is not None and not boot.failed_units, describe(boot)
    loaded = [t for _, t in boot.record.messages if "systemd[1]: Inserted module" in t
              or "systemd[1]: Finished modprobe@" in t]
    assert loaded, "no module was loaded from the image's module tree"


# --- A boot that never gets there ----------------------------------------------------

# The LRNG in a quiet profile is ready only after minutes (it has no jitter source):
# an image's first boot on it waits for randomness well past this deadline.
STUCK_VARIANT, STUCK_DEADLINE_S = "lrng", 45


@pytest.mark.benchkernels
def test_image_boot_stuck_before_multi_user_is_collected_at_its_deadline(
        host_pool: HostPool, accel: str, run_dir: Path, image_root: images.Root,
        bench_variant: Callable[[str], str]) -> None:
    """A first boot still short of multi-user.target at the collector's deadline
    (fixtures/image/bench-deadline.service) reports anyway: the jobs still waiting,
    and the task still blocked on randomness, named by its unit."""
    variant = bench_variant(STUCK_VARIANT)
    case = ImageCase(images.load(IMAGE), image_root, get_profile(QUIET), variant,
                     kernel_image(variant), controls=True, collect_by_s=STUCK_DEADLINE_S)
    try:
        plan.check(case.profile, accel)
    except NeedsKvm as exc:
        pytest.skip(str(exc))
    with host_pool.lease(host_pool.first):
        outcome = imageboot.run_cases(host_pool.first.conn, [case], run_dir, accel)[case.key]
    assert not outcome.failures, "; ".join(outcome.failures)
    boot = first_of(outcome)
    assert not boot.reached_target, (
        f"multi-user.target came before the {STUCK_DEADLINE_S} s deadline: this boot "
        f"shows nothing about a stuck one\n{describe(boot)}")
    assert any("multi-user.target" in job for job in boot.pending_jobs), boot.pending_jobs
    assert STUCK_DEADLINE_S <= boot.trace_end, (boot.trace_end, describe(boot))
    still = [w for w in boot.blocked() if w.ended is None]
    assert CONTROL_BLOCK in {w.unit for w in still}, (
        f"the blocking control's wait is not reported open at the deadline\n{describe(boot)}")
    row = image_report.row(outcome)
    assert any("stuck" in f and CONTROL_BLOCK in f for f in row["failures"]), row["failures"]
    text = image_report.text([row], [], {})
    assert "STUCK: multi-user.target not reached" in text and CONTROL_BLOCK in text, text
    print("\n" + text)


# --- Bad input ---------------------------------------------------------------------

def _recipe(tmp_path: Path, **keys: object) -> Path:
    body = "\n".join(f"{k} = {v!r}".replace("'", '"') for k, v in keys.items())
    path = tmp_path / "mine.toml"
    path.write_text(body + "\n")
    return path


def test_image_unknown_name_is_a_one_line_error() -> None:
    with pytest.raises(BadImage, match=r"unknown image 'no-such-image' \(known: debian-12-cloud"):
        images.load("no-such-image")
    done = subprocess.run([sys.executable, "-m", "benchlib.commands.run", "--check-only", "--image",
                           "no-such-image"], cwd=REPO, capture_output=True, text=True,
                          env={"PYTHONPATH": str(REPO)})
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "no-such-image" in done.stderr


def test_image_recipe_with_a_missing_package_caches_no_root(tmp_path: Path) -> None:
    recipe = images.load(str(_recipe(tmp_path, packages=["systemd-sysv", "bench-no-such-pkg"])))
    with pytest.raises(BadImage, match="package 'bench-no-such-pkg' does not exist"):
        images.build_root(recipe, progress=lambda _: None)
    assert images.cached_root(recipe) is None
    assert not list(images.ROOT_CACHE.glob("*.partial-*"))


def test_image_unreachable_registry_is_named(tmp_path: Path) -> None:
    recipe = images.load(str(_recipe(tmp_path, mirror="http://127.0.0.1:9/debian",
                                     packages=["systemd-sysv"])))
    with pytest.raises(BadImage, match=r"registry http://127.0.0.1:9/debian cannot be reached"):
        images.build_root(recipe, progress=lambda _: None)
    assert images.cached_root(recipe) is None


def test_image_kernel_that_cannot_boot_systemd_is_refused(
        kernel_under_test: KernelUnderTest) -> None:
    """A kernel whose config lacks what systemd needs is refused before it boots,
    naming the options (here: stock's config without cgroups and UNIX sockets)."""
    config, _ = imageboot.kernel_config(kernel_under_test.label, kernel_under_test)
    assert config is not None, f"no config known for {kernel_under_test.describe()}"
    lacking = {k: v for k, v in config.items() if k not in ("CONFIG_CGROUPS", "CONFIG_UNIX")}
    kernel = dataclasses.replace(kernel_under_test, config=lacking, config_source="test")
    with pytest.raises(BadImage, match=r"cannot boot systemd: it lacks CONFIG_CGROUPS, CONFIG_UNIX"):
        imageboot.systemd_check(kernel.label, kernel)


# --- The report --------------------------------------------------------------------

def test_image_report_names_every_blocked_task_in_each_format(image_outcome: Outcomes,
                                                              tmp_path: Path) -> None:
    """make run --image's report (benchlib/report/image_report.py) on a real first boot: the
    text (at most WIDTH columns), the JSON, JUnit and HTML with its timeline plots."""
    outcome = image_outcome(FIRST)
    boot = first_of(outcome)
    row = image_report.row(outcome)
    text = image_report.text([row], [], {})
    assert all(len(line) <= image_report.WIDTH for line in text.splitlines()), text
    for wait in boot.blocked():
        assert f"{wait.comm}[{wait.pid}]" in text, text
    for name in boot.milestones():
        assert name in text
    again = json.loads(json.dumps(row))
    assert [b["pid"] for b in again["first"]["blocked"]] == [w.pid for w in boot.blocked()]
    assert again["seed_fed"] is True
    image_report.junit(tmp_path / "junit.xml", [row], [])
    suite = ET.parse(tmp_path / "junit.xml").getroot()
    assert suite.get("tests") == "1" and suite.get("failures") == "0"
    page = image_report.html(tmp_path, [outcome], [row], [], {})
    plots = sorted(tmp_path.glob("timeline-*.png"))
    assert len(plots) == 2 and all(drawn(p) for p in plots), plots
    assert all(p.name in page.read_text() for p in plots)
