"""Harness self-tests of the LRNG checks' counting rules: no hypervisor needed."""
from __future__ import annotations

import pytest

from benchlib.checks.credit import check_lrng_credit, window_hist
from benchlib.checks.lrngcheck import (NODEREAD_BYTES, assert_each_entry_credited_or_stuck,
                                       assert_output_from_chacha20, assert_reads_served_by_own_node,
                                       interrupts_used, seedings, windows)
from benchlib.testing.synthetic import lrngnoderead_record
from benchlib.checks.trace import TraceIncomplete, kprobe_misses, parse_trace
from test_harness import TRACE_HEAD, function_line, trace_line



def profile_line(event: str, hits: int, missed: int) -> str:
    """A kprobe_profile line as 6.1 prints it."""
    return f"  {event:<44} {hits:>15} {missed:>15}"


def pool_fill(cpu: int, t0: float, first: int, count: int) -> list[str]:
    """`count` interrupts on `cpu`, each entering and credited, the series' pool
    count running from `first`; each kprobe event with its function tracer twin,
    as a trace from boot has them."""
    lines = []
    for i in range(count):
        t = t0 + i * 1e-4
        lines += [trace_line(cpu, t, "air", "irq=4"),
                  function_line(cpu, t + 1e-6, "add_interrupt_randomness"),
                  trace_line(cpu, t + 1e-5, "icred", f"events={first + i} num=256 den=288"),
                  function_line(cpu, t + 1.1e-5, "lrng_pool_add_credited")]
    return lines


def boot_fill(cpu: int, t0: float, count: int) -> list[str]:
    """`count` interrupts on `cpu` that only the function tracer saw (before the
    kprobes existed): each entering and credited, no arguments."""
    lines = []
    for i in range(count):
        t = t0 + i * 1e-4
        lines += [function_line(cpu, t, "add_interrupt_randomness"),
                  function_line(cpu, t + 1e-5, "lrng_pool_add_credited")]
    return lines


def test_harness_lrng_interrupts_during_a_pool_read_count_for_the_next() -> None:
    """Two interrupts credited on CPU 1 while CPU 0 reads the pool for the initial
    seed stay in the pool (the series took its count on entry): the trace counts
    them in the next window, where the series' own count agrees."""
    lines = boot_fill(1, 1.0, 40)                        # 40 in the pool, 32 used
    lines += [trace_line(0, 1.1, "getpool", "")]
    lines += pool_fill(1, 1.101, 1, 2)                   # in flight: the series restarts
    lines += [trace_line(0, 1.11, "cred", "bits=28"), trace_line(0, 1.111, "stage", "stage=1")]
    lines += pool_fill(1, 2.0, 11, 118)                  # 8 + 2 carried, then 118 more
    lines += [trace_line(0, 3.0, "getpool", ""), trace_line(0, 3.01, "cred", "bits=113"),
              trace_line(0, 3.011, "stage", "stage=2")]
    initial, minimal = windows(parse_trace([TRACE_HEAD.format(len(lines), len(lines))] + lines))
    assert (initial.stage, initial.counted, initial.pool, initial.used) == (1, 40, None, 32)
    assert (minimal.stage, minimal.carried, minimal.counted, minimal.pool) == (2, 10, 128, 128)


def first_read(t: float, bits: int) -> list[str]:
    """A pool read the kprobes saw, its function tracer twin, and its stage."""
    return [trace_line(0, t, "getpool", ""), function_line(0, t + 1e-5, "lrng_get_pool"),
            trace_line(0, t + 2e-5, "cred", f"bits={bits}")]


