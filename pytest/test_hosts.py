"""The matrix spread over several libvirt hosts.

Two endpoints on this machine stand for a pool of hosts: qemu:///system (which
shares our files) and a second daemon that the module starts on a socket of its
own (scripts/extra-libvirtd.sh), which gets the kernel and initramfs uploaded as
storage volumes and its serial ports read through libvirt streams, as a remote
host would. Both run on the same two cores: what is checked is semantics (same
verdicts, every boot on a named host, slots never overbooked), never speed.
"""
from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Iterator
from unittest import mock

import pytest

from benchlib.boot import hosts, libvirtconn
from benchlib.core import paths
from benchlib.report import report
from benchlib.core.errors import BenchError
from benchlib.boot.hosts import DEFAULT_URI, HostPool
from benchlib.core.profiles import QUIET
from benchlib.core.tasks import SETTLED_STAGES
from benchlib.core.bootrecord import BootRecord

EXTRA_DAEMON = paths.REPO / "scripts" / "extra-libvirtd.sh"
# A child run or pytest gets this long (a handful of boots, two at a time).
CHILD_TIMEOUT_S = 900
# One cell whose budget every boot meets and one that none can: the verdicts to
# compare carry both outcomes.
BUDGETS = "[ready_s]\ntcg-virtio-rng = 120.0\ntcg-quiet = 0.001\n"
MATRIX = ["--variant", "stock", "--profile", "tcg-virtio-rng", "--profile", "tcg-quiet",
          "--boots", "2", "--no-entropy", "--no-clones", "--no-build", "--accel", "tcg", "--cap", "60",
          "--jobs-per-host", "1"]


