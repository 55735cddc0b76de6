"""Every boot the bench makes starts here: a profile, a kernel, a workload and an
accelerator become a BootRequest, or a Skip that names why this host or this
kernel cannot make that boot.

The kernel is a variant the bench built (`variant`, its bzImage found by
name), an explicit image (`kernel`), or a user's kernel (`under_test`: its
label, image, modules and config; a boot its config lacks options for is a
MissingOptions skip). A profile this host cannot run under the accelerator is a
NeedsKvm skip (benchlib/boot/guest.py's choose_emulator; check() asks only that).
Everything else a boot needs has its default in BootRequest, and the defaults it puts
on the guest's command line in benchlib/core/defaults.py.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from ..core import paths
from ..core.errors import MissingOptions
from .guest import BootRequest, choose_emulator, trace_options
from ..core.kernels import variant_kernel
from ..core.profiles import Profile
from ..core.userkernel import KernelUnderTest

DEFAULT_TASKS = ["probe"]


def check(profile: Profile, accel: str) -> None:
    """NeedsKvm if this host cannot boot `profile` under `accel`: what request()
    would raise, for a caller that decides before it has a kernel or workload
    (a dry run's plan, an image matrix, a test's skip)."""
    choose_emulator(profile, accel)


def request(profile: Profile, *, outdir: Path, variant: Optional[str] = None,
            kernel: Optional[Path] = None, under_test: Optional[KernelUnderTest] = None,
            accel: str = "tcg", initrd: Optional[Path] = None, **fields: Any) -> BootRequest:
    """The request for one boot, or Skip (NeedsKvm, MissingOptions) naming why not.
    fields: any other BootRequest field (tasks, params, trace, timeout_s, ...)."""
    fields.setdefault("emulator", choose_emulator(profile, accel))
    tasks = fields.setdefault("tasks", list(DEFAULT_TASKS))
    if under_test is not None:
        missing = under_test.missing_options(profile.caps, tasks,
                                             trace_options(fields.get("trace")))
        if missing:
            raise MissingOptions(under_test.skip_reason(profile.name, missing))
        variant = variant or under_test.label
        kernel = kernel or under_test.image
        fields.setdefault("modules", under_test.modules)
        fields.setdefault("kernel_config", under_test.config)
    if variant is None:
        raise ValueError("plan.request: a variant, or a user's kernel (under_test)")
    if kernel is None:
        kernel = variant_kernel(variant)
    return BootRequest(profile=profile, variant=variant, kernel=kernel,
                       initrd=initrd or paths.initramfs(), outdir=outdir, accel=accel,
                       **fields)
