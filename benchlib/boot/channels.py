"""The guest's two serial ports, wired so that the host misses nothing.

Port 0, the console (ttyS0), carries the kernel log, the init's own stdout and
the console noise some tasks make; port 1, the data channel (ttyS1), carries the
init's stage markers and its framed task output, and nothing else.

On this host, both ports are files that QEMU writes itself (setup.sh sets
stdio_handler "file": no virtlogd), whatever the profile's XML says about them: QEMU writes every byte
the guest sends, from the first instruction on, and the host follows the files
as they grow. On a host that does not share our files, both ports are ptys, and
a libvirt stream (virDomainOpenConsole) per port is copied by a thread into the
same local files. Either way the domain is created paused and resumed only once
the wiring is in place (benchlib/boot/guest.py), so no reader can attach too late:
the race that lost a fast guest's last markers (a `virsh console` attached to a
running guest) cannot happen.
"""
from __future__ import annotations

import codecs
import threading
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Optional

import libvirt

from ..core.errors import BenchError

CONSOLE_PORT, DATA_PORT = "0", "1"
# The ports' device names for virDomainOpenConsole.
STREAM_DEVICES = {CONSOLE_PORT: "serial0", DATA_PORT: "serial1"}
STREAM_CHUNK = 1 << 16
# How long the channels may take to settle after the domain is gone: on a host
# whose libvirt logs through virtlogd, it writes the files a little after QEMU
# (seen: well under 100 ms); a stream's reader sees its end when the daemon
# closes it.
DRAIN_S = 10.0
# A local file counts as complete once it has not grown for this long.
SETTLE_S = 0.3
POLL_S = 0.05


def wire(xml: str, console_log: Path, data_log: Path, profile: str,
         streamed: bool = False, append: bool = False) -> str:
    """The domain XML with its serial ports 0 and 1 wired as the bench reads
    them: files here (appended to if `append`, as a restored guest must), ptys
    read through streams on a host that does not share our files. A console
    element that mirrors port 0 is dropped: libvirt derives it from the port."""
    root = ET.fromstring(xml)   # prefixes kept as the profiles write them (profiles.py)
    devices = root.find("devices")
    paths = {CONSOLE_PORT: console_log, DATA_PORT: data_log}
    wired: set[str] = set()
    for serial in (devices.findall("serial") if devices is not None else []):
        target = serial.find("target")
        port = target.get("port") if target is not None else None
        if port not in paths:
            continue
        for child in list(serial):
            if child.tag in ("log", "source"):
                serial.remove(child)
        if streamed:
            serial.set("type", "pty")
        else:
            serial.set("type", "file")
            source = ET.Element("source", path=str(paths[port]),
                                append="on" if append else "off")
            serial.insert(0, source)
        wired.add(port)
    missing = sorted(set(paths) - wired)
    if missing:
        raise BenchError(f"profile '{profile}' has no serial port {' or '.join(missing)} "
                         "(<serial> with <target port='N'/>): the bench needs port 0 for the "
                         "console and port 1 for the data channel")
    assert devices is not None
    for console in devices.findall("console"):
        target = console.find("target")
        if target is None or target.get("type", "serial") == "serial":
            devices.remove(console)
    return ET.tostring(root, encoding="unicode")


class FileTail:
    """A file as it grows: each read() returns the text added since the last."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def size(self) -> int:
        try:
            return self.path.stat().st_size
        except OSError:
            return 0

    def read(self) -> str:
        if self.size() <= self._offset:
            return ""
        with self.path.open("rb") as src:
            src.seek(self._offset)
            data = src.read()
        self._offset += len(data)
        return self._decoder.decode(data)


class StreamCopy:
    """One serial port of a domain on another host, copied through a libvirt
    stream into a local file by a thread, until the domain is gone."""

    def __init__(self, conn: libvirt.virConnect, dom: libvirt.virDomain, port: str,
                 path: Path) -> None:
        self.path = path
        self.error: Optional[str] = None
        self._ended = False
        self._stream = conn.newStream(0)
        dom.openConsole(STREAM_DEVICES[port], self._stream, libvirt.VIR_DOMAIN_CONSOLE_FORCE)
        self._thread = threading.Thread(target=self._copy, daemon=True,
                                        name=f"serial{port}-{dom.name()}")
        self._thread.start()

    def _copy(self) -> None:
        with self.path.open("wb") as out:
            while True:
                try:
                    data = self._stream.recv(STREAM_CHUNK)
                except libvirt.libvirtError as exc:
                    self.error = exc.get_error_message()
                    return
                if not isinstance(data, bytes) or not data:
                    self._ended = True      # the end of the stream: the domain is gone
                    return
                out.write(data)
                out.flush()

    def ended(self) -> bool:
        return not self._thread.is_alive()

    def close(self, wait_s: float = DRAIN_S) -> None:
        """Wait for the reader to see the end, then close the stream as the
        protocol asks: finish after the end, abort only a stream cut short.
        (Aborting a console stream the daemon has already ended can hang
        libvirtd 9.0's event loop in virStreamAbort: seen here.)"""
        self._thread.join(wait_s)
        try:
            if self._ended:
                self._stream.finish()
            elif not self._thread.is_alive():
                self._stream.abort()
            # else: still blocked in recv on a domain that is gone; the daemon ends
            # the stream, and the thread (a daemon thread) with it.
        except libvirt.libvirtError:
            pass


class Channels:
    """A boot's console and data channel as text, whichever way they are wired."""

    def __init__(self, console_log: Path, data_log: Path) -> None:
        self.console = FileTail(console_log)
        self.data = FileTail(data_log)
        self._copies: list[StreamCopy] = []

    def stream_from(self, conn: libvirt.virConnect, dom: libvirt.virDomain) -> None:
        """Copy both ports of a (paused) domain on another host into the files."""
        self._copies = [StreamCopy(conn, dom, CONSOLE_PORT, self.console.path),
                        StreamCopy(conn, dom, DATA_PORT, self.data.path)]

    def drain(self, deadline_s: float = DRAIN_S) -> None:
        """The domain is gone: wait until its channels are whole (the streams
        ended; the local files stopped growing)."""
        deadline = time.monotonic() + deadline_s
        if self._copies:
            while not all(c.ended() for c in self._copies) and time.monotonic() < deadline:
                time.sleep(POLL_S)
            return
        sizes = (-1, -1)
        stable_since = time.monotonic()
        while time.monotonic() < deadline:
            now_sizes = (self.console.size(), self.data.size())
            if now_sizes != sizes:
                sizes, stable_since = now_sizes, time.monotonic()
            elif time.monotonic() - stable_since >= SETTLE_S:
                return
            time.sleep(POLL_S)

    def close(self) -> None:
        for copy in self._copies:
            copy.close()