def test_harness_lrng_a_trace_from_boot_counts_the_first_window_itself() -> None:
    """The function tracer saw 26 interrupts from boot; the kprobes, from fs_initcall,
    7 more: the trace counts 33 where the series says 33, and a read that took
    nothing (the DRBG's first seeding, below a word) leaves all 26 for the next."""
    lines = boot_fill(1, 0.6, 26)
    lines += first_read(2.0, 0)
    lines += pool_fill(0, 2.6, 27, 7)
    lines += first_read(2.7, 28) + [trace_line(0, 2.71, "stage", "stage=1")]
    events = parse_trace([TRACE_HEAD.format(len(lines), len(lines))] + lines)
    (initial,) = windows(events)
    assert (initial.carried, initial.counted, initial.pool, initial.used) == (26, 33, 33, 32)
    # Without the function tracer's calls the first window is not the trace's to count.
    kprobes_only = [e for e in events if e.t >= 2.0]
    assert windows(kprobes_only)[0].counted is None


def test_harness_lrng_a_read_only_the_function_tracer_saw_makes_the_count_unknown() -> None:
    """A read of the pool before the kprobes existed took what the trace cannot
    know: the window after it is not counted."""
    lines = boot_fill(1, 0.6, 40) + [function_line(0, 0.7, "lrng_get_pool")]
    lines += pool_fill(0, 2.6, 9, 32)
    lines += first_read(2.7, 28) + [trace_line(0, 2.71, "stage", "stage=1")]
    (initial,) = windows(parse_trace([TRACE_HEAD.format(len(lines), len(lines))] + lines))
    assert initial.counted is None


def test_harness_lrng_a_credit_the_kprobes_missed_is_counted_and_unknown_to_the_series() -> None:
    """An interrupt whose kprobes missed their hit (inside another kprobe's handler)
    is in the trace as the function tracer's calls: the trace counts it, and the
    series' count at the read is unknown (its last fetch is stale), not compared."""
    lines = boot_fill(1, 0.6, 30)
    lines += pool_fill(0, 2.6, 31, 1)
    lines += boot_fill(0, 2.65, 1)                       # the missed hit
    lines += first_read(2.7, 28) + [trace_line(0, 2.71, "stage", "stage=1")]
    (initial,) = windows(parse_trace([TRACE_HEAD.format(len(lines), len(lines))] + lines))
    assert (initial.counted, initial.pool) == (32, None)


@pytest.mark.parametrize("bits, num, den, used", [
    (28, 256, 288, 32), (113, 256, 288, 128), (256, 256, 288, 288),
    # test-lrng-fullbit credits a full bit: a read of 32 bits took 32 interrupts
    (32, 256, 256, 32), (128, 256, 256, 128), (256, 256, 256, 256),
])
def test_harness_lrng_interrupts_a_read_took_follow_the_credit_rate(bits: int, num: int,
                                                                    den: int, used: int) -> None:
    assert interrupts_used(bits, num, den) == used


def test_harness_lrng_missed_kprobe_hits_widen_the_bounds_by_their_number() -> None:
    profile = [profile_line("air", 1200, 2), profile_line("cred", 1198, 0)]
    assert kprobe_misses({"kprobe_profile": profile}) == {"air": 2, "cred": 0}
    with pytest.raises(TraceIncomplete, match="missed hits are unknown"):
        kprobe_misses({})
    # Two entries the trace lacks: two outcomes without an interrupt.
    events = parse_trace([TRACE_HEAD.format(3, 3), trace_line(0, 1.0, "icred", "events=1"),
                          trace_line(0, 1.1, "icred", "events=2"),
                          trace_line(0, 1.2, "air", "irq=4")])
    assert_each_entry_credited_or_stuck(events, missed=2)
    with pytest.raises(AssertionError, match="without an interrupt entering"):
        assert_each_entry_credited_or_stuck(events, missed=1)


def lrng_credit_sections(entered: int, credited: int, missed: int) -> dict[str, list[str]]:
    return {"hist air": [f"{{ caller: x, irq: 4 }} hitcount: {entered}"],
            "hist cred": [f"{{ num: 256, den: 288 }} hitcount: {credited}"],
            "kprobe_profile": [profile_line("air", entered, missed),
                               profile_line("cred", credited, 0)]}