@pytest.fixture(scope="module")
def second_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The URI of a second libvirt daemon, started for this module and stopped after."""
    directory = tmp_path_factory.mktemp("extra-libvirtd")
    started = subprocess.run([str(EXTRA_DAEMON), "start", str(directory)],
                             capture_output=True, text=True, timeout=120)
    if started.returncode != 0:
        pytest.fail(f"the second libvirt daemon did not start: {started.stderr.strip()}")
    try:
        yield started.stdout.strip().splitlines()[-1]
    finally:
        subprocess.run([str(EXTRA_DAEMON), "stop", str(directory)], timeout=120)


def child(args: list[str], results: Path, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=CHILD_TIMEOUT_S,
                          env={**os.environ, "RESULTS_DIR": str(results)})


def matrix_report(uris: list[str], tmp: Path) -> dict:
    budgets = tmp / "budgets.toml"
    budgets.write_text(BUDGETS)
    results = tmp / "results"
    args = ["-m", "benchlib.commands.run", *MATRIX, "--budget", str(budgets)]
    for uri in uris:
        args += ["--libvirt-uri", uri]
    result = child(args, results, paths.REPO)
    reports = sorted(results.glob("*/report.json"))
    assert reports, f"no report: {result.stdout[-2000:]}{result.stderr[-2000:]}"
    found = json.loads(reports[-1].read_text())
    # Its paths are relative to its folder.
    found["stdout"], found["exit"], found["dir"] = result.stdout, result.returncode, \
        reports[-1].parent
    return found


def verdict_kinds(found: dict) -> dict[str, str]:
    """profile × variant -> the kind of verdict ('ok', 'over budget'...), without
    the numbers, which differ from run to run."""
    return {f"{c['profile']} × {c['variant']}": c["verdict"].split(":")[0].split(" (")[0]
            for c in found["cells"]}


@pytest.fixture(scope="module")
def one_and_two(second_host: str, tmp_path_factory: pytest.TempPathFactory
                ) -> tuple[dict, dict]:
    one = matrix_report([DEFAULT_URI], tmp_path_factory.mktemp("one-host"))
    two = matrix_report([DEFAULT_URI, second_host], tmp_path_factory.mktemp("two-hosts"))
    return one, two


def measured(found: dict) -> dict[str, list[tuple]]:
    """profile × variant -> what each boot measured, as kinds, not numbers: how its
    final milestone came (reached, cap), and which figures it gave at all (ready,
    interrupts to ready from the trace, the probe's blocking wait, its first
    GRND_NONBLOCK success), sorted: boots of a cell are alike."""
    figures = ("ready_printk_s", "irqs_to_ready", "blocking_wait_s", "first_nonblock_ok_printk_s")
    return {f"{c['profile']} × {c['variant']}": sorted(
        (b["final_milestone_outcome"], *(b[f] is not None for f in figures), b["failed_tasks"])
        for b in c["boots"]) for c in found["cells"]}


def test_hosts_two_endpoints_judge_and_measure_alike(one_and_two: tuple[dict, dict]) -> None:
    """The budgets (120 s, which every boot meets, and 0.001 s, which none can) force
    one cell ok and one over budget on any host: equal verdicts show that each
    run judged its boots by the same budgets and reported both outcomes, not that
    two hosts agree on a close call (a timing claim, for reports). What is compared
    boot by boot is what each measured: a boot on the second host, uploaded and
    streamed, gives every figure a local boot gives."""
    one, two = one_and_two
    kinds = verdict_kinds(one)
    assert set(kinds.values()) >= {"ok", "over budget"}, (
        f"the single-host run did not give both outcomes to compare: {kinds}")
    assert verdict_kinds(two) == kinds
    assert one["exit"] == two["exit"] == 1      # the over-budget cell fails both runs
    local = measured(one)
    assert all(all(boot[1:5] == (True,) * 4 for boot in boots) for boots in local.values()), (
        f"a local boot lacks a figure, nothing to compare: {local}")
    assert measured(two) == local


def test_hosts_report_names_the_host_of_each_boot(one_and_two: tuple[dict, dict],
                                                  second_host: str) -> None:
    _, two = one_and_two
    boots = [b for c in two["cells"] for b in c["boots"]]
    assert {b["host"] for b in boots} == {DEFAULT_URI, second_host}, (
        f"the boots did not use both hosts: {[b['host'] for b in boots]}")
    assert two["meta"]["hosts"] == [DEFAULT_URI, second_host]
    # Labelled in the order of their first boot, which the slots decide: either may be h1.
    named = {uri: re.search(rf"\bh\d+ = {re.escape(uri)}$", two["stdout"], re.M)
             for uri in (DEFAULT_URI, second_host)}
    assert all(named.values()), f"the table does not name both hosts: {named}"


def test_hosts_remote_boot_uploads_and_streams(one_and_two: tuple[dict, dict],
                                               second_host: str) -> None:
    """A boot on the second daemon booted uploaded volumes, and its console and data
    logs, written here from libvirt streams, are whole."""
    _, two = one_and_two
    remote = [b for c in two["cells"] for b in c["boots"] if b["host"] == second_host]
    assert remote, "no boot ran on the second host"
    for boot in remote:
        xml = (two["dir"] / boot["domain_xml"]).read_text()
        assert "type=\"file\"" not in xml and "bench-kernel-" in xml, (
            f"{boot['name']}: not booted from uploaded volumes with streamed serials")
        data = (two["dir"] / boot["data_log"]).read_text()
        assert "@@END kmsg rc=0" in data and "@@BENCH stage=done" in data, (
            f"{boot['name']}: the streamed data log is not whole")
        assert "Linux version" in (two["dir"] / boot["console_log"]).read_text(), (
            f"{boot['name']}: the streamed console log is not whole")


def test_hosts_xdist_workers_share_the_hosts_without_colliding(second_host: str,
                                                               tmp_path: Path) -> None:
    """Two pytest-xdist workers, two hosts, one slot each: every boot ran on one of
    them, both hosts were used, and no two boots ever overlapped on a host."""
    budgets = tmp_path / "budgets.toml"
    budgets.write_text("[ready_s]\ntcg-virtio-rng = 120.0\ntcg-quiet = 120.0\n")
    results = tmp_path / "results"
    result = child(["-m", "pytest", "-c", "tox.ini", "--rootdir=.", "-q", "-p", "no:cacheprovider",
                    "-n", "2", "--accel", "tcg", "--boots", "2", "--budget", str(budgets),
                    "--libvirt-uri", DEFAULT_URI, "--libvirt-uri", second_host,
                    "-k", "test_ready_within_budget and stock", "pytest/test_budgets.py"],
                   results, paths.REPO)
    output = result.stdout[-3000:] + result.stderr[-2000:]
    assert result.returncode == 0 and "2 passed" in result.stdout, output
    records = [json.loads(p.read_text()) for p in results.glob("*/*/record.json")]
    assert len(records) >= 4, f"{len(records)} boots recorded: {output}"
    assert {r["host"] for r in records} == {DEFAULT_URI, second_host}, output
    for uri in (DEFAULT_URI, second_host):
        spans = sorted((r["started_at"], r["ended_at"], r["name"])
                       for r in records if r["host"] == uri)
        for (_, end, first), (start, _, second) in zip(spans, spans[1:]):
            assert start >= end, f"{first} and {second} overlapped on {uri}"


# ---- The slots alone: no boot ---------------------------------------------------

@pytest.fixture
def local_pool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[HostPool]:
    """The local host with two slots, its locks in a folder of the test's own."""
    monkeypatch.setattr(hosts, "SLOT_DIR", tmp_path / "slots")
    pool = HostPool([DEFAULT_URI], jobs_per_host=2)
    yield pool
    pool.close()


