"""Raw interrupt time stamps from a guest, stored and assessed for min-entropy.

The guest's task `entropy_capture` (fixtures/init, fixtures/irqcap.c) records a
kprobe event on add_interrupt_randomness, clocked by the raw cycle counter
(trace_clock x86-tsc), while it makes serial interrupts, and prints the events on
the data channel between two lines:

    @@IRQCAP head samples=N cpus=C lost=L overrun=O bytes=B
    <base64: per event, varint(stamp - previous stamp), varint(irq * C + cpu)>
    @@IRQCAP tail samples=N bytes=B dump_s=S

A capture is stored in the boot's output folder in the SP 800-90B tools' format:
`samples.bin` (one byte per sample: the low 8 bits of the delta between two
successive stamps), `stamps.u64` (every stamp, 64-bit little-endian), `irqs.u32`
(each stamp's irq, 32-bit little-endian) and `cpus.u8`. tools/ea/ea-noniid
assesses samples.bin.
"""
from __future__ import annotations

import base64
import json
import math
import re
import subprocess
from array import array
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional

from ..core.errors import BenchError
from ..core.paths import REPO
from ..core.bootrecord import BootRecord, TaskOutput
from ..boot.record import parse_data, read_text

TASK = "entropy_capture"
SECTION = "samples"
DEFAULT_SAMPLES = 100_000
FULL_ASSESSMENT_SAMPLES = 1_000_000   # SP 800-90B §3.1.1
ASSESSOR_DIR = REPO / "tools" / "ea"
ASSESSOR = ASSESSOR_DIR / "ea-noniid"
SAMPLES_FILE, STAMPS_FILE, IRQS_FILE, CPUS_FILE = "samples.bin", "stamps.u64", "irqs.u32", "cpus.u8"
SUMMARY_FILE = "entropy.json"
CAPTURE_MARK = "bench: entropy capture start"   # fixtures/init, on /dev/kmsg
SAMPLE_BITS = 8
ASSESSOR_MIN_SAMPLES = 10_000   # ea-noniid refuses fewer (tools/ea/README.md)


# A capture checked from outside its own bookkeeping (check_capture):
# - its stamps are on the guest's TSC (trace_clock x86-tsc), which the kernel
#   calibrated ("tsc: Detected N MHz processor"); their span in seconds must be the
#   capture's own duration on CLOCK_MONOTONIC (irqcap's noise seconds). A decoding
#   error of the ring buffer (a lost time extend, a wrong delta) breaks it. Measured
#   2026-12-05 over 69 stored captures (TCG, -icount and Hyper-V profiles):
#   0.98-1.10 of it; the bounds are generous.
TSC_MHZ = re.compile(r"^tsc: Detected ([0-9.]+) MHz processor$")
SPAN_RATIO_BOUNDS = (0.75, 1.33)
# - the assessor's verdict is the least of its estimators, so it can be no more than
#   SP 800-90B §6.3.1's most-common-value estimate, computed here on the same
#   samples (MCV_Z: the 99 % upper bound's z).
MCV_Z = 2.576
MCV_SLACK_BITS = 1e-6


def tsc_hz(messages: list[tuple[float, str]]) -> Optional[float]:
    """The guest TSC's frequency as its kernel calibrated it, from its log."""
    found = next((m for _t, text in messages if (m := TSC_MHZ.match(text))), None)
    return float(found.group(1)) * 1e6 if found else None


def mcv_min_entropy(samples: bytes) -> float:
    """SP 800-90B §6.3.1 (most common value), bits per sample."""
    n = len(samples)
    p_hat = max(Counter(samples).values()) / n
    p_u = min(1.0, p_hat + MCV_Z * math.sqrt(p_hat * (1 - p_hat) / (n - 1)))
    return -math.log2(p_u)


def check_capture(capture: "Capture", messages: list[tuple[float, str]],
                  assessed_bits: Optional[float] = None) -> list[str]:
    """What is wrong with a capture, judged on other clocks and other arithmetic than
    its own (see SPAN_RATIO_BOUNDS and MCV_Z); empty when nothing is."""
    wrong = []
    hz = tsc_hz(messages)
    if hz is None:
        wrong.append("the kernel log has no TSC calibration ('tsc: Detected N MHz')")
    elif len(capture) > 1:
        span_s = (capture.stamps[-1] - capture.stamps[0]) / hz
        low, high = (bound * capture.capture_s for bound in SPAN_RATIO_BOUNDS)
        if not low <= span_s <= high:
            wrong.append(f"the stamps span {span_s:.3f} s of the TSC at {hz / 1e6:.1f} MHz, "
                         f"not the capture's {capture.capture_s:.3f} s")
    if assessed_bits is not None and len(capture) > 2:
        mcv = mcv_min_entropy(capture.samples())
        if assessed_bits > mcv + MCV_SLACK_BITS:
            wrong.append(f"the assessor says {assessed_bits:.4f} bits a sample, more than the "
                         f"most-common-value estimate's {mcv:.4f}")
    return wrong


