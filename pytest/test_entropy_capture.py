"""Raw interrupt time stamps from the guest and their SP 800-90B min-entropy (-k entropy).

Each boot runs task `entropy_capture` (fixtures/init, fixtures/irqcap.c): a kprobe on
add_interrupt_randomness clocked by the raw cycle counter, serial noise until
100,000 deltas are in, the stamps base64-encoded on the data channel. The host
stores samples.bin / stamps.u64 / irqs.u32 beside the boot's logs and runs
tools/ea/ea-noniid on samples.bin (benchlib/report/entropy.py).

- the capture works, with the sample count reached, in every TCG profile (the
  deterministic one too) and in the interrupt-only Hyper-V profile;
- the deterministic profile (-icount) gives the same delta sequence in two boots
  and is assessed near zero bits per interrupt;
- a nondeterministic quiet profile is assessed clearly above it.

The boots are shared: one module-scoped pool boots what the selected tests need,
in the background while earlier tests run, and each test waits for its own. One
boot at a time: two captures at once are CPU-bound guests on this 2-core host.
"""
from __future__ import annotations

import base64
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, Iterator, Optional

import pytest

from benchlib.report import entropy
from benchlib.core.profiles import QUIET, Needs
from benchlib.core.bootrecord import BootRecord, TaskOutput

SAMPLES = entropy.DEFAULT_SAMPLES
# The guest stops its noise after this many seconds even if short of SAMPLES
# (well inside the task's deadline): a short capture fails on its count.
CAPTURE_CAP_S = 100
PARALLEL_BOOTS = 1
# Every profile with a bench TCG model, the deterministic one included, and the
# interrupt-only Hyper-V profile (our patched QEMU under TCG).
CAPTURE_PROFILES = (Needs(hyperv=False), Needs(deterministic=True),
                    Needs(first=True, hyperv=True, interrupt_only=True))
DETERMINISTIC = Needs(deterministic=True).names()
NONDETERMINISTIC = QUIET.one()
# Two -icount boots: at least this share of delta positions agree.
REPRODUCIBLE_SHARE = 0.9
# "Near zero" bits of min-entropy per interrupt, and the least gap to a real profile.
NEAR_ZERO_BITS = 0.5
CLEARLY_ABOVE_BITS = 2.0

Key = tuple[str, int]      # (profile, boot number)

@dataclass
class Captured:
    record: BootRecord
    capture: entropy.Capture
    assessment: Optional[entropy.Assessment]    # None: too few samples to assess

    def assessed(self) -> entropy.Assessment:
        assert self.assessment is not None, (
            f"{self.record.profile}: {len(self.capture) - 1} samples, too few to assess "
            f"({self.record.data_log})")
        return self.assessment


def needs(*keys: Key) -> Callable:
    """The boots a test uses besides its `profile` parameter's first boot."""
    def mark(fn: Callable) -> Callable:
        fn.entropy_boots = keys
        return fn
    return mark


class BootPool:
    """Boots on demand, PARALLEL_BOOTS at a time; each boot once per module."""

    def __init__(self, boot_guest: Callable[..., BootRecord]) -> None:
        self._boot_guest = boot_guest
        self._pool = ThreadPoolExecutor(max_workers=PARALLEL_BOOTS)
        self._futures: dict[Key, Future] = {}

    def _boot(self, profile: str) -> BootRecord:
        return self._boot_guest(profile, tasks=[entropy.TASK], params={
            "entropy_samples": str(SAMPLES), "entropy_cap": str(CAPTURE_CAP_S)})

    def _capture(self, profile: str) -> Captured:
        record = self._boot(profile)
        capture, assessment = entropy.collect(record)
        return Captured(record, capture, assessment)

    def prefetch(self, keys: list[Key]) -> None:
        for key in keys:
            if key not in self._futures:
                self._futures[key] = self._pool.submit(self._capture, key[0])

    def get(self, profile: str, boot: int = 0) -> Captured:
        self.prefetch([(profile, boot)])
        return self._futures[(profile, boot)].result()

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


