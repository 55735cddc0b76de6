"""Opening the libvirt connection, with one clear line when it cannot be done."""
from __future__ import annotations

from urllib.parse import urlparse

import libvirt

from .errors import BenchError

# Only a local libvirtd can read the kernel, initramfs and logs at our paths.
LOCAL_TRANSPORTS = ("", "unix")


def connect(uri: str) -> libvirt.virConnect:
    """libvirt.open(uri), or BenchError naming the URI and what to do."""
    parsed = urlparse(uri)
    transport = parsed.scheme.partition("+")[2]
    if parsed.hostname or transport not in LOCAL_TRANSPORTS:
        raise BenchError(f"libvirt URI '{uri}' names a remote host: the bench boots guests "
                         "from local files and supports local hypervisors only "
                         "(e.g. qemu:///system)")
    try:
        return libvirt.open(uri)
    except libvirt.libvirtError as exc:
        raise BenchError(f"cannot connect to libvirt at '{uri}': {exc.get_error_message()} "
                         "(run scripts/setup.sh)") from None
