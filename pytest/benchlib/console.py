"""The guest's serial console as a stream of boot stages.

The console is read through `virsh console` (attached by `virsh create --console`)
under pexpect. Above that transport sits a small state machine: every stage has a
pattern and a deadline; "death strings" (a panic, an oops) end the wait at once.
"""
from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Optional

import pexpect

from .errors import BootFailed

# What ends a boot early, checked on every chunk the console delivers.
DEATH_STRINGS = (
    r"Kernel panic - not syncing[^\r\n]*",
    r"BUG: [^\r\n]*",
    r"Oops: [^\r\n]*",
    r"general protection fault[^\r\n]*",
    r"(?m)^error: [^\r\n]*",      # virsh itself: the domain could not be created
)


# virsh prints the cause of a failed create on the lines after its "error:".
VIRSH_EXIT_WAIT_S = 5


@dataclass(frozen=True)
class Stage:
    name: str
    pattern: str      # regular expression on the console
    deadline_s: float  # from the previous stage


def boot_stages(tasks: list[str], task_deadline_s: float, cap_s: Optional[float] = None,
                deadlines: Optional[dict[str, float]] = None) -> list[Stage]:
    """The stages of a bench boot, in order; each task is a stage of its own.

    deadlines gives some tasks their own (longer) deadline; cap_s shortens every
    deadline (a probe boot that must answer quickly)."""
    deadlines = deadlines or {}
    stages = [
        Stage("attached", r"Connected to domain", 60),
        # Firmware + decompression: a guest on an unusable accelerator stalls here.
        Stage("kernel", r"Linux version \S+", 60),
        Stage("init", r"@@BENCH stage=init\b", 120),
    ]
    # A task's deadline runs until the next task starts: it belongs to the task before.
    previous = [None, *tasks]
    stages += [Stage(f"task:{t}", rf"@@BENCH stage=task name={re.escape(t)}\b",
                     deadlines.get(previous[i], task_deadline_s))
               for i, t in enumerate(tasks)]
    stages += [
        Stage("done", r"@@BENCH stage=done\b", deadlines.get(tasks[-1], task_deadline_s)
              if tasks else task_deadline_s),
        Stage("poweroff", "", 60),      # the console closes when the domain is gone
    ]
    if cap_s is not None:
        stages = [Stage(s.name, s.pattern, min(s.deadline_s, cap_s)) for s in stages]
    return stages


class ConsoleSession:
    """Follow one guest's console through its stages, recording host times."""

    def __init__(self, command: list[str], name: str, console_log: str) -> None:
        self.name = name
        self.console_log = console_log
        self.started = time.monotonic()
        self.reached: dict[str, float] = {}
        self.stage = "starting"
        self.child = pexpect.spawn(command[0], command[1:], encoding="utf-8",
                                   codec_errors="replace", timeout=None)

    def follow(self, stages: list[Stage], total_s: Optional[float] = None) -> None:
        """Wait for each stage in turn; total_s bounds the whole boot as well."""
        for stage in stages:
            if total_s is not None:
                left = max(0.0, total_s - (time.monotonic() - self.started))
                stage = Stage(stage.name, stage.pattern, min(stage.deadline_s, left))
            self._wait_for(stage)

    def _wait_for(self, stage: Stage) -> None:
        patterns: list = [pexpect.EOF, pexpect.TIMEOUT, *DEATH_STRINGS]
        if stage.pattern:
            patterns.append(stage.pattern)
        index = self.child.expect(patterns, timeout=stage.deadline_s)
        if index == 0 and stage.pattern:
            raise BootFailed(f"guest {self.name}: console closed before stage '{stage.name}'",
                             self.stage, self.console_log)
        if index == 1:
            raise BootFailed(f"guest {self.name}: no stage '{stage.name}' within "
                             f"{stage.deadline_s:.0f} s", self.stage, self.console_log)
        if 2 <= index < 2 + len(DEATH_STRINGS):
            raise BootFailed(f"guest {self.name}: '{self._death_message()}' before stage "
                             f"'{stage.name}'", self.stage, self.console_log)
        self.stage = stage.name
        self.reached[stage.name] = round(time.monotonic() - self.started, 3)

    def _death_message(self) -> str:
        """The death string, with the rest of virsh's error when virsh died of it."""
        message = self.child.after.strip()
        if message.startswith("error: "):
            try:
                self.child.expect(pexpect.EOF, timeout=VIRSH_EXIT_WAIT_S)
                message = " ".join([message, *self.child.before.split()])
            except pexpect.TIMEOUT:
                pass
        return message

    def transcript_tail(self) -> Optional[str]:
        return self.child.before if isinstance(self.child.before, str) else None

    def close(self) -> None:
        """Detach; with `virsh create --autodestroy` this also destroys the domain."""
        if self.child.isalive():
            self.child.terminate(force=True)
        self.child.close(force=True)
