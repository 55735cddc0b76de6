"""An image boot: a recipe's userspace on a kernel in a profile, as a BootRequest.

The request is an ordinary bench boot (guest.boot, a Guest: the same naming, logs, clean-up
and data channel) whose initramfs is the image (benchlib/images/images.py) and whose
trace set is the variant's image set (fixtures/trace-image-*). Its one requested
task is the collector's "firstboot"; the collector then dumps the trace and the
kernel log, as the synthetic init does. A kernel that cannot boot systemd is
refused before anything starts, naming what its config lacks.
"""
from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

import libvirt

from . import images
from ..core import kconfig, variants
from ..boot import plan
from ..boot.stages import INTERRUPTED
from ..core.errors import BenchError
from .firstboot import FIRSTBOOT_TASK, FirstBoot, view
from ..boot.guest import BootRequest, boot, trace_events
from .images import BadImage, Recipe, Root
from ..core.kernels import kernel_version
from ..core.paths import kernel_image
from ..core.profiles import Profile
from ..core.bootrecord import BootRecord
from ..checks.trace import TraceIncomplete
from ..core.userkernel import KernelUnderTest

# How long an image may take from the kernel starting /init to multi-user.target
# and the collector: the LRNG in a quiet profile is ready only after about two
# minutes, and the first boot's key generation waits for it.
IMAGE_CAP_S = 360
# Uptime at which a boot still short of multi-user.target is collected anyway
# (fixtures/image/bench-deadline.service): the collection and power-off take
# 10-30 s under TCG with other boots beside it, so it ends well within the cap.
COLLECT_BY_S = IMAGE_CAP_S - 60
# Image boots at once: each guest has 2 GiB (8 GiB of this 23 GiB host), and under
# TCG they share the host's cores, so each takes longer (a boot alone: about 35 s
# to power-off; three at once on 2 cores: 40-45 s each).
BOOTS_AT_ONCE = 4


def event_names(trace: str) -> list[str]:
    """The event names of a trace set: 'p:rngwait wait_for_random_bytes ...' -> rngwait."""
    return [event.split()[0].split(":", 1)[1] for event in trace_events(trace)]


def kernel_config(variant: str, under_test: Optional[KernelUnderTest]
                  ) -> tuple[Optional[kconfig.Config], str]:
    """A kernel's config and where it was read: a user's as found (benchlib/core/kconfig.py),
    a bench kernel's the one kernel/build.sh kept beside its bzImage."""
    if under_test is not None and (under_test.config is not None or under_test.modules):
        return under_test.config, under_test.config_source
    path = kernel_image(variant).parent / "config"
    return (kconfig.parse(path.read_text()), str(path)) if path.is_file() else (None, str(path))


def systemd_check(variant: str, under_test: Optional[KernelUnderTest]) -> None:
    """BadImage if the kernel's config lacks what systemd needs (images.SYSTEMD_NEEDS;
    a modular kernel's modules come with the image). A kernel whose config is
    unknown is tried as it is."""
    config, source = kernel_config(variant, under_test)
    if config is None:
        return
    modular = under_test is not None and under_test.modules is not None
    missing = images.systemd_missing(config, modular)
    if missing:
        image = under_test.image if under_test is not None else kernel_image(variant)
        release = kernel_version(image).split(" ", 1)[0] or str(image)
        raise BadImage(f"kernel {release} cannot boot systemd: it lacks {', '.join(missing)} "
                       f"(config: {source}; the bench's kernels get them from "
                       "kernel/configs/userspace.config)")


def image_fields(recipe: Recipe, root: Root, variant: str,
                 under_test: Optional[KernelUnderTest] = None,
                 seed: Optional[bytes] = None, controls: bool = False,
                 collect_by_s: int = COLLECT_BY_S) -> dict[str, object]:
    """The BootRequest fields of an image boot (besides profile, kernel, outdir, accel):
    with a first boot's seed file for a second boot; with the controls (fixtures/
    image/bench-control-*.service) for a boot that checks the observer; collected at
    `collect_by_s` of uptime if multi-user.target has not come by then."""
    systemd_check(variant, under_test)
    modules = under_test.modules if under_test is not None else None
    return {
        "initrd": images.initrd(recipe, root, modules, seed, controls),
        "tasks": [FIRSTBOOT_TASK],
        "params": {"collect_by": str(collect_by_s)},
        "trace": variants.load(variant).image_trace,
        "timeout_s": IMAGE_CAP_S,
        "image": recipe.name + ("+seed" if seed is not None else "")
        + ("+controls" if controls else ""),
        "memory_mib": recipe.memory_mib,
        # The image carries the kernel's whole module tree; udev loads the drivers.
        "modules": None,
        "kernel_config": under_test.config if under_test is not None else None,
    }