def _wanted(request: pytest.FixtureRequest) -> Iterator[Key]:
    for item in request.session.items:
        if getattr(item, "module", None) is not request.module:
            continue
        callspec = getattr(item, "callspec", None)
        if callspec is not None and "profile" in callspec.params:
            yield (callspec.params["profile"], 0)
        yield from getattr(getattr(item, "function", None), "entropy_boots", ())


@pytest.fixture(scope="module")
def boots(boot_guest, request: pytest.FixtureRequest) -> Iterator[BootPool]:
    pool = BootPool(boot_guest)
    pool.prefetch(list(dict.fromkeys(_wanted(request))))
    try:
        yield pool
    finally:
        pool.close()


@pytest.mark.profiles(*CAPTURE_PROFILES)
def test_entropy_capture_reaches_sample_count(profile: str, boots: BootPool,
                                              record_property) -> None:
    got = boots.get(profile)
    capture, outdir = got.capture, got.record.data_log.parent
    for key in ("capture_s", "dump_s"):
        record_property(key, round(getattr(capture, key), 3))
    assert len(capture) - 1 >= SAMPLES, (
        f"{profile}: {len(capture) - 1} samples, fewer than {SAMPLES} "
        f"(noise: {capture.noise}; {got.record.data_log})")
    assessment = got.assessed()
    record_property("min_entropy", assessment.min_entropy)
    record_property("limiting", assessment.limiting)
    # The assessor read every sample the guest sent (the files are the harness's own
    # writing: their sizes prove nothing), and the capture holds up on the guest's
    # TSC against its own duration and against an MCV estimate made here.
    assert assessment.samples == len(capture) - 1
    wrong = entropy.check_capture(capture, got.record.messages, assessment.min_entropy)
    assert not wrong, f"{profile}: {'; '.join(wrong)} ({got.record.data_log}, {outdir})"


@pytest.mark.skipif(not DETERMINISTIC, reason="no deterministic (-icount) profile")
@needs(*((p, n) for p in DETERMINISTIC[:1] for n in (0, 1)))
def test_entropy_icount_is_reproducible(boots: BootPool, record_property) -> None:
    profile = DETERMINISTIC[0]
    first, second = boots.get(profile, 0), boots.get(profile, 1)
    share = entropy.sequence_agreement(first.capture, second.capture)
    record_property("equal_delta_share", round(share, 4))
    assert share >= REPRODUCIBLE_SHARE, (
        f"{profile}: only {share:.1%} of the delta sequence is the same in two boots "
        f"({first.record.data_log}, {second.record.data_log})")


@pytest.mark.skipif(not DETERMINISTIC, reason="no deterministic (-icount) profile")
@needs(*((p, n) for p in DETERMINISTIC[:1] for n in (0, 1)))
def test_entropy_icount_assessed_near_zero(boots: BootPool) -> None:
    for boot in (0, 1):
        got = boots.get(DETERMINISTIC[0], boot)
        assert got.assessed().min_entropy <= NEAR_ZERO_BITS, (
            f"{DETERMINISTIC[0]} boot {boot}: {got.assessed().line()}, not near zero")


@pytest.mark.skipif(not DETERMINISTIC, reason="no deterministic (-icount) profile")
@needs((NONDETERMINISTIC, 0), *((p, 0) for p in DETERMINISTIC[:1]))
def test_entropy_nondeterministic_profile_clearly_above_icount(boots: BootPool) -> None:
    real, icount = boots.get(NONDETERMINISTIC), boots.get(DETERMINISTIC[0])
    high, low = real.assessed(), icount.assessed()
    assert high.min_entropy >= low.min_entropy + CLEARLY_ABOVE_BITS, (
        f"{NONDETERMINISTIC}: {high.line()}; {DETERMINISTIC[0]}: {low.line()}: "
        f"not {CLEARLY_ABOVE_BITS} bits apart")


