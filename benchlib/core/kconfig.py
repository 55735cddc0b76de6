"""A kernel's build configuration, and what a boot needs of it.

A kernel the bench did not build is read for its config where a distro keeps it
(/boot/config-VERSION, or config-VERSION beside the image or in its package), or
from the image itself when it was built with CONFIG_IKCONFIG (the gzipped
.config between the markers IKCFG_ST and IKCFG_ED, inside the compressed
payload). A boot that needs an option the kernel lacks is a skip naming the
option, never a failure or a hang: no kprobe events means no trace, no HYPERV
means no VMBus.
"""
from __future__ import annotations

import gzip
import lzma
import re
import zlib
from pathlib import Path
from typing import Iterable, Optional

from .kernels import kernel_version
from .modules import required_options
from .profiles import Capabilities
from .tasks import needs

Config = dict[str, str]
OPTION_LINE = re.compile(r"^(CONFIG_[A-Za-z0-9_]+)=(.*)$")
BOOT_DIR = Path("/boot")
# scripts/extract-ikconfig: the markers around kernel/configs.c's gzipped config.
IKCONFIG_START, IKCONFIG_END = b"IKCFG_ST", b"IKCFG_ED"
# Where a bzImage's compressed payload may start: the magic of each compression
# the x86 boot code can decompress that Python's standard library reads too.
PAYLOAD_MAGICS = {b"\x1f\x8b\x08": "gzip", b"\xfd7zXZ\x00": "xz"}



def parse(text: str) -> Config:
    """CONFIG_X=value lines -> {CONFIG_X: value}; '# ... is not set' is absence."""
    return {m.group(1): m.group(2) for m in map(OPTION_LINE.match, text.splitlines()) if m}


def _payload_configs(image: bytes) -> Iterable[bytes]:
    """Decompressed payloads of a bzImage, for each compression that can be read."""
    for magic, kind in PAYLOAD_MAGICS.items():
        start = image.find(magic)
        while start != -1:
            try:
                if kind == "gzip":
                    yield zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(image[start:])
                else:
                    yield lzma.LZMADecompressor().decompress(image[start:])
                break
            except (zlib.error, lzma.LZMAError, EOFError):
                start = image.find(magic, start + 1)


def embedded(image: Path) -> Optional[Config]:
    """The config built into an image (CONFIG_IKCONFIG), or None."""
    for vmlinux in _payload_configs(image.read_bytes()):
        start = vmlinux.find(IKCONFIG_START)
        end = vmlinux.find(IKCONFIG_END, start)
        if start != -1 and end != -1:
            return parse(gzip.decompress(vmlinux[start + len(IKCONFIG_START):end]).decode())
    return None


def find(image: Path, extra_dirs: Iterable[Path] = ()) -> tuple[Optional[Config], str]:
    """(config, where it was read) of a kernel image; (None, why not) if nowhere."""
    release = kernel_version(image).split(" ", 1)[0]
    if release:
        for folder in [*extra_dirs, image.parent, BOOT_DIR]:
            path = folder / f"config-{release}"
            if path.is_file():
                return parse(path.read_text()), str(path)
    config = embedded(image)
    if config is not None:
        return config, f"{image} (embedded, CONFIG_IKCONFIG)"
    return None, f"no config-{release or '?'} beside {image} or in {BOOT_DIR}, none embedded"


def needed(capabilities: Capabilities, tasks: Iterable[str],
           trace_options: Iterable[str] = ()) -> list[str]:
    """The options a boot needs: its profile's devices (modules.DRIVERS), what its
    tasks need (tasks.TASKS) and trace, and what its trace set needs
    (`trace_options`)."""
    tasks = list(tasks)
    options = required_options(capabilities, tasks) + list(trace_options)
    for task in tasks:
        options += needs(task).options
    return list(dict.fromkeys(options))


def missing(config: Config, options: Iterable[str]) -> list[str]:
    """Options neither built in nor modular."""
    return [o for o in options if config.get(o) not in ("y", "m")]
