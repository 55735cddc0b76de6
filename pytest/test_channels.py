"""The serial ports as the bench wires them (benchlib/boot/channels.py): no hypervisor."""
from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from benchlib.boot.channels import FileTail, wire
from benchlib.core.errors import BenchError

# A user's profile as the bench's used to be: a pty with a log file on port 0,
# a file on port 1, a console mirroring port 0.
USERS_PROFILE = """<domain type='qemu'><name>x</name><devices>
  <serial type='pty'><log file='/old/console.log' append='off'/>
    <target type='isa-serial' port='0'/></serial>
  <serial type='file'><source path='/old/data.log'/><target type='isa-serial' port='1'/></serial>
  <console type='pty'><target type='serial' port='0'/></console>
</devices></domain>"""


def serials(xml: str) -> dict[str, ET.Element]:
    return {s.find("target").get("port"): s  # type: ignore[union-attr]
            for s in ET.fromstring(xml).findall("devices/serial")}


def test_channels_both_ports_become_files_and_the_console_mirror_goes() -> None:
    xml = wire(USERS_PROFILE, Path("/run/c.log"), Path("/run/d.log"), "users")
    ports = serials(xml)
    assert [(p.get("type"), p.find("source").get("path"), p.find("log"))  # type: ignore[union-attr]
            for p in (ports["0"], ports["1"])] == [("file", "/run/c.log", None),
                                                   ("file", "/run/d.log", None)]
    assert ET.fromstring(xml).find("devices/console") is None


def test_channels_a_restored_guest_appends() -> None:
    xml = wire(USERS_PROFILE, Path("/c"), Path("/d"), "users", append=True)
    assert {p.find("source").get("append") for p in serials(xml).values()} == {"on"}  # type: ignore[union-attr]


def test_channels_streamed_ports_are_ptys_without_files() -> None:
    xml = wire(USERS_PROFILE, Path("/c"), Path("/d"), "users", streamed=True)
    for port in serials(xml).values():
        assert port.get("type") == "pty"
        assert port.find("source") is None and port.find("log") is None


def test_channels_a_profile_without_a_data_port_is_an_error() -> None:
    one_port = USERS_PROFILE.replace("port='1'", "port='2'")
    with pytest.raises(BenchError, match="profile 'users' has no serial port 1"):
        wire(one_port, Path("/c"), Path("/d"), "users")


def test_channels_file_tail_returns_what_was_added_whole_characters_only(tmp_path: Path) -> None:
    path = tmp_path / "log"
    tail = FileTail(path)
    assert tail.read() == ""
    path.write_bytes("@@BENCH stage=init é".encode()[:-1])      # half of 'é'
    assert tail.read() == "@@BENCH stage=init "
    with path.open("ab") as log:
        log.write("é".encode()[1:] + b"\n")
    assert tail.read() == "é\n"