# ---- The host side alone: the dump's framing and its integrity checks ---------

def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        out.append((value & 0x7F) | (0x80 if value > 0x7F else 0))
        value >>= 7
        if not value:
            return bytes(out)


def _task(stamps: list[tuple[int, int, int]], cpus: int = 2, lost: int = 0,
          drop_tail: bool = False, sent: Optional[int] = None) -> TaskOutput:
    raw, prev = b"", 0
    for stamp, irq, cpu in stamps:
        raw += _varint(stamp - prev) + _varint(irq * cpus + cpu)
        prev = stamp
    text = base64.b64encode(raw).decode()
    lines = ["@@IRQCAP noise events=3 wanted=3 bytes=3 seconds=0.5 rate_per_s=6",
             f"@@IRQCAP head samples={len(stamps) if sent is None else sent} cpus={cpus} "
             f"lost={lost} overrun=0 bytes={len(raw)}",
             *[text[i:i + 76] for i in range(0, len(text), 76)]]
    if not drop_tail:
        lines.append(f"@@IRQCAP tail samples={len(stamps)} bytes={len(raw)} dump_s=0.1")
    return TaskOutput(entropy.TASK, 0, lines)


STAMPS = [(1_000_000, 4, 0), (1_000_300, 4, 0), (1_070_000, 3, 1), (1_070_001, 4, 0)]


def test_entropy_dump_decodes_to_stamps_irqs_and_low_delta_bytes() -> None:
    capture = entropy.parse_capture(_task(STAMPS))
    assert list(capture.stamps) == [s for s, _, _ in STAMPS]
    assert list(capture.irqs) == [4, 4, 3, 4] and list(capture.cpus) == [0, 0, 1, 0]
    assert capture.samples() == bytes([300 & 0xFF, 69_700 & 0xFF, 1])


@pytest.mark.parametrize("broken, error", [
    ({"lost": 1}, "lost events"),
    ({"drop_tail": True}, "did not finish"),
    ({"sent": 5}, "4 stamps decoded, 5 were sent"),
])
def test_entropy_dump_integrity_errors(broken: dict, error: str) -> None:
    with pytest.raises(entropy.CaptureError, match=error):
        entropy.parse_capture(_task(STAMPS, **broken))


# A capture of 0.5 s (the fake noise line's seconds) on a 1 GHz TSC: 2,001 stamps
# about 250,000 cycles apart, the low bytes of the deltas spread over all 256 values.
TSC_LOG = [(0.1, "tsc: Detected 1000.000 MHz processor")]


def _capture(cycles_apart: int = 250_000) -> entropy.Capture:
    stamps, now = [], 1_000
    for i in range(2_001):
        stamps.append((now, 4, 0))
        now += cycles_apart - 128 + (i * 37) % 256
    return entropy.parse_capture(_task(stamps))


def test_entropy_capture_checked_on_the_tsc_and_against_mcv() -> None:
    """check_capture(): the stamps' span on the kernel's TSC calibration is the
    capture's duration, and the assessor claims no more than the MCV estimate. Red
    on a span twice the capture's (a decoding error), on a log without the TSC's
    calibration, and on an assessment above the MCV bound."""
    good = _capture()
    mcv = entropy.mcv_min_entropy(good.samples())
    assert 6.0 < mcv < entropy.SAMPLE_BITS, mcv     # 256 values, near-uniform
    assert entropy.check_capture(good, TSC_LOG, mcv) == []
    assert entropy.check_capture(good, TSC_LOG, mcv - 1.0) == []
    twice = entropy.check_capture(_capture(cycles_apart=500_000), TSC_LOG)
    assert twice and "span 1.000 s of the TSC at 1000.0 MHz, not the capture's 0.500 s" in twice[0]
    assert "no TSC calibration" in entropy.check_capture(good, [])[0]
    over = entropy.check_capture(good, TSC_LOG, float(entropy.SAMPLE_BITS))
    assert over and "more than the most-common-value estimate's" in over[0], over
