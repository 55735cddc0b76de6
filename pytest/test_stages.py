"""The stage follower on recorded channel text: no hypervisor needed.

A boot's two channels are fed to the follower as they would arrive, in pieces,
with a clock the test moves: it must follow the markers on the data channel
through anything on the console, stop at once on a death string, and name the
stage reached when a boot stalls or the guest ends early."""
from __future__ import annotations

import dataclasses
from typing import Optional

import pytest

from benchlib.core.errors import BootFailed
from benchlib.boot.kreports import reports, stalls
from benchlib.boot.stages import DEATH_LINE_WAIT_S, StageFollower, boot_stages

NOISE = "bench noise: the quick brown fox jumps over the lazy dog 0123456789"
QUICK_S = 5
ALL_STAGES = ["started", "kernel", "init", "task:probe", "task:kmsg", "done", "poweroff"]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def follower(tasks: Optional[list[str]] = None, total_s: Optional[float] = None,
             clock: Optional[Clock] = None) -> StageFollower:
    stages = [dataclasses.replace(s, deadline_s=QUICK_S)
              for s in boot_stages(tasks or ["probe", "kmsg"], QUICK_S)]
    return StageFollower("bench-replay", stages, "console.log", total_s=total_s,
                         clock=clock or Clock())


def lines(*text: str) -> str:
    return "".join(f"{line}\r\n" for line in text)


MARKERS = lines("@@BENCH stage=init uptime=1.2", "@@BENCH stage=task name=probe uptime=1.3",
                "@@BEGIN probe", "@@PROBE t=1", "@@END probe rc=0",
                "@@BENCH stage=task name=kmsg uptime=2.5", "@@BEGIN kmsg", "@@END kmsg rc=0",
                "@@BENCH stage=done uptime=2.6")


def test_stages_follow_markers_on_the_data_channel_through_console_noise() -> None:
    f = follower()
    f.console(lines("[    0.000000] Linux version 6.1.192 (gcc)",
                    *[f"{NOISE} {i}" for i in range(50)], "[    2.000000] random: crng_init 2"))
    f.data(MARKERS)
    assert not f.step()
    assert list(f.reached) == ALL_STAGES[:-1]
    f.guest_gone()
    assert f.step() and list(f.reached) == ALL_STAGES


def test_stages_a_marker_counts_only_once_its_line_is_whole() -> None:
    f = follower()
    f.console("Linux version 6.1.192 (gcc)\n")
    f.data("@@BENCH stage=in")
    f.step()
    assert f.stage == "kernel"
    f.data("it uptime=1.2\r\n")
    f.step()
    assert f.stage == "init"


def test_stages_marker_text_on_the_console_is_not_a_stage() -> None:
    """Only the data channel carries markers: a kernel message (or a user's
    kernel printing one) on the console is not a stage."""
    f = follower()
    f.console(lines("Linux version 6.1.192 (gcc)", "[ 1.0] echo @@BENCH stage=init"))
    f.step()
    assert f.stage == "kernel"


def test_stages_task_names_match_whole() -> None:
    """'task name=probe2' is not task 'probe'."""
    f = follower(["probe"])
    f.console("Linux version 6.1.192 (gcc)\n")
    f.data(lines("@@BENCH stage=init", "@@BENCH stage=task name=probe2 uptime=1"))
    f.step()
    assert f.stage == "init"


def test_stages_panic_ends_the_boot_at_once() -> None:
    f = follower()
    f.console(lines("Linux version 6.1.192 (gcc)",
                    "[    1.0] Kernel panic - not syncing: Attempted to kill init!"))
    with pytest.raises(BootFailed, match=r"'Kernel panic - not syncing: Attempted to kill "
                       r"init!' before stage 'init' \(last stage reached: kernel"):
        f.step()


def test_stages_death_string_in_pieces_is_whole() -> None:
    """A death string whose line is still arriving waits for the rest of it."""
    clock = Clock()
    f = follower(clock=clock)
    f.console("Linux version 6.1.192 (gcc)\n[    1.0] BUG: unable to handle")
    assert not f.step()
    f.console(" page fault for address: 0000\n")
    with pytest.raises(BootFailed, match="'BUG: unable to handle page fault for address: 0000'"):
        f.step()


