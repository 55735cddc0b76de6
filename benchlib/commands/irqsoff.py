"""How long each RNG keeps interrupts off: a benchmark of the VARIANT+irqsoff kernels.

    make irqsoff [IRQSOFF_ARGS="--boots 3 --profile tcg-icount"]

Each kernel is its variant built with kernel/configs/flavours/irqsoff.config (the
kernel's irqsoff tracer) and booted with the tracer started at boot
(tasks.TASKS["irqsoff"]: ftrace=irqsoff). The init's task "irqsoff" reads the
longest section with interrupts off in windows: "boot" (from the tracer's start
to user space), "idle" (a sleep, while the init's own processes start and exit),
then three loads of the RNG: "getrandom" (1-4 threads, 32 B and 4 KiB), "urandom"
(MiB reads), "reseed" (credited writes, forced reseeds, small reads). Each
window's figure is the tracer's, with where the section started and ended and the
stack at its end, so a reader sees what made it.

The profile is tcg-icount: under QEMU -icount guest time follows the instruction
count, so a section lasts as long as its code does, the same in every boot and
whatever else the host runs. Under plain TCG the host's scheduling and QEMU's code
translation stretch sections by milliseconds: measured in tcg-virtio-rng, the
timer interrupt's 0.4-8 ms was the longest section of nearly every window of
every kernel, and the 2016 DRBG path's 4 KiB generate (1.3 ms under -icount) was
lost in it. -icount takes few interrupts when idle, so the task first makes every
variant ready with a credited write.

The 2016 LRNG handed out every byte from an HMAC-DRBG under a spinlock with
interrupts off; lrng's default output path is a per-CPU ChaCha20 generator
(lrng 0008), and lrng.drbg_output=1 keeps the 2016 path: it is booted too, as
the comparison that shows what the benchmark sees when an RNG does its crypto
with interrupts off. A variant whose median in a window is more than
ORDER_OF_MAGNITUDE times stock's is a finding (exit 1); the 2016 path's is
reported, never a finding. Figures are guest time at one instruction a
nanosecond: comparable between kernels, not with a real machine.
The figures go to stdout and to results/irqsoff-<time>/irqsoff.json.
"""
from __future__ import annotations

import json
import re
import statistics
import time
from collections import Counter
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from . import options
from ..core import paths
from ..boot import plan
from ..core.cli import run_main
from ..core.errors import BenchError
from ..boot.guest import boot, install_signal_handlers
from ..boot.libvirtconn import connect
from ..core.profiles import get_profile

if TYPE_CHECKING:
    from ..core.bootrecord import BootRecord

FLAVOUR = "irqsoff"
TASK = "irqsoff"
# The init's windows, in its order. Every one is judged: the RNG works in all of
# them (at boot for the kernel's own requests, and in "idle" on every process exit,
# which feeds it device randomness with interrupts off).
WINDOWS = ("boot", "idle", "getrandom", "urandom", "reseed")
# "Within stock's order of magnitude": at most ten times stock's.
ORDER_OF_MAGNITUDE = 10
# Guest time by the instruction count (see above).
DEFAULT_PROFILE = "tcg-icount"
DEFAULT_BOOTS = 3
# The stack frames a report shows of a section: enough to see who held it.
STACK_FRAMES_SHOWN = 4
# The tracer's own frames at the top of the stack it records at a section's end.
TRACER_FRAMES = re.compile(r"^(trace_hardirqs_on|tracer_hardirqs_on|stop_critical_timings?|"
                           r"check_critical_timing|_raw_spin_unlock_irqrestore|_raw_spin_unlock_irq)\b")

WINDOW_LINE = re.compile(r"^irqsoff: window=(\S+) max_us=(\d+) rc=(\d+)$")
STARTED = re.compile(r"=> started at:\s*(\S+)")
ENDED = re.compile(r"=> ended at:\s*(\S+)")
STACK_FRAME = re.compile(r"^\s*=> (\S+)")


@dataclass(frozen=True)
class Kernel:
    """One kernel of the benchmark: a variant's irqsoff build and its command line."""
    label: str
    variant: str
    extra_cmdline: str = ""
    reference: bool = False     # reported for comparison, never a finding

    @property
    def flavoured(self) -> str:
        return f"{self.variant}+{FLAVOUR}"


STOCK = Kernel("stock", "stock")
KERNELS = (STOCK, Kernel("crng", "crng"), Kernel("lrng", "lrng"),
           Kernel("lrng drbg_output=1", "lrng", "lrng.drbg_output=1", reference=True))


@dataclass(frozen=True)
class Section:
    """A window's longest section with interrupts off, as the tracer recorded it."""
    window: str
    max_us: int
    rc: int             # the window's load's exit status
    started: str        # the caller that turned interrupts off
    ended: str          # the caller that turned them on
    stack: tuple[str, ...]  # the stack at its end, innermost first, the tracer's frames dropped

    def where(self) -> str:
        frames = " < ".join(self.stack[:STACK_FRAMES_SHOWN])
        return f"{self.started} -> {self.ended}" + (f" [{frames}]" if frames else "")