class CaptureError(BenchError):
    """A capture that cannot be used: missing, truncated, or with lost events."""


def _fields(line: str) -> dict[str, str]:
    return dict(word.split("=", 1) for word in line.split()[2:] if "=" in word)


def _varints(data: bytes) -> Iterator[int]:
    value = shift = 0
    for byte in data:
        value |= (byte & 0x7F) << shift
        if byte & 0x80:
            shift += 7
            continue
        yield value
        value = shift = 0
    if shift:
        raise CaptureError("the encoded samples end inside a number")


@dataclass
class Capture:
    """One boot's interrupt time stamps, in time order, with irq and CPU."""
    stamps: array        # 'Q': x86-tsc cycles
    irqs: array          # 'L'
    cpus: array          # 'B'
    noise: dict[str, str]   # irqcap noise: events, bytes, seconds, rate_per_s
    dump: dict[str, str]    # head and tail fields: lost, overrun, bytes, dump_s

    def __len__(self) -> int:
        return len(self.stamps)

    def deltas(self) -> list[int]:
        return [b - a for a, b in zip(self.stamps, self.stamps[1:])]

    def samples(self) -> bytes:
        """SP 800-90B samples: the low 8 bits of each delta between stamps."""
        return bytes(d & 0xFF for d in self.deltas())

    def irq_counts(self) -> dict[int, int]:
        counts: dict[int, int] = {}
        for irq in self.irqs:
            counts[irq] = counts.get(irq, 0) + 1
        return counts

    @property
    def capture_s(self) -> float:
        return float(self.noise.get("seconds", "nan"))

    @property
    def dump_s(self) -> float:
        return float(self.dump.get("dump_s", "nan"))

    @property
    def dump_bytes_per_s(self) -> float:
        """The data channel's measured speed: base64 characters a second."""
        chars = (int(self.dump["bytes"]) + 2) // 3 * 4 * 77 // 76
        return chars / self.dump_s if self.dump_s > 0 else float("nan")


