"""A boot's record: what one guest boot printed, as the checks and reports read it.

benchlib/boot/record.py parses the two channels of a boot (the @@ protocol) into
these; a check, a report or a test reads a BootRecord, booted, rebuilt from a
results folder, or made up (benchlib/testing/synthetic.py), and needs nothing of how it
was parsed.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from . import variants
from .errors import BadKernel
from .variants import Variant


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
    # The kernel log, from the kmsg dump: (printk time, text) in log order.
    messages: list[tuple[float, str]] = field(default_factory=list)
    tasks: dict[str, TaskOutput] = field(default_factory=dict)
    probe: list[dict[str, str]] = field(default_factory=list)
    # The libvirt URI the boot ran on, and whether another boot ran on the same
    # host meanwhile (its timing was then taken beside another guest).
    host: str = ""
    shared_host: bool = False
    host_slot: Optional[int] = None
    # Host wall clock (seconds since the epoch) from the domain's creation to its end.
    started_at: float = 0.0
    ended_at: float = 0.0

    def spec(self) -> Variant:
        """The variant's metadata (kernel/patches/<variant>/variant.toml)."""
        return variants.load(self.variant)

    def milestone(self, name: str) -> Optional[float]:
        """Guest printk time of the first kernel message marking a milestone."""
        pattern = self.spec().pattern(name)
        return next((t for t, text in self.messages if pattern.search(text)), None)

    def milestones(self) -> dict[str, float]:
        """Every milestone of the variant that this boot reached, with its time."""
        try:
            names = list(self.spec().milestones)
        except BadKernel:
            return {}      # not a bench variant (e.g. the accelerator probe boot)
        found = {name: self.milestone(name) for name in names}
        return {name: t for name, t in found.items() if t is not None}

    def probe_events(self, event: str) -> list[dict[str, str]]:
        return [p for p in self.probe if p.get("event") == event]

    def probe_event(self, event: str) -> Optional[dict[str, str]]:
        found = self.probe_events(event)
        return found[0] if found else None

    def task(self, name: str) -> TaskOutput:
        if name not in self.tasks:
            raise KeyError(f"task '{name}' printed nothing in {self.data_log}")
        return self.tasks[name]

    def finished_task(self, name: str) -> TaskOutput:
        """A task's output, asserting that it ran to the end with exit status 0:
        what a failed task printed is no evidence of anything."""
        task = self.task(name)
        assert task.rc == 0, (f"task '{name}' of {self.name} ended with rc={task.rc}: "
                              + " | ".join(task.lines[-5:]) + f" ({self.data_log})")
        return task

    def summary(self) -> dict[str, object]:
        ok = self.probe_event("nonblock_ok")
        return {
            "name": self.name, "profile": self.profile, "variant": self.variant,
            "kernel": self.kernel, "accel": self.accel, "cmdline": self.cmdline,
            "host": self.host, "shared_host": self.shared_host, "host_slot": self.host_slot,
            "started_at": self.started_at, "ended_at": self.ended_at,
            "console_log": str(self.console_log), "data_log": str(self.data_log),
            "host_stages_s": self.stages, "milestones_printk_s": self.milestones(),
            "first_nonblock_ok_boottime_s": float(ok["t"]) if ok else None,
            "entropy_avail": {p["when"]: p["value"] for p in self.probe_events("entropy_avail")},
        }


def kmsg_position(record: BootRecord, text: str, nth: int = 0) -> tuple[int, float]:
    """(index in the kernel log, printk time) of the record containing text, the
    first one or the nth after it (counted from 0)."""
    seen = 0
    for index, (t, message) in enumerate(record.messages):
        if text in message:
            if seen == nth:
                return index, t
            seen += 1
    raise LookupError(f"'{text}' not in the kernel log of {record.name} {nth + 1} times "
                      f"({record.data_log})")
