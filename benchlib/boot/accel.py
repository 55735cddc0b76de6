"""Which accelerator runs guests here: decided by a probe boot, never by /dev/kvm.

On this project's machines /dev/kvm exists but is a software-only KVM on which a
normal guest prints nothing for minutes; TCG reaches /init in about a second.
"""
from __future__ import annotations

import os
from pathlib import Path

import libvirt

from ..core.errors import BenchError
from . import plan
from .guest import boot
from ..core.kernels import variant_kernel
from ..core.profiles import get_profile

# A usable KVM gets a minimal guest through every stage in a few seconds; TCG
# needs ~3 s. Anything slower than this, in total, is not worth running a matrix on.
KVM_PROBE_DEADLINE_S = 20
PROBE_PROFILE = "tcg-quiet"
# The probe boots a kernel known to boot: a broken --kernel is then reported as a
# broken kernel by its own boots, never as "KVM not usable".
PROBE_VARIANT = "stock"


def resolve_accel(requested: str, conn: libvirt.virConnect, initrd: Path,
                  outdir: Path) -> tuple[str, str]:
    """Return (accel, why) for --accel auto|kvm|tcg."""
    if requested == "tcg":
        return "tcg", "requested with --accel tcg"
    if requested not in ("auto", "kvm"):
        raise BenchError(f"unknown accelerator '{requested}' (use auto, kvm or tcg)")
    usable, why = probe_kvm(conn, variant_kernel(PROBE_VARIANT), initrd, outdir)
    if requested == "kvm" and not usable:
        raise BenchError(f"--accel kvm: KVM is not usable on this host ({why})")
    return ("kvm", why) if usable else ("tcg", why)


def probe_kvm(conn: libvirt.virConnect, kernel: Path, initrd: Path,
              outdir: Path) -> tuple[bool, str]:
    if not os.path.exists("/dev/kvm"):
        return False, "no /dev/kvm"
    request = plan.request(get_profile(PROBE_PROFILE), variant="kvm-probe", kernel=kernel,
                           initrd=initrd, outdir=outdir / "kvm-probe", accel="kvm",
                           tasks=["entropy"], total_deadline_s=KVM_PROBE_DEADLINE_S)
    try:
        boot(conn, request)
    except BenchError as exc:
        return False, f"a KVM probe boot failed: {exc}"
    return True, "a KVM probe boot finished within its deadline"
