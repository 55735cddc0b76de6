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
FINGERPRINT = "fingerprint"


def check_bzimage(path: Path) -> Path:
    """Return the resolved path of a bootable-looking bzImage or raise BadKernel."""
    path = Path(path)
    if not path.is_file():
        raise BadKernel(f"kernel image '{path}' does not exist")
    with path.open("rb") as image:
        image.seek(BOOT_HEADER_MAGIC_OFFSET)
        magic = image.read(len(BOOT_HEADER_MAGIC))
    if magic != BOOT_HEADER_MAGIC:
        raise BadKernel(f"kernel image '{path}' is not an x86 bzImage (no 'HdrS' boot header)")
    return path.resolve()


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