def test_stages_death_string_cut_short_is_reported_after_a_wait() -> None:
    clock = Clock()
    f = follower(clock=clock)
    f.console("Linux version 6.1.192 (gcc)\n[    1.0] Oops: 0002 [#1")
    assert not f.step()
    clock.now += DEATH_LINE_WAIT_S
    with pytest.raises(BootFailed, match=r"'Oops: 0002 \[#1'"):
        f.step()


def test_stages_stall_names_the_stage_reached() -> None:
    clock = Clock()
    f = follower(clock=clock)
    f.console("Linux version 6.1.192 (gcc)\n")
    f.data(lines("@@BENCH stage=init", "@@BENCH stage=task name=probe"))
    assert not f.step()
    clock.now += QUICK_S + 0.1
    with pytest.raises(BootFailed, match=r"no stage 'task:kmsg' within 5 s \(last stage "
                       r"reached: task:probe"):
        f.step()


def test_stages_whole_boot_deadline() -> None:
    """total_s bounds the boot even when every stage keeps within its own deadline."""
    clock = Clock()
    f = follower(total_s=6, clock=clock)
    clock.now += 4
    f.console("Linux version 6.1.192 (gcc)\n")
    f.step()
    clock.now += 3
    with pytest.raises(BootFailed, match=r"no stage 'init' within the boot's 6 s"):
        f.step()


def test_stages_guest_gone_before_done_is_a_failure() -> None:
    """The channels are files QEMU wrote: once the guest is gone and they are read
    to the end, a stage that is not there never came."""
    f = follower()
    f.console("Linux version 6.1.192 (gcc)\n")
    f.data(lines("@@BENCH stage=init", "@@BENCH stage=task name=probe"))
    f.step()
    f.guest_gone()
    with pytest.raises(BootFailed, match=r"the guest ended before stage 'task:kmsg' "
                       r"\(last stage reached: task:probe"):
        f.step()


def test_stages_last_marker_without_newline_counts_once_the_guest_is_gone() -> None:
    f = follower()
    f.console("Linux version 6.1.192 (gcc)\n")
    f.data(MARKERS.rstrip("\r\n"))
    f.step()
    assert f.stage == "task:kmsg"
    f.guest_gone()
    assert f.step() and f.stage == "poweroff"


def test_stages_image_boot_waits_for_the_userspace() -> None:
    stages = [s.name for s in boot_stages(["firstboot", "kmsg"], 60, userspace_s=300)]
    assert stages[:4] == ["started", "kernel", "userspace", "init"]


def test_stages_say_what_a_boot_waits_for() -> None:
    clock = Clock()
    f = follower(clock=clock)
    f.console("Linux version 6.1.192 (gcc)\n")
    f.step()
    clock.now += 3.2
    assert f.waiting() == "bench-replay: after 'kernel', waiting for 'init' 3 s of 5"


def test_stages_power_down_line_ends_the_boot_before_the_domain_is_gone() -> None:
    f = follower()
    f.console("Linux version 6.1.192 (gcc)\n")
    f.data(MARKERS)
    f.step()
    f.console("[    4.805946] reboot: Power down\r\n")
    assert f.step() and list(f.reached) == ALL_STAGES


def test_stages_an_oops_by_its_die_header_ends_the_boot() -> None:
    """x86's die() names an oops by its cause ('invalid opcode: 0000 [#1]', as a
    Hyper-V guest's #UD in vmbus_setevent would print): a death like 'Oops:'."""
    f = follower()
    f.console(lines("Linux version 6.1.192 (gcc)",
                    "[    1.0] invalid opcode: 0000 [#1] PREEMPT SMP"))
    with pytest.raises(BootFailed, match=r"'invalid opcode: 0000 \[#1\] PREEMPT SMP' before"):
        f.step()


def test_stages_kernel_reports_and_stalls_are_told_apart() -> None:
    """kreports: a die() header is an oops report (a boot fails on it); a soft lockup
    or an RCU stall is a stall, which only a test that asks for progress judges."""
    log = [(1.0, "invalid opcode: 0000 [#1] SMP"), (2.0, "random: crng init done"),
           (3.0, "rcu: INFO: rcu_sched detected stalls on CPUs/tasks:"),
           (4.0, "watchdog: BUG: soft lockup - CPU#0 stuck for 22s! [swapper/0:1]")]
    assert reports(log) == ["oops: [1.000000] invalid opcode: 0000 [#1] SMP"]
    assert stalls(log) == [f"[{t:.6f}] {text}" for t, text in log[2:]]