def test_hosts_boots_beside_another_are_marked_shared(local_pool: HostPool) -> None:
    with local_pool.lease() as first:
        assert not first.shared
        with local_pool.lease() as second:
            assert second.shared and second.slot != first.slot
            time.sleep(3 * hosts.NEIGHBOUR_POLL_S)
        assert first.shared, "a boot that ran inside this one's time was not seen"
    with local_pool.lease() as alone:
        assert not alone.shared


def test_hosts_a_full_host_makes_the_next_boot_wait(local_pool: HostPool) -> None:
    taken = threading.Event()

    def third() -> None:
        with local_pool.lease():
            taken.set()

    with local_pool.lease(), local_pool.lease():
        waiting = threading.Thread(target=third)
        waiting.start()
        time.sleep(5 * hosts.SLOT_POLL_S)
        assert not taken.is_set(), "a third boot got a slot on a host with two"
    waiting.join(10)
    assert taken.is_set(), "the waiting boot never got the freed slot"


def test_hosts_auto_slots_are_one_booting_and_two_waiting_per_core() -> None:
    assert hosts.jobs_for(2, 24 * 1024)[0] == 5
    assert hosts.jobs_for(1, 24 * 1024)[0] == 3
    jobs, why = hosts.jobs_for(8, 4 * 1024)
    assert jobs == 4 and "4096 MiB of memory" in why, why      # the memory bounds it
    assert hosts.jobs_for(2, 512)[0] == 1


def test_hosts_a_second_guest_boots_once_the_first_has_settled(local_pool: HostPool) -> None:
    booting = threading.Event()
    with local_pool.lease() as first, local_pool.lease() as second:
        first.booting()

        def boot_second() -> None:
            second.booting()
            booting.set()

        waiting = threading.Thread(target=boot_second)
        waiting.start()
        time.sleep(5 * hosts.SLOT_POLL_S)
        assert not booting.is_set(), "two guests of one host booted at once"
        first.settled()
        waiting.join(10)
        assert booting.is_set(), "the second guest never booted after the first settled"