def parse_capture(task: TaskOutput) -> Capture:
    """The task's output -> Capture; CaptureError if incomplete or events were lost."""
    noise: dict[str, str] = {}
    head: Optional[dict[str, str]] = None
    tail: Optional[dict[str, str]] = None
    encoded: list[str] = []
    for line in task.lines:
        if line.startswith("@@IRQCAP noise "):
            noise = _fields(line)
        elif line.startswith("@@IRQCAP head "):
            head = _fields(line)
        elif line.startswith("@@IRQCAP tail "):
            tail = _fields(line)
        elif head is not None and tail is None and line:
            encoded.append(line.strip())
    if head is None or tail is None:
        raise CaptureError(f"task {TASK}: the sample dump did not "
                           f"{'start' if head is None else 'finish'} (@@IRQCAP head/tail)")
    if int(head["lost"]) or int(head["overrun"]):
        raise CaptureError(f"task {TASK}: the trace lost events (lost pages {head['lost']}, "
                           f"overrun {head['overrun']}): the buffer was too small")
    try:
        raw = base64.b64decode("".join(encoded), validate=True)
    except ValueError as exc:
        raise CaptureError(f"task {TASK}: the encoded samples are corrupt: {exc}") from None
    if len(raw) != int(head["bytes"]):
        raise CaptureError(f"task {TASK}: {len(raw)} bytes of samples arrived, "
                           f"{head['bytes']} were sent")
    numbers = list(_varints(raw))
    cpus_n = int(head["cpus"])
    stamps, irqs, cpus = array("Q"), array("L"), array("B")
    now = 0
    for delta, where in zip(numbers[0::2], numbers[1::2]):
        now += delta
        stamps.append(now)
        irqs.append(where // cpus_n)
        cpus.append(where % cpus_n)
    if len(numbers) % 2 or len(stamps) != int(head["samples"]):
        raise CaptureError(f"task {TASK}: {len(stamps)} stamps decoded, "
                           f"{head['samples']} were sent")
    return Capture(stamps, irqs, cpus, noise, {**head, **tail})


def capture_start(record: BootRecord) -> Optional[float]:
    """printk time the guest's capture noise started (its /dev/kmsg marker)."""
    return next((t for t, text in record.messages if text.startswith(CAPTURE_MARK)), None)


def channel_text(data_log: Path) -> str:
    """The whole data channel. Where a host's libvirt writes it through virtlogd
    (ours does not: setup.sh), virtlogd rotates the file at its max_size (2 MiB
    by default) into data.log.0 (newest), .1, ...; a 1,000,000-sample capture
    spans several of them. Oldest first, the current file last."""
    rotated = sorted(data_log.parent.glob(data_log.name + ".*"),
                     key=lambda p: int(p.suffix[1:]) if p.suffix[1:].isdigit() else -1,
                     reverse=True)
    return "".join(read_text(p) for p in rotated if p.suffix[1:].isdigit()) + read_text(data_log)


def capture_from(record: BootRecord) -> Capture:
    """The boot's capture, from the whole data channel (rotated files included)."""
    task = record.tasks.get(TASK)
    if task is not None and any(line.startswith("@@IRQCAP head ") for line in task.lines):
        return parse_capture(record.finished_task(TASK))
    tasks, _ = parse_data(channel_text(record.data_log))
    if TASK not in tasks:
        raise CaptureError(f"task {TASK} printed nothing in {record.data_log}")
    whole = BootRecord(**{**record.__dict__, "tasks": tasks})
    return parse_capture(whole.finished_task(TASK))


def store(capture: Capture, outdir: Path) -> dict[str, Path]:
    """Write the capture's files into a boot's output folder; their paths by name."""
    paths = {name: outdir / name for name in (SAMPLES_FILE, STAMPS_FILE, IRQS_FILE, CPUS_FILE)}
    paths[SAMPLES_FILE].write_bytes(capture.samples())
    for name, values, code in ((STAMPS_FILE, capture.stamps, "Q"),
                               (IRQS_FILE, capture.irqs, "I"), (CPUS_FILE, capture.cpus, "B")):
        paths[name].write_bytes(array(code, values).tobytes())   # little-endian: x86 host
    return paths


@dataclass(frozen=True)
class Assessment:
    """ea-noniid's verdict on one samples file."""
    samples: int
    min_entropy: float          # bits per sample (per interrupt), at most SAMPLE_BITS
    limiting: str               # the estimator that set it
    full_assessment: bool       # at least 1,000,000 samples
    seconds: float

    def line(self) -> str:
        return (f"{self.min_entropy:.3f} bits/interrupt (limited by {self.limiting}, "
                f"{self.samples} samples"
                f"{'' if self.full_assessment else ', not a full assessment'})")


def build_assessor() -> Path:
    """tools/ea/ea-noniid, built if it is not there yet."""
    if not ASSESSOR.is_file():
        result = subprocess.run(["make", "-s", "-C", str(ASSESSOR_DIR)],
                                capture_output=True, text=True)
        if result.returncode != 0:
            raise BenchError(f"make -C {ASSESSOR_DIR} failed: {result.stderr.strip()}")
    return ASSESSOR


def assess(samples_file: Path, bits: int = SAMPLE_BITS) -> Assessment:
    """Run the SP 800-90B non-IID assessor on a samples file."""
    result = subprocess.run([str(build_assessor()), "-b", str(bits), "--json", str(samples_file)],
                            capture_output=True, text=True)
    if result.returncode != 0:
        raise BenchError(f"{ASSESSOR.name} {samples_file}: {result.stderr.strip()}")
    data = json.loads(result.stdout)
    return Assessment(samples=int(data["samples"]), min_entropy=float(data["min_entropy"]),
                      limiting=str(data["limiting"]),
                      full_assessment=bool(data["full_assessment"]),
                      seconds=float(data.get("seconds", 0.0)))


def summary(capture: Capture, assessment: Optional[Assessment]) -> dict[str, object]:
    return {
        "stamps": len(capture), "samples": len(capture) - 1,
        "irqs": {str(k): v for k, v in sorted(capture.irq_counts().items())},
        "capture_s": capture.capture_s,
        "noise_rate_per_s": float(capture.noise.get("rate_per_s", 0)),
        "dump_s": capture.dump_s, "dump_bytes": int(capture.dump["bytes"]),
        "channel_chars_per_s": round(capture.dump_bytes_per_s),
        "min_entropy": assessment.min_entropy if assessment else None,
        "limiting": assessment.limiting if assessment else None,
        "full_assessment": assessment.full_assessment if assessment else None,
    }


def collect(record: BootRecord, run_assessor: bool = True) -> tuple[Capture, Optional[Assessment]]:
    """A boot's capture stored beside its logs and, if it has enough samples for
    the assessor, assessed; the summary in entropy.json."""
    capture = capture_from(record)
    outdir = record.data_log.parent
    paths = store(capture, outdir)
    enough = len(capture) - 1 >= ASSESSOR_MIN_SAMPLES
    assessment = assess(paths[SAMPLES_FILE]) if run_assessor and enough else None
    (outdir / SUMMARY_FILE).write_text(json.dumps(summary(capture, assessment), indent=2))
    return capture, assessment


def load_summary(boot_dir: Path) -> Optional[dict[str, object]]:
    path = boot_dir / SUMMARY_FILE
    return json.loads(path.read_text()) if path.is_file() else None


def sequence_agreement(a: Capture, b: Capture) -> float:
    """Share of positions at which two captures' delta sequences are equal (over
    the shorter one): 1.0 for a reproducible interrupt timing."""
    da, db = a.deltas(), b.deltas()
    n = min(len(da), len(db))
    return sum(x == y for x, y in zip(da, db)) / n if n else 0.0
