"""The console stage machine on recorded transcripts: no hypervisor needed.

A transcript is replayed by a shell in place of `virsh console`; the session must
follow markers through noise and kernel lines, stop at once on a death string,
and name the stage reached when a boot stalls."""
from __future__ import annotations

import dataclasses
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


def replay_chunks(tmp_path: Path, chunks: list[str], gap_s: float = 0.3,
                  then_sleep_s: float = 0) -> ConsoleSession:
    """Replay text in pieces, as a UART delivers it: a line may end in a later read."""
    parts = []
    for i, chunk in enumerate(chunks):
        part = tmp_path / f"chunk{i}"
        part.write_text(chunk)
        parts.append(f"cat {shlex.quote(str(part))}; sleep {gap_s}")
    command = "; ".join([*parts, f"sleep {then_sleep_s}"])
    return ConsoleSession(["sh", "-c", command], "bench-replay", str(tmp_path / "console.log"))


def follow(session: ConsoleSession, tasks: list[str]) -> list[str]:
    try:
        session.follow(stages(tasks))
    finally:
        session.close()
    return list(session.reached)


ALL_STAGES = ["kernel", "init", "task:probe", "task:kmsg", "done", "poweroff"]


def assert_fails(session: ConsoleSession, tasks: list[str], message: str) -> None:
    """Following the session must fail with a BootFailed that matches message."""
    try:
        with pytest.raises(BootFailed, match=message):
            session.follow(stages(tasks))
    finally:
        session.close()


def stages(tasks: list[str]) -> list[Stage]:
    return [dataclasses.replace(s, deadline_s=QUICK_S) for s in boot_stages(tasks, QUICK_S)][1:]


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
    assert_fails(replay(tmp_path, text, then_sleep_s=60), ["probe"],
                 r"no stage 'task:probe' within 5 s.*last stage reached: init")


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


def test_console_marker_split_by_a_kernel_line(tmp_path: Path) -> None:
    """A printk in the middle of a marker (the kernel does not wait for the end of
    the init's line) must not cost the stage."""
    text = ("[    0.000000] Linux version 6.1.192 (gcc)\r\n"
            "@@BENCH stage=init uptime=1.2\r\n"
            "@@BENCH sta[    1.300000] random: crng_init 2\r\nge=task name=probe uptime=1.3\r\n"
            "@@BENCH stage=task name=k[    2.000000] random: crng_init 3\r\nmsg uptime=2.5\r\n"
            "@@BENCH stage=done uptime=2.6\r\n")
    assert follow(replay(tmp_path, text), ["probe", "kmsg"]) == ALL_STAGES


def test_console_marker_and_kernel_line_split_across_reads(tmp_path: Path) -> None:
    """The kernel line inside a marker arrives in pieces, in separate reads."""
    chunks = ["[    0.000000] Linux ver", "sion 6.1.192 (gcc)\r\n@@BENCH stage=in",
              "it uptime=1.2\r\n@@BENCH stage=task n[    1.3", "00000] random: crng_",
              "init 2\r\name=probe uptime=1.3\r\n@@BENCH stage=task name=kmsg uptime=2.5\r\n",
              "@@BENCH stage=done uptime=2.6\r\n"]
    assert follow(replay_chunks(tmp_path, chunks), ["probe", "kmsg"]) == ALL_STAGES


def test_console_marker_inside_a_kernel_line_is_not_a_stage(tmp_path: Path) -> None:
    """Only the init's own lines are markers: a kernel message quoting one is not."""
    text = transcript("[    0.000000] Linux version 6.1.192 (gcc)",
                      "@@BENCH stage=init uptime=1.2",
                      "[    1.500000] audit: comm=\"@@BENCH stage=task name=probe\"")
    assert_fails(replay(tmp_path, text, then_sleep_s=60), ["probe"],
                 r"no stage 'task:probe' within 5 s.*last stage reached: init")


def test_console_death_string_in_pieces_is_whole(tmp_path: Path) -> None:
    """A death string that arrives in two reads is reported with its whole line."""
    chunks = ["[    0.000000] Linux version 6.1.192 (gcc)\r\n@@BENCH stage=init uptime=1.2\r\n"
              "[    1.500000] BUG: kernel NULL pointer", " dereference, address: 0000000000000008\r\n"]
    session = replay_chunks(tmp_path, chunks, then_sleep_s=60)
    try:
        with pytest.raises(BootFailed, match=r"'BUG: kernel NULL pointer dereference, address: "
                                             r"0000000000000008' before stage 'task:probe'"):
            session.follow(stages(["probe"]))
    finally:
        session.close()


def test_console_closed_early_goes_on_from_the_console_log(tmp_path: Path) -> None:
    """virsh console lost the guest's last lines, which QEMU wrote to the console
    log: the stages are found there, after the markers the stream already showed."""
    head = ["[    0.000000] Linux version 6.1.192 (gcc)", "@@BENCH stage=init uptime=1.2",
            "@@BENCH stage=task name=probe uptime=1.3"]
    tail = ["[    2.000000] random: crng init done", "@@BENCH stage=task name=kmsg uptime=2",
            "@@BENCH stage=done uptime=2.1", "[    2.200000] reboot: Power down"]
    (tmp_path / "console.log").write_text(transcript(*head, *tail))
    assert follow(replay(tmp_path, transcript(*head)), ["probe", "kmsg"]) == ALL_STAGES
    # A log that does not hold what the stream showed is not trusted.
    (tmp_path / "console.log").write_text(transcript(*head[:2], *tail))
    with pytest.raises(BootFailed, match="console closed before stage 'task:kmsg'"):
        follow(replay(tmp_path, transcript(*head)), ["probe", "kmsg"])


def test_console_may_close_after_the_last_task_only(tmp_path: Path) -> None:
    """The guest powers off right after its 'done' marker, and virsh console can lose
    those last bytes: a console that closes after the last task's marker is not a
    failure (the data channel's kmsg dump decides), one that closes earlier is."""
    head = ["[    0.000000] Linux version 6.1.192 (gcc)", "@@BENCH stage=init uptime=1.2",
            "@@BENCH stage=task name=probe uptime=1.3"]
    reached = follow(replay(tmp_path, transcript(*head, "@@BENCH stage=task name=kmsg uptime=2")),
                     ["probe", "kmsg"])
    assert reached == ["kernel", "init", "task:probe", "task:kmsg", "poweroff"]
    session = replay(tmp_path, transcript(*head))
    with pytest.raises(BootFailed, match="console closed before stage 'task:kmsg'"):
        follow(session, ["probe", "kmsg"])


def test_console_log_fallback_ignores_virsh_own_lines(tmp_path: Path) -> None:
    """virsh's "Connected to domain" is not in QEMU's console log: going on from the
    log aligns on the guest's own markers only."""
    head = ["Connected to domain 'bench-replay'", "[    0.000000] Linux version 6.1.192 (gcc)"]
    rest = ["@@BENCH stage=init uptime=1.2", "@@BENCH stage=task name=probe uptime=1.3",
            "@@BENCH stage=task name=kmsg uptime=2", "@@BENCH stage=done uptime=2.1",
            "[    2.200000] reboot: Power down"]
    (tmp_path / "console.log").write_text(transcript(*head[1:], *rest))
    session = replay(tmp_path, transcript(*head))
    try:
        session.follow([dataclasses.replace(s, deadline_s=QUICK_S)
                        for s in boot_stages(["probe", "kmsg"], QUICK_S)])
    finally:
        session.close()
    assert list(session.reached) == ["attached", *ALL_STAGES]
