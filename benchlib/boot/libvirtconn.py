"""Opening a libvirt connection, with one clear line when it cannot be done."""
from __future__ import annotations

import threading
import xml.etree.ElementTree as ET
from typing import Optional

import libvirt

from ..core.errors import BenchError

# How long opening a connection may take. libvirt.open() has no deadline of its
# own: a daemon that accepts and never answers (seen: the second libvirtd of
# test_hosts.py, 2026-12-07) held the suite for good. A daemon that works answers
# in well under a second, a few on a loaded machine.
CONNECT_TIMEOUT_S = 60.0


def connect(uri: str, timeout_s: Optional[float] = None) -> libvirt.virConnect:
    """libvirt.open(uri), or BenchError naming the URI and what to do, also when
    the daemon has not answered within timeout_s (None: CONNECT_TIMEOUT_S). Any URI libvirt knows: a host that
    does not share our files gets its kernels uploaded and its consoles streamed
    (benchlib/boot/hosts.py). The open runs in a daemon thread of its own (not a
    concurrent.futures worker: those are joined at interpreter exit, where an open
    that never returns would hold the process); one that answers after the
    deadline has its connection closed."""
    if timeout_s is None:
        timeout_s = CONNECT_TIMEOUT_S
    outcome: dict[str, object] = {}
    settled = threading.Lock()

    def open_it() -> None:
        try:
            conn: object = libvirt.open(uri)
        except libvirt.libvirtError as exc:
            conn = exc
        with settled:
            if "abandoned" in outcome and isinstance(conn, libvirt.virConnect):
                conn.close()
            outcome["result"] = conn

    opener = threading.Thread(target=open_it, name=f"libvirt-open {uri}", daemon=True)
    opener.start()
    opener.join(timeout_s)
    with settled:
        if "result" not in outcome:
            outcome["abandoned"] = True
            raise BenchError(f"libvirt at '{uri}' did not answer within {timeout_s:g} s: "
                             "is its daemon hung? (for this machine's own daemon: "
                             "run scripts/setup.sh)")
    result = outcome["result"]
    if isinstance(result, libvirt.libvirtError):
        raise BenchError(f"cannot connect to libvirt at '{uri}': "
                         f"{result.get_error_message()} "
                         "(for this machine's own daemon: run scripts/setup.sh)")
    assert isinstance(result, libvirt.virConnect)
    return result


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
