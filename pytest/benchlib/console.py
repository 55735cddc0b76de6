"""The guest's serial console as a stream of boot stages.

The console is read through `virsh console` (attached by `virsh create --console`)
under pexpect. Above that transport sits a small state machine: every stage has a
pattern and a deadline; "death strings" (a panic, an oops) end the wait at once.

The kernel writes its log to the same UART as the init's stage markers, and it
does not wait for the end of a line: a printk can land in the middle of a marker
("@@BENCH sta[    1.234567] random: ...\r\nge=init"). So the stream is read in
two views. Death strings are matched on the raw text, where the kernel's lines
are. Stage markers are matched on the text with every kernel line cut out
(a time-stamped line, "[    1.234567] ...", up to its newline), which puts a split
marker back together.
"""
from __future__ import annotations

import dataclasses
import re
import threading
import time
from pathlib import Path
from dataclasses import dataclass
from typing import Optional, TextIO

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
# A kernel console line: the printk time stamp (CONFIG_PRINTK_TIME) to the newline.
KERNEL_LINE = re.compile(r"\[ *\d+\.\d+\] [^\n]*\n")
# The start of a kernel line whose newline has not arrived yet (held back).
PARTIAL_KERNEL_LINE = re.compile(r"\[ *\d*(?:\.\d*)?(?:\] [^\n]*)?\Z")
# How much raw text is kept to match a death string that arrives in pieces.
DEATH_WINDOW_CHARS = 4096
# How much unmatched console text is kept (far more than one stage's noise).
CLEAN_TEXT_CHARS = 1 << 20
# How much of the kernel's lines is kept for a stage that is a kernel message.
KERNEL_TEXT_CHARS = 65536
# The console log is polled this often once the console closed.
LOG_POLL_S = 0.2
# The kernel's last line when the guest powers off: the console log ends there.
POWER_DOWN = re.compile(r"reboot: (Power down|Restarting system)")
# How long a death string's line may take to be complete (its message is cut there).
DEATH_LINE_WAIT_S = 1.0
# One read from the console waits at most this long, so deadlines are kept.
READ_CHUNK = 4096
READ_POLL_S = 0.2


@dataclass(frozen=True)
class Stage:
    name: str
    pattern: str      # regular expression on the console
    deadline_s: float  # from the previous stage
    kernel_line: bool = False  # a kernel message (else a marker the init prints)
    # The console may close instead: the guest powers off right after the marker,
    # and `virsh console` can lose its last bytes when the domain goes away. The
    # data channel decides then (the kmsg dump, the last task, must be whole).
    may_close: bool = False
    # Printed by the guest, so also in QEMU's console log (not virsh's own lines).
    from_guest: bool = True


# An image boot's userspace starting: the kernel runs the initramfs's /init
# (systemd), whose own marker comes only once multi-user.target is reached.
USERSPACE_STAGE = Stage("userspace", r"Run /init as init process", 120, kernel_line=True)


def boot_stages(tasks: list[str], task_deadline_s: float, cap_s: Optional[float] = None,
                deadlines: Optional[dict[str, float]] = None,
                userspace_s: Optional[float] = None) -> list[Stage]:
    """The stages of a bench boot, in order; each task is a stage of its own.

    deadlines gives some tasks their own (longer) deadline; cap_s shortens every
    deadline (a probe boot that must answer quickly). userspace_s: an image boot,
    whose /init is a whole userspace that takes up to this long to reach the
    collector's init marker (fixtures/image/collect)."""
    deadlines = deadlines or {}
    stages = [
        Stage("attached", r"Connected to domain", 60, from_guest=False),
        # Firmware + decompression: a guest on an unusable accelerator stalls here.
        Stage("kernel", r"Linux version \S+", 60, kernel_line=True),
    ]
    if userspace_s is None:
        stages.append(Stage("init", r"@@BENCH stage=init\b", 120))
    else:
        stages += [USERSPACE_STAGE, Stage("init", r"@@BENCH stage=init\b", userspace_s)]
    # A task's deadline runs until the next task starts: it belongs to the task before.
    previous = [None, *tasks]
    stages += [Stage(f"task:{t}", rf"@@BENCH stage=task name={re.escape(t)}\b",
                     deadlines.get(previous[i], task_deadline_s))
               for i, t in enumerate(tasks)]
    stages += [
        Stage("done", r"@@BENCH stage=done\b", deadlines.get(tasks[-1], task_deadline_s)
              if tasks else task_deadline_s, may_close=True),
        Stage("poweroff", "", 60),      # the console closes when the domain is gone
    ]
    if cap_s is not None:
        stages = [dataclasses.replace(s, deadline_s=min(s.deadline_s, cap_s)) for s in stages]
    return stages


