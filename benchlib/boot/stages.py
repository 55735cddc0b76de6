"""A boot's stages, followed from what its two serial ports delivered.

The guest has two channels (benchlib/boot/channels.py): the console (ttyS0), where
the kernel log, the init's own stdout and the console noise go, and the data
channel (ttyS1), where the init writes its stage markers ("@@BENCH stage=...")
and its framed task output, and nothing else writes. Both reach the host as
files that QEMU writes from the first instruction on (the guest starts paused
until they are wired), so nothing the guest printed can be missed by a reader
that attached late.

`StageFollower` is a pure state machine over that text: it is fed chunks of
each channel and the host's clock, and says, at each step, which stages were
reached, or raises BootFailed for a death string, a stage past its deadline, or
a guest that ended before a stage. Every stage has a pattern on one channel
and a deadline from the stage before it. Markers are matched on whole lines of
the data channel; kernel messages ("Linux version") on the console, where death
strings (a panic, an oops) are looked for too.
"""
from __future__ import annotations

import dataclasses
import re
import threading
import time
from dataclasses import dataclass
from typing import Callable, Optional

from ..core.errors import BootFailed
from .kreports import DIE_HEADER, FATAL_STARTS

# What ends a boot early, looked for in the console's text: a fatal report's
# first words or an oops's die() header (benchlib/boot/kreports.py), and the rest of its line.
DEATH = re.compile("(?:" + "|".join([*map(re.escape, FATAL_STARTS), DIE_HEADER])
                   + r")[^\r\n]*")
# How long a death string's line may take to be complete (its message is cut there).
DEATH_LINE_WAIT_S = 1.0
# How much of the console's text is kept for a kernel-message stage and for a
# death string that arrives in pieces (far more than one stage's worth).
CONSOLE_WINDOW_CHARS = 1 << 20
# A stage marker as the init prints it, on a line of its own on the data channel.
MARKER_PREFIX = "@@BENCH "

# Where a stage is seen: a kernel message on the console, a marker on the data
# channel, or an event of the domain that only the host sees.
CONSOLE, DATA, HOST = "console", "data", "host"


@dataclass(frozen=True)
class Stage:
    name: str
    pattern: str        # regular expression on the stage's channel ("" for HOST)
    deadline_s: float   # from the previous stage
    channel: str = DATA


# The domain runs (created paused, channels wired, resumed): seen by the host.
STARTED = Stage("started", "", 60, HOST)
# The guest powered off: its kernel's last line on the console, or the domain gone.
# The line comes first, by the 2 s libvirt takes to see QEMU stop after a guest's
# power-off (measured); the host destroys the domain then.
POWEROFF = Stage("poweroff", r"reboot: Power down", 60, CONSOLE)
# Firmware + decompression: a guest on an unusable accelerator stalls here.
KERNEL_STAGE = Stage("kernel", r"Linux version \S+", 60, CONSOLE)
# The init marker of the synthetic init (fixtures/init): its first printing step.
INIT_DEADLINE_S = 120
# An image boot's userspace starting: the kernel runs the initramfs's /init
# (systemd), whose own marker comes only once multi-user.target is reached.
USERSPACE_STAGE = Stage("userspace", r"Run /init as init process", 120, CONSOLE)


def marker(text: str) -> str:
    """The pattern of a stage marker: "init", "task name=X", "done"."""
    return rf"^{re.escape(MARKER_PREFIX)}stage={re.escape(text)}(?:\s|$)"


# The last marker: the guest's data channel is whole once it is seen; it only powers
# off after it (a guest gone after it is not waited on for more).
DONE_STAGE = "done"


def boot_stages(tasks: list[str], task_deadline_s: float, cap_s: Optional[float] = None,
                deadlines: Optional[dict[str, float]] = None,
                userspace_s: Optional[float] = None) -> list[Stage]:
    """The stages of a bench boot, in order; each task is a stage of its own.

    deadlines gives some tasks their own (longer) deadline; cap_s shortens every
    deadline (a probe boot that must answer quickly). userspace_s: an image boot,
    whose /init is a whole userspace that takes up to this long to reach the
    collector's init marker (fixtures/image/collect)."""
    deadlines = deadlines or {}
    stages = [STARTED, KERNEL_STAGE]
    if userspace_s is None:
        stages.append(Stage("init", marker("init"), INIT_DEADLINE_S))
    else:
        stages += [USERSPACE_STAGE, Stage("init", marker("init"), userspace_s)]
    # A task's deadline runs until the next task starts: it belongs to the task before.
    previous = [None, *tasks]
    stages += [Stage(f"task:{t}", marker(f"task name={t}"),
                     deadlines.get(previous[i], task_deadline_s))
               for i, t in enumerate(tasks)]
    stages += [
        Stage(DONE_STAGE, marker(DONE_STAGE),
              deadlines.get(tasks[-1], task_deadline_s) if tasks else task_deadline_s),
        POWEROFF,
    ]
    if cap_s is not None:
        stages = [dataclasses.replace(s, deadline_s=min(s.deadline_s, cap_s)) for s in stages]
    return stages


