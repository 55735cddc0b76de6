"""Opening a libvirt connection, with one clear line when it cannot be done."""
from __future__ import annotations

import libvirt

from .errors import BenchError


def connect(uri: str) -> libvirt.virConnect:
    """libvirt.open(uri), or BenchError naming the URI and what to do. Any URI
    libvirt knows: a host that does not share our files gets its kernels uploaded
    and its consoles streamed (benchlib/hosts.py)."""
    try:
        return libvirt.open(uri)
    except libvirt.libvirtError as exc:
        raise BenchError(f"cannot connect to libvirt at '{uri}': {exc.get_error_message()} "
                         "(for this machine's own daemon: run scripts/setup.sh)") from None
