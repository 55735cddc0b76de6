"""The init opens each UART once, with itself and the UART's interrupt on one CPU,
and holds it to the end (fixtures/init, open_uarts). Linux's 8250 driver tests a
port for a transmitter bug at every first open; with its interrupt on another CPU
the test can race its own handler and mark the port buggy, and the backup timer
it then runs paces byte-at-a-time writes to 4.5 a second (an entropy capture got
54 interrupts a second, 2026-12-07). The UART watch's kprobes, armed before those
opens, count the driver's start-ups and the backup timer's ticks: one start-up per
held UART however many times the tasks open the ports after, and no tick."""
from __future__ import annotations

from benchlib.core.profiles import QUIET

# Tasks that each open the data channel twice (their stage marker, their output)
# after the init's first open: on an init that does not hold the port, each of
# those opens is a start-up of its own.
TASKS = ["probe", "settle", "uarts"]


def test_uarts_started_once_and_never_kicked(boot_guest) -> None:
    record = boot_guest(QUIET.one(), tasks=TASKS)
    record.finished_task("uarts")
    seen = record.probe_event("uarts")
    assert seen is not None, f"task 'uarts' reported no counts ({record.data_log})"
    held = [tty for tty in seen["held"].split(",") if tty]
    assert held == ["ttyS0", "ttyS1"], (
        f"the init held {held}, not the console and the data channel ({record.data_log})")
    assert seen["startups"].isdigit() and seen["backup_ticks"].isdigit(), (
        f"the watch's counts are unreadable: {seen} ({record.data_log})")
    assert int(seen["startups"]) == len(held), (
        f"the 8250 driver started a port {seen['startups']} times for {len(held)} held "
        f"UARTs: an open after the init's first one re-ran its THRE test "
        f"({record.data_log})")
    assert int(seen["backup_ticks"]) == 0, (
        f"the 8250 driver's backup timer ticked {seen['backup_ticks']} times: a port was "
        f"marked buggy (UART_BUG_THRE) ({record.data_log})")
