"""Opening a libvirt connection, with one clear line when it cannot be done."""
from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Optional

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


# Each host's TSC rate, as its libvirt measured it: asked once per connection.
_host_tsc_hz: dict[str, Optional[int]] = {}


def host_tsc_hz(conn: libvirt.virConnect) -> Optional[int]:
    """The host's TSC frequency in Hz from libvirt's capabilities (host/cpu/counter
    name='tsc'), or None when libvirt could not measure it."""
    uri = conn.getURI()
    if uri not in _host_tsc_hz:
        counter = ET.fromstring(conn.getCapabilities()).find("host/cpu/counter[@name='tsc']")
        frequency = counter.get("frequency") if counter is not None else None
        _host_tsc_hz[uri] = int(frequency) if frequency and frequency.isdigit() else None
    return _host_tsc_hz[uri]