# Set when a run is interrupted while boots run in other threads (make run on
# several slots): each boot then stops at its next step instead of waiting out
# its stage's deadline on a domain that has been destroyed under it.
INTERRUPTED = threading.Event()


class StageFollower:
    """The stages reached so far by one boot, from its channels' text.

    Host times (seconds since the follower was made) of the stages reached are
    in `reached`; `stage` names the last one."""

    def __init__(self, name: str, stages: list[Stage], console_log: str,
                 total_s: Optional[float] = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.name = name
        self.console_log = console_log
        self.reached: dict[str, float] = {}
        self.stage = "starting"
        self._stages = list(stages)
        self._clock = clock
        self._started = clock()
        self._since = self._started     # when the previous stage was reached
        self._total_s = total_s
        self._console = ""              # console text not yet consumed by a stage
        self._data_lines: list[str] = []  # whole marker lines not yet consumed
        self._data_partial = ""         # the data channel's unfinished last line
        self._gone = False
        self._death_seen_at: Optional[float] = None

    # -- input -------------------------------------------------------------
    def console(self, text: str) -> None:
        if text:
            self._console = (self._console + text)[-CONSOLE_WINDOW_CHARS:]

    def data(self, text: str) -> None:
        if not text:
            return
        lines = (self._data_partial + text).split("\n")
        self._data_partial = lines.pop()
        self._data_lines += [line.rstrip("\r") for line in lines
                             if line.lstrip("\r").startswith(MARKER_PREFIX)]

    def guest_gone(self) -> None:
        """The domain ended and its channels were read to the end."""
        self._gone = True
        if self._data_partial.startswith(MARKER_PREFIX):
            self._data_lines.append(self._data_partial.rstrip("\r"))
        self._data_partial = ""

    # -- the state machine ---------------------------------------------------
    @property
    def finished(self) -> bool:
        return not self._stages

    def waiting(self) -> str:
        """What the boot waits for, and for how long so far: a progress line."""
        if not self._stages:
            return f"{self.name}: finished"
        stage = self._stages[0]
        waited = self._clock() - self._since
        return (f"{self.name}: after '{self.stage}', waiting for '{stage.name}' "
                f"{waited:.0f} s of {stage.deadline_s:.0f}")

    def step(self) -> bool:
        """Take every stage the text so far reaches; True once all are reached.
        BootFailed for a death string, a deadline passed or a guest gone early."""
        while self._stages:
            stage = self._stages[0]
            if self._take(stage):
                self._reach(stage)
                continue
            self._check_death(stage)
            if self._gone:
                raise BootFailed(f"guest {self.name}: the guest ended before stage "
                                 f"'{stage.name}'", self.stage, self.console_log)
            self._check_deadline(stage)
            return False
        return True

    def _reach(self, stage: Stage) -> None:
        self._stages.pop(0)
        now = self._clock()
        self.stage = stage.name
        self.reached[stage.name] = round(now - self._started, 3)
        self._since = now

    def _take(self, stage: Stage) -> bool:
        if stage.channel == HOST or (stage.name == POWEROFF.name and self._gone):
            return True
        pattern = re.compile(stage.pattern, re.MULTILINE)
        if stage.channel == CONSOLE:
            match = pattern.search(self._console)
            if match:
                self._console = self._console[match.end():]
            return match is not None
        for i, line in enumerate(self._data_lines):
            if pattern.search(line):
                del self._data_lines[:i + 1]
                return True
        return False

    def _check_death(self, stage: Stage) -> None:
        found = DEATH.search(self._console)
        if found is None:
            return
        now = self._clock()
        if self._death_seen_at is None:
            self._death_seen_at = now
        # The pattern stops at the end of its line: text after it ends the line.
        line_done = found.end() < len(self._console)
        if line_done or self._gone or now - self._death_seen_at >= DEATH_LINE_WAIT_S:
            raise BootFailed(f"guest {self.name}: '{found.group(0).strip()}' before stage "
                             f"'{stage.name}'", self.stage, self.console_log)

    def _check_deadline(self, stage: Stage) -> None:
        now = self._clock()
        if now - self._since > stage.deadline_s:
            raise BootFailed(f"guest {self.name}: no stage '{stage.name}' within "
                             f"{stage.deadline_s:.0f} s", self.stage, self.console_log)
        if self._total_s is not None and now - self._started > self._total_s:
            raise BootFailed(f"guest {self.name}: no stage '{stage.name}' within the "
                             f"boot's {self._total_s:.0f} s", self.stage, self.console_log)
