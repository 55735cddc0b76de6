"""Kernel images: a built variant's bzImage, or any bzImage a user brings."""
from __future__ import annotations

import subprocess
from pathlib import Path

from .errors import BadKernel
from .paths import KERNEL_DIR, kernel_image
from .variants import all_names, base_name

# The x86 boot protocol puts the magic "HdrS" at offset 0x202 of every bzImage
# (Documentation/x86/boot.rst); anything else would not boot, so say so now.
BOOT_HEADER_MAGIC_OFFSET = 0x202
BOOT_HEADER_MAGIC = b"HdrS"
# The same header says how long the image is: setup_sects (0x1f1, 512-byte
# sectors after the boot sector; 0 means 4) and syssize (0x1f4, the protected-mode
# code in 16-byte paragraphs). A file shorter than that was cut off: it would
# load and then hang or reboot without a line on the console.
SETUP_SECTS_OFFSET, SYSSIZE_OFFSET = 0x1F1, 0x1F4
SECTOR, PARAGRAPH, SETUP_SECTS_IF_ZERO = 512, 16, 4
# The header's kernel_version field (0x20e) points at the image's version string,
# 0x200 bytes before where it says ("6.1.0-57-cloud-amd64 (debian-kernel@...) #1
# SMP ..."): how the report names a kernel it did not build.
KERNEL_VERSION_OFFSET, KERNEL_VERSION_BASE, KERNEL_VERSION_MAX = 0x20E, 0x200, 256
FINGERPRINT = "fingerprint"


def check_bzimage(path: Path) -> Path:
    """Return the resolved path of a bootable-looking bzImage or raise BadKernel."""
    path = Path(path)
    if not path.is_file():
        raise BadKernel(f"kernel image '{path}' does not exist")
    with path.open("rb") as image:
        header = image.read(BOOT_HEADER_MAGIC_OFFSET + len(BOOT_HEADER_MAGIC))
    if header[BOOT_HEADER_MAGIC_OFFSET:] != BOOT_HEADER_MAGIC:
        raise BadKernel(f"kernel image '{path}' is not an x86 bzImage (no 'HdrS' boot header)")
    setup_sects = header[SETUP_SECTS_OFFSET] or SETUP_SECTS_IF_ZERO
    syssize = int.from_bytes(header[SYSSIZE_OFFSET:SYSSIZE_OFFSET + 4], "little")
    declared = (setup_sects + 1) * SECTOR + syssize * PARAGRAPH
    size = path.stat().st_size
    if size < declared:
        raise BadKernel(f"kernel image '{path}' is truncated: {size} bytes, its boot header "
                        f"declares {declared}")
    return path.resolve()


def kernel_version(path: Path) -> str:
    """The version string a bzImage carries (check_bzimage it first); '' if none."""
    with Path(path).open("rb") as image:
        image.seek(KERNEL_VERSION_OFFSET)
        pointer = int.from_bytes(image.read(2), "little")
        if not pointer:
            return ""
        image.seek(KERNEL_VERSION_BASE + pointer)
        raw = image.read(KERNEL_VERSION_MAX).split(b"\0", 1)[0]
    return raw.decode("ascii", errors="replace").strip()


def variant_kernel(variant: str) -> Path:
    """The built kernel of a variant; the message says how to build a missing one."""
    if base_name(variant) not in all_names():
        raise BadKernel(f"unknown kernel variant '{variant}' (known: {', '.join(all_names())})")
    path = kernel_image(variant)
    if not path.is_file():
        raise BadKernel(f"kernel image '{path}' for variant '{variant}' is missing: "
                        f"run 'kernel/build.sh {variant}' (or 'make build')")
    # kernel/build.sh writes the inputs' fingerprint last: without it the image is
    # from a build that did not finish.
    built = path.parent / FINGERPRINT
    if not built.is_file():
        raise BadKernel(f"kernel image '{path}' has no {FINGERPRINT} beside it: its build "
                        f"did not finish; run 'kernel/build.sh {variant}'")
    if built.read_text().strip() != inputs_fingerprint(variant):
        raise BadKernel(f"kernel image '{path}' is stale: its series, patches or config "
                        f"fragments changed since it was built; run 'kernel/build.sh {variant}'")
    return check_bzimage(path)


def inputs_fingerprint(variant: str) -> str:
    """What kernel/build.sh would record for the variant's inputs as they are now."""
    result = subprocess.run([str(KERNEL_DIR / "build.sh"), "--fingerprint", variant],
                            capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise BadKernel(result.stderr.strip() or f"kernel/build.sh --fingerprint {variant} "
                        f"failed (exit {result.returncode})")
    return result.stdout.strip()