# Set when a run is interrupted while boots run in other threads (make run on
# several slots): each session then stops at its next read instead of waiting
# out its stage's deadline on a domain that has been destroyed under it.
INTERRUPTED = threading.Event()


class ConsoleSession:
    """Follow one guest's console through its stages, recording host times."""

    def __init__(self, command: list[str], name: str, console_log: str,
                 transcript: bool = False) -> None:
        """transcript: the console log is ours to write, from what the session
        reads (a host that cannot write into our folders); otherwise the host
        writes it (virtlogd) and the session only reads it after a drop."""
        self.name = name
        self.console_log = console_log
        self.started = time.monotonic()
        self.reached: dict[str, float] = {}
        self.stage = "starting"
        self._transcript: Optional[TextIO] = open(console_log, "w", encoding="utf-8") \
            if transcript else None
        self.child = pexpect.spawn(command[0], command[1:], encoding="utf-8",
                                   codec_errors="replace", timeout=None,
                                   logfile=None)
        self.child.logfile_read = self._transcript
        self._raw = ""        # recent raw text: where death strings are looked for
        self._pending = ""    # raw text not yet sorted into kernel lines and the rest
        self._clean = ""      # the rest: where stage markers are looked for
        self._kernel = ""     # the kernel lines cut out of it
        self._eof = False
        self._markers: list[re.Pattern[str]] = []   # the stage markers matched so far
        self._following_log = False   # the console closed: reading the console log
        self._log_offset = 0

    def follow(self, stages: list[Stage], total_s: Optional[float] = None) -> None:
        """Wait for each stage in turn; total_s bounds the whole boot as well."""
        for stage in stages:
            if total_s is not None:
                left = max(0.0, total_s - (time.monotonic() - self.started))
                stage = dataclasses.replace(stage, deadline_s=min(stage.deadline_s, left))
            self._wait_for(stage)

    def _wait_for(self, stage: Stage) -> None:
        pattern = re.compile(stage.pattern) if stage.pattern else None
        deadline = time.monotonic() + stage.deadline_s
        while True:
            if INTERRUPTED.is_set():
                raise BootFailed(f"guest {self.name}: the run was interrupted before stage "
                                 f"'{stage.name}'", self.stage, self.console_log)
            # The stage first: a marker that made it out came before any death
            # string in the same chunk (after a death, the init prints nothing).
            if pattern is not None and self._take(pattern, stage):
                break
            death = self._death()
            if death is not None:
                raise BootFailed(f"guest {self.name}: '{death}' before stage "
                                 f"'{stage.name}'", self.stage, self.console_log)
            if self._eof:
                if pattern is None:
                    break
                if stage.may_close:
                    return      # not reached, and not a failure: see Stage.may_close
                raise BootFailed(f"guest {self.name}: console closed before stage "
                                 f"'{stage.name}'", self.stage, self.console_log)
            left = deadline - time.monotonic()
            if left <= 0:
                raise BootFailed(f"guest {self.name}: no stage '{stage.name}' within "
                                 f"{stage.deadline_s:.0f} s", self.stage, self.console_log)
            self._read(min(left, READ_POLL_S))
        self.stage = stage.name
        self.reached[stage.name] = round(time.monotonic() - self.started, 3)

    def _take(self, pattern: re.Pattern[str], stage: Stage) -> bool:
        """Consume the text up to the pattern's first match, if there is one: in
        the kernel lines for a kernel message, else in the clean view."""
        if stage.kernel_line:
            match = pattern.search(self._kernel)
            if match:
                self._kernel = self._kernel[match.end():]
                return True
        match = pattern.search(self._clean)
        if match:
            self._clean = self._clean[match.end():]
            if stage.from_guest:
                self._markers.append(pattern)
            return True
        self._clean = self._clean[-CLEAN_TEXT_CHARS:]
        return False

    def _follow_log_instead(self) -> None:
        """The console closed: `virsh console` can drop its stream (or its last
        bytes) while QEMU goes on writing the console log. Go on from the log,
        after the markers already matched, and keep reading it as it grows; it
        ends with the kernel's power-down line. A log that does not hold what the
        stream showed is not trusted: the console is closed then."""
        path = Path(self.console_log)
        data = path.read_bytes() if path.exists() else b""
        text = data.decode("utf-8", errors="replace")
        clean = KERNEL_LINE.sub("", text)
        position = 0
        for marker in self._markers:
            match = marker.search(clean, position)
            if match is None:
                self._eof = True
                return
            position = match.end()
        self._following_log = True
        self._log_offset = len(data)
        self._clean = clean[position:]
        self._pending = ""
        self._raw = text[-DEATH_WINDOW_CHARS:]
        self._eof = POWER_DOWN.search(text) is not None

    def _read_log(self, timeout_s: float) -> str:
        """What the console log gained within timeout_s (the log-following mode)."""
        path = Path(self.console_log)
        deadline = time.monotonic() + timeout_s
        while True:
            size = path.stat().st_size if path.exists() else 0
            if size > self._log_offset or time.monotonic() >= deadline:
                break
            time.sleep(LOG_POLL_S)
        if size <= self._log_offset:
            return ""
        with path.open("rb") as log:
            log.seek(self._log_offset)
            data = log.read()
        self._log_offset += len(data)
        return data.decode("utf-8", errors="replace")

    def _read(self, timeout_s: float) -> None:
        """One chunk from the console (or nothing within timeout_s), sorted."""
        if self._following_log:
            chunk = self._read_log(timeout_s)
            if POWER_DOWN.search(chunk):
                self._eof = True
        else:
            try:
                chunk = self.child.read_nonblocking(READ_CHUNK, timeout=timeout_s)
            except pexpect.TIMEOUT:
                return
            except pexpect.EOF:
                self._follow_log_instead()
                self._sort()
                return
        self._raw = (self._raw + chunk)[-DEATH_WINDOW_CHARS:]
        self._pending += chunk
        self._sort()

    def _sort(self) -> None:
        """Move pending text to the clean view, cutting out complete kernel lines
        and holding back one whose newline is still to come."""
        while True:
            line = KERNEL_LINE.search(self._pending)
            if line is None:
                break
            self._clean += self._pending[:line.start()]
            self._kernel = (self._kernel + line.group(0))[-KERNEL_TEXT_CHARS:]
            self._pending = self._pending[line.end():]
        partial = None if self._eof else PARTIAL_KERNEL_LINE.search(self._pending)
        keep = partial.start() if partial else len(self._pending)
        self._clean += self._pending[:keep]
        self._pending = self._pending[keep:]

    def _death(self) -> Optional[str]:
        """The first death string in the raw text, its line completed if it can be."""
        for regex in DEATH_STRINGS:
            found = re.search(regex, self._raw)
            if found is None:
                continue
            if found.group(0).startswith("error: "):
                return self._virsh_error(found.group(0))
            wait_until = time.monotonic() + DEATH_LINE_WAIT_S
            while not self._eof and "\n" not in self._raw[found.end():] \
                    and time.monotonic() < wait_until:
                self._read(wait_until - time.monotonic())
                found = re.search(regex, self._raw) or found
            return found.group(0).strip()
        return None

    def _virsh_error(self, first_line: str) -> str:
        """virsh died: its "error:" line and the cause it prints after it."""
        rest = ""
        try:
            self.child.expect(pexpect.EOF, timeout=VIRSH_EXIT_WAIT_S)
            rest = self.child.before or ""
        except pexpect.TIMEOUT:
            pass
        tail = self._raw[self._raw.find(first_line) + len(first_line):] + rest
        return " ".join([first_line.strip(), *tail.split()])

    def transcript_tail(self) -> Optional[str]:
        return self._raw or None

    def close(self) -> None:
        """Detach; with `virsh create --autodestroy` this also destroys the domain."""
        if self.child.isalive():
            self.child.terminate(force=True)
        self.child.close(force=True)
        if self._transcript is not None:
            self._transcript.close()