def test_hosts_a_paused_guest_goes_before_a_new_boot(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A guest paused for its entropy capture takes the busy lock before a boot that
    was waiting for it first (else it may stay paused while boots pass it by)."""
    monkeypatch.setattr(hosts, "SLOT_DIR", tmp_path / "slots")
    pool = HostPool([DEFAULT_URI], jobs_per_host=3)
    order: list[str] = []
    try:
        with pool.lease() as first, pool.lease() as new, pool.lease() as paused:
            first.booting()

            def take_paused() -> None:
                paused.booting(paused=True)
                order.append("paused")
                time.sleep(3 * hosts.SLOT_POLL_S)
                paused.settled()

            waiting = threading.Thread(target=take_paused)
            waiting.start()
            time.sleep(3 * hosts.SLOT_POLL_S)
            first.settled()
            new.booting()           # at once: the paused guest is between two polls
            order.append("new boot")
            new.settled()
            waiting.join(10)
    finally:
        pool.close()
    assert order == ["paused", "new boot"], order


class SettlingHost:
    """A host whose cores are busy for its first `busy_windows` measurements (1.5
    cores), then idle: what virNodeGetCPUStats would count, in ns."""

    def __init__(self, busy_windows: int, window_s: float) -> None:
        self.calls = 0
        self.busy_ns = 0
        self.busy_windows, self.window_ns = busy_windows, int(window_s * 1e9)

    def getCPUStats(self, _cpu: int) -> dict[str, int]:
        self.calls += 1
        if self.calls % 2 == 0 and self.calls // 2 <= self.busy_windows:
            self.busy_ns += int(1.5 * self.window_ns)
        return {"kernel": 0, "user": self.busy_ns, "idle": 0, "iowait": 0}


def test_hosts_throughput_waits_for_a_settling_host() -> None:
    host = SettlingHost(busy_windows=3, window_s=0.01)
    quiet, busy = hosts.wait_until_quiet(host, window_s=0.01, wait_s=5)
    assert quiet and busy == 0 and host.calls == 8, (quiet, busy, host.calls)
    busy_host = SettlingHost(busy_windows=10 ** 6, window_s=0.01)
    quiet, busy = hosts.wait_until_quiet(busy_host, window_s=0.01, wait_s=0.2)
    assert not quiet and busy > 1.4, (quiet, busy)


# Two guests that idle in their until task: a pattern no kernel log line matches
# (dmesg starts each with its time stamp; a plain word would match the command
# line, which holds the pattern), so each waits its cap (seconds) and then ends.
# Long enough for the second to boot inside it.
NEVER_PRINTED = "^never"
IDLE_S = 20
# The two records' clocks are the host's (time.time() in one process); what is
# compared is an order, with this much slack for the follower's poll.
ORDER_SLACK_S = 0.5


def test_hosts_guests_boot_one_at_a_time_and_wait_together(boot_guest,
                                                            local_pool: HostPool) -> None:
    """Two boots on a host with two slots, started together: the second guest
    starts only once the first's probe began (it only waits from then on), and
    runs while the first still waits: the waits overlap, the boots do not."""
    records: list[BootRecord] = []
    errors: list[BaseException] = []

    def one() -> None:
        try:
            records.append(boot_guest(QUIET.one(), tasks=["probe", "until"], pool=local_pool,
                                      params={"until": NEVER_PRINTED,
                                              "until_cap": str(IDLE_S)}))
        except BaseException as exc:    # the thread's failure, raised by the test
            errors.append(exc)

    threads = [threading.Thread(target=one) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(CHILD_TIMEOUT_S)
    assert not errors, errors
    first, second = sorted(records, key=lambda r: r.started_at)
    settled_at = first.started_at + min(first.stages[s] for s in SETTLED_STAGES)
    assert second.started_at >= settled_at - ORDER_SLACK_S, (
        f"{second.name} started {settled_at - second.started_at:.1f} s before "
        f"{first.name} settled: two guests booted at once")
    assert second.started_at < first.ended_at - IDLE_S / 2, (
        f"{second.name} did not boot while {first.name} waited")
    assert first.shared_host and second.shared_host


def test_hosts_shared_timings_are_marked_in_the_table() -> None:
    record = BootRecord(name="b", profile="tcg-quiet", variant="stock", kernel="k", accel="tcg",
                        cmdline="", console_log=Path("c"), data_log=Path("d"),
                        messages=[(1.5, "random: crng init done")],
                        host=DEFAULT_URI, shared_host=True)
    cell = report.Cell("tcg-quiet", "stock", records=[record])
    text = report.table([cell])
    assert f"1.500 [1.500-1.500] 1/1{report.SHARED_MARK}" in text, text
    assert report.SHARED_NOTE in " ".join(text.split()), text     # wrapped to the width
    record.shared_host = False
    assert report.SHARED_NOTE not in " ".join(report.table([cell]).split())


def test_hosts_auto_boots_one_at_a_time_on_a_streamed_host(second_host: str) -> None:
    pool = HostPool([DEFAULT_URI, second_host], jobs_per_host=hosts.AUTO)
    try:
        local, streamed = pool.hosts
        assert local.jobs == hosts.local_auto_jobs()[0] and streamed.jobs == 1, (
            local.jobs_why, streamed.jobs_why)
        assert streamed.jobs_why == hosts.STREAMED_AUTO_WHY
    finally:
        pool.close()


def test_hosts_unknown_pool_is_named(second_host: str) -> None:
    with pytest.raises(BenchError, match="has no storage pool 'no-such-pool'"):
        HostPool([second_host], pool="no-such-pool")


def test_hosts_a_daemon_that_never_answers_is_named(tmp_path: Path) -> None:
    """A socket that accepts and never answers, as a hung libvirtd does: the open
    gives up at its deadline with the URI named, and the pool that opens it too."""
    path = tmp_path / "silent.sock"
    uri = f"qemu+unix:///system?socket={path}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as silent:
        silent.bind(str(path))
        silent.listen()
        started = time.monotonic()
        with pytest.raises(BenchError, match=f"libvirt at '{re.escape(uri)}' did not "
                                             r"answer within 2 s"):
            libvirtconn.connect(uri, timeout_s=2)
        assert time.monotonic() - started < 30, "the open waited far past its deadline"
        with mock.patch.object(libvirtconn, "CONNECT_TIMEOUT_S", 2), \
                pytest.raises(BenchError, match="did not answer"):
            HostPool([uri])
