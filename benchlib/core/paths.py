"""Where the repository keeps things, and where builds and results go."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

REPO = Path(__file__).resolve().parents[2]
PROFILE_DIR = REPO / "vm-definitions"
KERNEL_DIR = REPO / "kernel"
FIXTURE_DIR = REPO / "fixtures"
BUILD_DIR = Path(os.environ.get("BUILD_DIR", REPO / "build"))
RESULTS_DIR = Path(os.environ.get("RESULTS_DIR", REPO / "results"))
DEFAULT_EMULATOR = Path("/usr/bin/qemu-system-x86_64")


def kernel_image(variant: str) -> Path:
    """The bzImage kernel/build.sh produces for a variant."""
    return BUILD_DIR / "kernel" / variant / "bzImage"


def patched_qemu() -> Path:
    """QEMU 7.2 with qemu/patches (Hyper-V SynIC and VMBus under TCG), by qemu/build.sh."""
    return BUILD_DIR / "qemu" / "qemu-system-x86_64"


QEMU_SERIES = REPO / "qemu" / "patches" / "series"


def qemu_source() -> Optional[Path]:
    """The QEMU source tree qemu/build.sh unpacked and patched ($BUILD_DIR/qemu/src/
    qemu-VERSION), or None before a build."""
    trees = sorted(p for p in (BUILD_DIR / "qemu" / "src").glob("qemu-*") if p.is_dir())
    return trees[-1] if trees else None


def initramfs() -> Path:
    """The initramfs fixtures/Makefile produces."""
    return BUILD_DIR / "fixtures" / "initramfs.cpio.gz"


# What fixtures/Makefile makes the initramfs from (the trace-* sets are not in it:
# the host arms them on the kernel command line).
INITRAMFS_INPUTS = ("init", "uarts.sh", "Makefile", "*.c", "*.h", "kprobes-*")


def initramfs_problem() -> Optional[str]:
    """Why the initramfs cannot be booted as built, in one line: missing, or older
    than a file of fixtures/ it is made from (the init, a program, a kprobe set:
    a boot would run the old one); None if neither."""
    path = initramfs()
    if not path.is_file():
        return f"initramfs '{path}' is missing: run 'make fixtures'"
    built = path.stat().st_mtime
    newer = sorted(f.name for pattern in INITRAMFS_INPUTS for f in FIXTURE_DIR.glob(pattern)
                   if f.stat().st_mtime > built)
    if newer:
        return (f"initramfs '{path}' is stale: {', '.join(newer)} changed since it was "
                f"built; run 'make fixtures'")
    return None


def distro_deb() -> Path:
    """Debian's cloud kernel package, by scripts/fetch-distro-kernel.sh (make distro-kernel)."""
    return BUILD_DIR / "distro" / "linux-image-cloud-amd64.deb"
