"""Boot records: what one guest boot printed, parsed into one structure.

Two channels come back from a guest: the console (ttyS0: the kernel log with
printk timestamps, and the init's stage markers) and the data channel (ttyS1: the
tasks' output framed by @@BEGIN/@@END, the probe's @@PROBE lines).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

PRINTK_LINE = re.compile(r"^\[\s*(\d+\.\d+)\] (.*)$")
# The RNG milestones each design prints, by the name reports use for them.
MILESTONES = {
    "crng init done": re.compile(r"random: crng init done"),
    "crng_init 1": re.compile(r"random: crng_init 1\b"),
    "crng_init 2": re.compile(r"random: crng_init 2\b"),
    "crng_init 3": re.compile(r"random: crng_init 3\b"),
}


@dataclass
class TaskOutput:
    """One init task's output from the data channel."""
    name: str
    rc: Optional[int]                       # None: the task never finished
    lines: list[str] = field(default_factory=list)

    def sections(self) -> dict[str, list[str]]:
        """Lines grouped under the task's own '@@SECTION title' headers."""
        result: dict[str, list[str]] = {}
        current: Optional[list[str]] = None
        for line in self.lines:
            if line.startswith("@@SECTION "):
                current = result.setdefault(line[len("@@SECTION "):].strip(), [])
            elif current is not None:
                current.append(line)
        return result


@dataclass
class BootRecord:
    name: str
    profile: str
    variant: str
    kernel: str
    accel: str
    cmdline: str
    console_log: Path
    data_log: Path
    stages: dict[str, float] = field(default_factory=dict)   # host seconds since start
    messages: list[tuple[float, str]] = field(default_factory=list)
    tasks: dict[str, TaskOutput] = field(default_factory=dict)
    probe: list[dict[str, str]] = field(default_factory=list)

    def milestone(self, name: str) -> Optional[float]:
        """Guest printk time of the first message matching a milestone."""
        pattern = MILESTONES[name]
        return next((t for t, text in self.messages if pattern.search(text)), None)

    def milestones(self) -> dict[str, float]:
        found = {name: self.milestone(name) for name in MILESTONES}
        return {name: t for name, t in found.items() if t is not None}

    def probe_events(self, event: str) -> list[dict[str, str]]:
        return [p for p in self.probe if p.get("event") == event]

    def probe_event(self, event: str) -> Optional[dict[str, str]]:
        found = self.probe_events(event)
        return found[0] if found else None

    def kmsg(self) -> list[tuple[float, str]]:
        """The RNG's and the probe's kernel log records, in log order (probe's dump)."""
        return [(float(p["t"]), p["text"]) for p in self.probe_events("kmsg")]

    def task(self, name: str) -> TaskOutput:
        if name not in self.tasks:
            raise KeyError(f"task '{name}' printed nothing in {self.data_log}")
        return self.tasks[name]

    def summary(self) -> dict[str, object]:
        ok = self.probe_event("nonblock_ok")
        return {
            "name": self.name, "profile": self.profile, "variant": self.variant,
            "kernel": self.kernel, "accel": self.accel, "cmdline": self.cmdline,
            "console_log": str(self.console_log), "data_log": str(self.data_log),
            "host_stages_s": self.stages, "milestones_s": self.milestones(),
            "first_nonblock_ok_s": float(ok["t"]) if ok else None,
            "entropy_avail": {p["when"]: p["value"] for p in self.probe_events("entropy_avail")},
        }


def parse_console(text: str) -> list[tuple[float, str]]:
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


def parse_data(text: str) -> tuple[dict[str, TaskOutput], list[dict[str, str]]]:
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
        elif current is not None:
            current.lines.append(line)
    return tasks, probe


def read_text(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


def kmsg_position(record: BootRecord, text: str) -> tuple[int, float]:
    """(index in the kernel log, printk time) of the first record containing text."""
    for index, (t, message) in enumerate(record.kmsg()):
        if text in message:
            return index, t
    raise LookupError(f"'{text}' not in the kernel log of {record.name} ({record.data_log})")
