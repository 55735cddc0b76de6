"""Parsers for what guest tasks print from /proc and /sys."""
from __future__ import annotations

import re
from dataclasses import dataclass


def parse_interrupts(lines: list[str]) -> dict[str, int]:
    """/proc/interrupts -> {row label: total count over all CPUs}.

    Rows are labelled by their first column without the colon: an IRQ number
    ("4") or a system vector name ("LOC", "HYP")."""
    rows: dict[str, int] = {}
    header = next((line for line in lines if line.strip().startswith("CPU")), None)
    ncpu = len(header.split()) if header else 1
    for line in lines:
        label, sep, rest = line.partition(":")
        if not sep or not label.strip() or label.strip().startswith("CPU"):
            continue
        counts = []
        for word in rest.split()[:ncpu]:
            if not word.isdigit():
                break
            counts.append(int(word))
        rows[label.strip()] = sum(counts)
    return rows


@dataclass(frozen=True)
class InputDevice:
    name: str
    handlers: str
    capabilities: dict[str, str]

    @property
    def is_keyboard(self) -> bool:
        return "keyboard" in self.name.lower()

    @property
    def is_mouse(self) -> bool:
        # A pointer reports relative motion (REL) events.
        return "REL" in self.capabilities


def parse_input_devices(lines: list[str]) -> list[InputDevice]:
    """/proc/bus/input/devices: blank-line separated blocks of 'X: ...' lines."""
    devices, block = [], []
    for line in [*lines, ""]:
        if line.strip():
            block.append(line)
            continue
        if block:
            name = next((re.sub(r'^N: Name="?|"$', "", b) for b in block if b.startswith("N:")), "")
            handlers = next((b[len("H: Handlers="):] for b in block if b.startswith("H:")), "")
            caps = dict(b[3:].split("=", 1) for b in block if b.startswith("B:") and "=" in b)
            devices.append(InputDevice(name, handlers, caps))
        block = []
    return devices
