"""Boot records: what one guest boot printed, parsed into one structure.

Two channels come back from a guest: the console (ttyS0: the init's stage markers,
warnings and worse, and whatever the tests write as noise) and the data channel
(ttyS1: the tasks' output framed by @@BEGIN/@@END, the probe's @@PROBE lines, and
the whole kernel log as @@KMSG records from /dev/kmsg). Kernel messages are read
from the kmsg records only: on the console a printk can land inside another line.
A record missing by its sequence number is an error, never a silent gap.

A long dump (the kprobe trace) comes packed: between "@@PACKED gzip base64" and
"@@PACKED_END", the base64 of its gzip (fixtures/init's packed()). The UART moves
about 100-200 KB a second under TCG, and a boot's trace is up to a megabyte of
text; packed it is about a twelfth of that. unpack_channel() puts the lines back
where the block was, so every parser below reads plain lines.

What they are parsed into, the BootRecord and its tasks' TaskOutput, is
benchlib/core/bootrecord.py's: the checks and the reports read a record without this
parser.
"""
from __future__ import annotations

import base64
import binascii
import re
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ..core.bootrecord import TaskOutput
from ..core.errors import BenchError
from .stages import MARKER_PREFIX

PRINTK_LINE = re.compile(r"^\[\s*(\d+\.\d+)\] (.*)$")
KMSG_TASK = "kmsg"
PACKED_START, PACKED_END = "@@PACKED gzip base64", "@@PACKED_END"
# What stands in a lenient unpack where a block did not decode (unpack_channel).
PACKED_CORRUPT = "@@PACKED_CORRUPT"
# zlib's wbits for a gzip stream (header and CRC checked).
GZIP_WBITS = 16 + zlib.MAX_WBITS


class ChannelCorrupt(BenchError):
    """A packed block that ended but does not decode to a whole gzip stream."""


class KmsgIncomplete(ValueError):
    """The kernel log dump is missing records (or is missing altogether)."""


@dataclass(frozen=True)
class KmsgRecord:
    seq: int
    t: float          # printk time, seconds since boot
    level: int
    text: str


def parse_kmsg(lines: list[str]) -> list[KmsgRecord]:
    """kmsgdump's @@KMSG lines -> records; raise KmsgIncomplete on any gap.

    Complete means: the dump ended (@@KMSG_END), the kernel reported no record
    overwritten before it was read, and the sequence numbers run from 0 without
    a gap."""
    records: list[KmsgRecord] = []
    end: Optional[dict[str, str]] = None
    for line in lines:
        if line.startswith("@@KMSG "):
            head, _, text = line[len("@@KMSG "):].partition(" text=")
            fields = dict(word.split("=", 1) for word in head.split())
            records.append(KmsgRecord(int(fields["seq"]), float(fields["t"]),
                                      int(fields["level"]), text))
        elif line.startswith("@@KMSG_END "):
            end = dict(word.split("=", 1) for word in line.split()[1:])
    if end is None:
        raise KmsgIncomplete("the kernel log dump did not finish (no @@KMSG_END)")
    if int(end["lost"]):
        raise KmsgIncomplete(f"{end['lost']} kernel log record(s) were overwritten "
                             "before they were read")
    expected = 0
    for record in records:
        if record.seq != expected:
            raise KmsgIncomplete(f"kernel log records {expected}-{record.seq - 1} are missing")
        expected += 1
    if not records:
        raise KmsgIncomplete("the kernel log dump holds no record")
    return records


def messages_from(tasks: dict[str, TaskOutput]) -> list[tuple[float, str]]:
    """The kernel log of a boot from its kmsg task; KmsgIncomplete if not whole."""
    if KMSG_TASK not in tasks:
        raise KmsgIncomplete("the boot has no kernel log dump (task 'kmsg')")
    return [(r.t, r.text) for r in parse_kmsg(tasks[KMSG_TASK].lines)]