@pytest.mark.parametrize("entered, credited, missed, error", [
    (1000, 1000, 0, None),
    (1000, 1003, 0, None),       # three entered while the window opened or closed
    (1000, 990, 10, None),       # ten hits the kprobes missed
    (1000, 999, 0, "the rest went nowhere"),   # one entered and was not credited
    (1000, 990, 8, "the rest went nowhere"),   # misses explain eight, not ten
    (1000, 2000, 0, "credited more than once"),
])
def test_harness_lrng_credit_bounds(entered: int, credited: int, missed: int,
                                    error: str | None) -> None:
    sections = lrng_credit_sections(entered, credited, missed)
    if error is None:
        check_lrng_credit(sections)
    else:
        with pytest.raises(AssertionError, match=error):
            check_lrng_credit(sections)


def test_harness_credit_window_is_the_hists_difference() -> None:
    """A window's hits are each key's growth between the two snapshots; keys that
    did not grow are not in it, keys new at the end count whole."""
    sections = {"hist_before air": ["{ caller: vmbus_isr+0x5, irq: 243 } hitcount: 10",
                                    "{ caller: x+0x1, irq: 4 } hitcount: 7"],
                "hist air": ["{ caller: vmbus_isr+0x5, irq: 243 } hitcount: 25",
                             "{ caller: x+0x1, irq: 4 } hitcount: 7",
                             "{ caller: y+0x2, irq: 3 } hitcount: 2"]}
    assert window_hist(sections, "air") == [
        ({"caller": "vmbus_isr+0x5", "irq": "243"}, 15), ({"caller": "y+0x2", "irq": "3"}, 2)]
    assert window_hist(sections, "stuck", required=False) == []
    with pytest.raises(KeyError, match="no 'hist cred' section"):
        window_hist(sections, "cred")


def task_line(task: str, cpu: int, t: float, event: str, args: str) -> str:
    """A trace line of a named task ("comm-pid"), not of the idle task."""
    return trace_line(cpu, t, event, args).replace("<idle>-0", task, 1)


def test_harness_lrng_a_seeding_is_one_tasks_read_then_injection() -> None:
    """getpool -> cred -> inject of one pid make one seeding, with the CPU RNG words
    fetched at getpool; another task's injection in between (the hwrng thread's) is
    not part of it, nor is an injection with no pool read before it."""
    words = "arch0=0x1 arch1=0x2 arch2=0x3 arch3=0x4"
    lines = [task_line("kworker/0:1-12", 0, 1.0, "getpool", words),
             task_line("hwrng-40", 1, 1.0001, "inject", "len=64 bits=512"),
             task_line("kworker/0:1-12", 0, 1.0002, "cred", "bits=28"),
             task_line("kworker/0:1-12", 0, 1.0003, "inject", "len=36 bits=36"),
             task_line("addentropy-77", 1, 2.0, "inject", "len=32 bits=256")]
    found = seedings(parse_trace([TRACE_HEAD.format(len(lines), len(lines))] + lines))
    assert [(s.t, s.words, s.pool_bits, s.credited, s.length) for s in found] == [
        (1.0, (1, 2, 3, 4), 28, 36, 36)]


def test_harness_lrng_output_path_checks_tell_the_drbg_from_chacha20() -> None:
    """Reads served whole by the DRBG pass the drbg_output check and fail the
    ChaCha20 one; reads that took only a key pass the ChaCha20 check and fail the
    DRBG one."""
    by_drbg = lrngnoderead_record([(16, NODEREAD_BYTES), (16, NODEREAD_BYTES)])
    by_chacha = lrngnoderead_record([(1, 32), (0, 0)])
    assert_reads_served_by_own_node(by_drbg, 2)
    assert_output_from_chacha20(by_chacha)
    with pytest.raises(AssertionError, match="served by the DRBG, not by a ChaCha20"):
        assert_output_from_chacha20(by_drbg)
    with pytest.raises(AssertionError, match="generated 32 bytes in 1 calls"):
        assert_reads_served_by_own_node(by_chacha, 2)