def parse(sections: dict[str, list[str]]) -> dict[str, Section]:
    """Every window of a task "irqsoff" output (TaskOutput.sections())."""
    found: dict[str, Section] = {}
    for title, lines in sections.items():
        if not title.startswith("irqsoff "):
            continue
        head = next((m for line in lines if (m := WINDOW_LINE.match(line))), None)
        if head is None:
            raise BenchError(f"irqsoff window '{title}' has no 'irqsoff: window=...' line")
        started = next((m.group(1) for line in lines if (m := STARTED.search(line))), "?")
        ended = next((m.group(1) for line in lines if (m := ENDED.search(line))), "?")
        stack = [m.group(1) for line in lines if (m := STACK_FRAME.match(line))
                 and not line.lstrip().startswith("#")]
        while stack and TRACER_FRAMES.match(stack[0]):
            stack.pop(0)
        found[head.group(1)] = Section(head.group(1), int(head.group(2)), int(head.group(3)),
                                       started, ended, tuple(stack))
    missing = [w for w in WINDOWS if w not in found]
    if missing:
        raise BenchError(f"irqsoff output lacks window(s) {', '.join(missing)}")
    return found


def sections_of(record: "BootRecord") -> dict[str, Section]:
    """The windows of a boot that ran task "irqsoff" to the end."""
    return parse(record.finished_task(TASK).sections())


@dataclass
class Figures:
    """One kernel's sections in one window over several boots."""
    kernel: str
    window: str
    max_us: list[int]
    where: list[str]

    @property
    def median(self) -> float:
        return statistics.median(self.max_us)

    def most_often(self) -> str:
        return Counter(self.where).most_common(1)[0][0]


def findings(figures: dict[tuple[str, str], Figures]) -> list[str]:
    """Each non-reference kernel's window whose median is over
    ORDER_OF_MAGNITUDE times stock's."""
    found = []
    for kernel in KERNELS:
        if kernel is STOCK or kernel.reference:
            continue
        for window in WINDOWS:
            mine, stock = figures.get((kernel.label, window)), figures.get((STOCK.label, window))
            if mine is None or stock is None:
                continue
            if mine.median > ORDER_OF_MAGNITUDE * stock.median:
                found.append(f"{kernel.label}: {window}: longest section with interrupts off "
                             f"{mine.median:g} us (median), over {ORDER_OF_MAGNITUDE}x stock's "
                             f"{stock.median:g} us ({mine.most_often()})")
    return found


def table(figures: dict[tuple[str, str], Figures], boots: int) -> str:
    """The report: a line per kernel and window, median and range, and where."""
    lines = [f"Longest section with interrupts off, guest microseconds "
             f"(median of {boots} boot(s), range), and where the median boot's started",
             f"{'kernel':<20} {'window':<10} {'median':>8} {'range':>15} x stock  where"]
    for kernel in KERNELS:
        for window in WINDOWS:
            f = figures.get((kernel.label, window))
            if f is None:
                continue
            stock = figures.get((STOCK.label, window))
            ratio = f"{f.median / stock.median:6.1f}" if stock and stock.median else "     -"
            span = f"{min(f.max_us)}-{max(f.max_us)}"
            lines.append(f"{kernel.label:<20} {window:<10} {f.median:>8g} {span:>15} {ratio}   "
                         f"{f.most_often()}")
    return "\n".join(lines)


def collect(boots: dict[str, list[dict[str, Section]]]) -> dict[tuple[str, str], Figures]:
    """Figures per (kernel label, window) from each kernel's boots' windows."""
    figures: dict[tuple[str, str], Figures] = {}
    for label, windows_of_boots in boots.items():
        for windows in windows_of_boots:
            for window, section in windows.items():
                f = figures.setdefault((label, window), Figures(label, window, [], []))
                f.max_us.append(section.max_us)
                f.where.append(section.where())
    return figures


def main(argv: list[str]) -> int:
    parser = options.ArgumentParser(prog="irqsoff", description=__doc__.splitlines()[0])
    parser.add_argument("--boots", type=int, default=DEFAULT_BOOTS)
    parser.add_argument("--profile", default=DEFAULT_PROFILE)
    args = parser.parse_args(argv)
    if args.boots < 1:
        raise BenchError(f"--boots {args.boots}: at least one boot per kernel")
    profile = get_profile(args.profile)
    out = paths.RESULTS_DIR / time.strftime("irqsoff-%Y%m%d-%H%M%S")
    install_signal_handlers()
    conn = connect("qemu:///system")
    boots: dict[str, list[dict[str, Section]]] = {k.label: [] for k in KERNELS}
    # Round after round, every kernel once per round: a slow spell of the host
    # falls on all of them.
    for round_ in range(args.boots):
        for kernel in KERNELS:
            folder = out / f"{kernel.label.replace(' ', '_').replace('=', '')}-{round_ + 1}"
            request = plan.request(profile, variant=kernel.flavoured, tasks=[TASK],
                                   extra_cmdline=kernel.extra_cmdline, outdir=folder)
            got = sections_of(boot(conn, request))
            boots[kernel.label].append(got)
            print(f"round {round_ + 1}/{args.boots} {kernel.label}: "
                  + ", ".join(f"{w} {got[w].max_us} us" for w in WINDOWS), flush=True)
    figures = collect(boots)
    report = table(figures, args.boots)
    found = findings(figures)
    print(report)
    for line in found:
        print(f"FINDING {line}")
    summary = {"profile": profile.name, "boots": args.boots,
               "order_of_magnitude": ORDER_OF_MAGNITUDE,
               "figures": [asdict(f) | {"median": f.median} for f in figures.values()],
               "findings": found}
    out.mkdir(parents=True, exist_ok=True)
    (out / "irqsoff.json").write_text(json.dumps(summary, indent=2) + "\n")
    (out / "report.txt").write_text(report + "\n" + "".join(f"FINDING {x}\n" for x in found))
    print(f"{out / 'report.txt'}")
    return 1 if found else 0


if __name__ == "__main__":
    run_main("irqsoff", main)