def first_boot(record: BootRecord) -> FirstBoot:
    """The view of an image boot (TraceIncomplete if its trace could not see all)."""
    return view(record, event_names(variants.load(record.variant).image_trace))


@dataclass(frozen=True)
class ImageCase:
    """One image on one kernel in one profile: its first boot and, if asked, its
    second boot with the seed file the first one saved."""
    recipe: Recipe
    root: Root
    profile: Profile
    variant: str                       # the bench's variant, or a user's kernel's label
    kernel: Path
    under_test: Optional[KernelUnderTest] = None
    controls: bool = False
    second_boot: bool = False
    collect_by_s: int = COLLECT_BY_S

    @property
    def key(self) -> str:
        extra = "+controls" if self.controls else ""
        return f"{self.recipe.name}{extra}/{self.variant}/{self.profile.name}"

    def request(self, outdir: Path, accel: str, seed: Optional[bytes] = None) -> BootRequest:
        return plan.request(self.profile, variant=self.variant, kernel=self.kernel,
                            outdir=outdir, accel=accel,
                           **image_fields(self.recipe, self.root, self.variant,
                                          self.under_test, seed, self.controls,
                                          self.collect_by_s))  # type: ignore[arg-type]


@dataclass
class ImageOutcome:
    """An image case's first boot and, with its saved seed, its second."""
    case: ImageCase
    first: Optional[FirstBoot] = None
    second: Optional[FirstBoot] = None
    failures: list[str] = field(default_factory=list)


def boot_and_view(conn: libvirt.virConnect, request: BootRequest) -> FirstBoot:
    return first_boot(boot(conn, request))


def run_cases(conn: libvirt.virConnect, cases: list[ImageCase], outdir: Path,
              accel: str, workers: int = BOOTS_AT_ONCE,
              done: Optional[Callable[[str, str], None]] = None) -> dict[str, ImageOutcome]:
    """Every case's first boot, several at once; a case that asked for a second boot
    gets it as soon as its first is done. Each outcome holds what failed, one line
    per failure. `done(key, what)` is told of each boot as it ends. An interruption
    stops every boot at once, and their domains go."""
    outcomes = {case.key: ImageOutcome(case) for case in cases}
    executor = ThreadPoolExecutor(max_workers=max(1, workers))
    pending: list[Future[None]] = []
    lock = threading.Lock()

    def one(case: ImageCase, second: bool) -> None:
        outcome = outcomes[case.key]
        which = "second boot" if second else "first boot"
        try:
            seed = seed_of(outcome.first) if second and outcome.first else None
            viewed = boot_and_view(conn, case.request(outdir, accel, seed))
            if second:
                outcome.second = viewed
            else:
                outcome.first = viewed
            said = "ok"
        except (BenchError, TraceIncomplete, KeyError) as exc:
            outcome.failures.append(f"{which}: {exc}")
            said = f"failed: {exc}"
        except (OSError, libvirt.libvirtError) as exc:
            outcome.failures.append(f"{which}: {type(exc).__name__}: {exc}")
            said = f"failed: {exc}"
        if done is not None:
            done(case.key, f"{which}: {said}")
        if not second and case.second_boot and outcome.first is not None:
            with lock:
                pending.append(executor.submit(one, case, True))

    try:
        with lock:
            pending += [executor.submit(one, case, False) for case in cases]
        while True:
            with lock:
                running = [f for f in pending if not f.done()]
            if not running:
                break
            wait(running)
        for future in pending:
            future.result()
        return outcomes
    except KeyboardInterrupt:
        INTERRUPTED.set()
        raise
    finally:
        executor.shutdown(wait=True, cancel_futures=True)


def seed_of(first: FirstBoot) -> bytes:
    if first.seed is None:
        raise BadImage(f"boot {first.record.name}: the first boot saved no seed file "
                       f"({images.GUEST_SEED}); there is nothing to give a second boot")
    return first.seed
