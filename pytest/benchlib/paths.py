"""Where the repository keeps things, and where builds and results go."""
from __future__ import annotations

import os
from pathlib import Path

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


def initramfs() -> Path:
    """The initramfs fixtures/Makefile produces."""
    return BUILD_DIR / "fixtures" / "initramfs.cpio.gz"


def distro_deb() -> Path:
    """Debian's cloud kernel package, by scripts/fetch-distro-kernel.sh (make distro-kernel)."""
    return BUILD_DIR / "distro" / "linux-image-cloud-amd64.deb"
