"""The console stage machine on recorded transcripts: no hypervisor needed.

A transcript is replayed by a shell in place of `virsh console`; the session must
follow markers through noise and kernel lines, stop at once on a death string,
and name the stage reached when a boot stalls."""
from __future__ import annotations

import shlex
import time
from pathlib import Path

import pytest

from benchlib.console import ConsoleSession, Stage, boot_stages
from benchlib.errors import BootFailed

NOISE = "bench noise: the quick brown fox jumps over the lazy dog 0123456789"
# Short deadlines: a replayed transcript answers at once.
QUICK_S = 5


def replay(tmp_path: Path, text: str, then_sleep_s: float = 0) -> ConsoleSession:
    script = tmp_path / "transcript"
    script.write_text(text)
    command = f"cat {shlex.quote(str(script))}; sleep {then_sleep_s}"
    return ConsoleSession(["sh", "-c", command], "bench-replay", str(tmp_path / "console.log"))


def stages(tasks: list[str]) -> list[Stage]:
    return [Stage(s.name, s.pattern, QUICK_S) for s in boot_stages(tasks, QUICK_S)][1:]


def transcript(*lines: str) -> str:
    return "".join(f"{line}\r\n" for line in lines)


def test_console_follows_markers_through_noise_and_kernel_lines(tmp_path: Path) -> None:
    text = transcript("Linux version 6.1.192 (gcc)", "[    0.100000] random: crng_init 1",
                      "@@BENCH stage=init uptime=1.2", *[f"{NOISE} {i}" for i in range(50)],
                      "@@BENCH stage=task name=probe uptime=1.3",
                      "[    2.000000] random: crng_init 2", *[f"{NOISE} {i}" for i in range(50)],
                      "@@BENCH stage=task name=kmsg uptime=2.5", "@@BENCH stage=done uptime=2.6")
    session = replay(tmp_path, text)
    try:
        session.follow(stages(["probe", "kmsg"]))
    finally:
        session.close()
    assert list(session.reached) == ["kernel", "init", "task:probe", "task:kmsg", "done",
                                     "poweroff"]


def test_console_panic_ends_the_boot_at_once(tmp_path: Path) -> None:
    text = transcript("Linux version 6.1.192 (gcc)", "@@BENCH stage=init uptime=1.2",
                      "[    1.500000] Kernel panic - not syncing: Attempted to kill init!")
    session = replay(tmp_path, text, then_sleep_s=60)
    start = time.monotonic()
    try:
        with pytest.raises(BootFailed, match=r"Kernel panic - not syncing: Attempted to kill "
                                             r"init!' before stage 'task:probe'.*last stage "
                                             r"reached: init"):
            session.follow(stages(["probe"]))
    finally:
        session.close()
    assert time.monotonic() - start < QUICK_S, "the panic was not seen before the deadline"


def test_console_stall_names_the_stage_reached(tmp_path: Path) -> None:
    text = transcript("Linux version 6.1.192 (gcc)", "@@BENCH stage=init uptime=1.2",
                      *[f"{NOISE} {i}" for i in range(10)])
    session = replay(tmp_path, text, then_sleep_s=60)
    try:
        with pytest.raises(BootFailed, match=r"no stage 'task:probe' within 5 s.*last stage "
                                             r"reached: init"):
            session.follow(stages(["probe"]))
    finally:
        session.close()


def test_console_whole_boot_deadline(tmp_path: Path) -> None:
    """total_s bounds the boot even when every stage keeps within its own deadline."""
    text = transcript("Linux version 6.1.192 (gcc)")
    session = replay(tmp_path, text, then_sleep_s=60)
    start = time.monotonic()
    try:
        with pytest.raises(BootFailed, match="no stage 'init'"):
            session.follow(stages(["probe"]), total_s=1)
    finally:
        session.close()
    assert time.monotonic() - start < 3