def parse_console(text: str) -> list[tuple[float, str]]:
    """printk lines of a console transcript: for diagnostics only (see above)."""
    messages = []
    for line in text.splitlines():
        match = PRINTK_LINE.match(line.strip("\r"))
        if match:
            messages.append((float(match.group(1)), match.group(2)))
    return messages


def parse_probe_line(line: str) -> dict[str, str]:
    """'@@PROBE k=v k=v text=free text' -> dict; text= takes the rest of the line."""
    body = line[len("@@PROBE "):]
    fields: dict[str, str] = {}
    head, sep, text = body.partition(" text=")
    for word in head.split():
        key, _, value = word.partition("=")
        fields[key] = value
    if sep:
        fields["text"] = text
    return fields


def _unpacked(encoded: list[str], ended: bool, where: str) -> list[str]:
    """The lines of one packed block. A block that ended must be one whole gzip
    stream (ChannelCorrupt otherwise); one the channel cut off (the guest died in
    it) gives what decodes."""
    data = "".join(line.strip() for line in encoded)
    stream = zlib.decompressobj(GZIP_WBITS)
    try:
        raw = base64.b64decode(data if ended else data[:len(data) // 4 * 4], validate=True)
        text = stream.decompress(raw)
    except (binascii.Error, zlib.error) as exc:
        if not ended:
            return []
        raise ChannelCorrupt(f"a packed block {where} does not decode: {exc}") from None
    if ended and not (stream.eof and not stream.unused_data):
        raise ChannelCorrupt(f"a packed block {where} is not one whole gzip stream")
    return text.decode(errors="replace").splitlines()


def unpack_channel(text: str, source: str = "the data channel",
                   corrupt: Optional[list[str]] = None) -> str:
    """The data channel with every packed block replaced by the lines it holds.
    A block that ended and does not decode raises ChannelCorrupt; given a list
    `corrupt`, it is left out instead (a line PACKED_CORRUPT in its place) and
    its error appended there, so that the rest of the channel can be read."""
    out: list[str] = []
    block: Optional[list[str]] = None
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip("\r")
        if block is None and line == PACKED_START:
            block, start = [], number
        elif block is not None and line == PACKED_END:
            try:
                out += _unpacked(block, True, f"at line {start} of {source}")
            except ChannelCorrupt as exc:
                if corrupt is None:
                    raise
                corrupt.append(str(exc))
                out.append(f"{PACKED_CORRUPT} {exc}")
            block = None
        elif block is not None:
            block.append(line)
        else:
            out.append(raw)
    if block is not None:
        out += _unpacked(block, False, f"at line {start} of {source}")
    return "\n".join(out) + ("\n" if out else "")


def parse_data(text: str, source: str = "the data channel",
               corrupt: Optional[list[str]] = None
               ) -> tuple[dict[str, TaskOutput], list[dict[str, str]]]:
    """The data channel's tasks and probe lines (unpack_channel: ChannelCorrupt
    for a packed block that ended and does not decode, unless `corrupt` collects
    its error)."""
    return parse_plain(unpack_channel(text, source, corrupt))


def parse_plain(text: str) -> tuple[dict[str, TaskOutput], list[dict[str, str]]]:
    """parse_data of a channel whose packed blocks are already unpacked."""
    tasks: dict[str, TaskOutput] = {}
    probe: list[dict[str, str]] = []
    current: Optional[TaskOutput] = None
    for raw in text.splitlines():
        line = raw.rstrip("\r")
        if line.startswith("@@BEGIN "):
            current = tasks[line.split()[1]] = TaskOutput(line.split()[1], None)
        elif line.startswith("@@END ") and current is not None:
            current.rc = int(line.rsplit("rc=", 1)[1])
            current = None
        elif line.startswith("@@PROBE "):
            probe.append(parse_probe_line(line))
        elif line.startswith(MARKER_PREFIX):
            continue        # a stage marker (benchlib/boot/stages.py), never a task's output
        elif current is not None:
            current.lines.append(line)
    return tasks, probe


def read_text(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""
