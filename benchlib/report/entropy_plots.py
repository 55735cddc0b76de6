"""Plots for the entropy report: per profile, one PNG with two panels.

Left: the histogram of the captured samples (the low 8 bits of each interrupt's
time-stamp delta), one line per variant. Right, over the boot's own time (guest
printk seconds, from the boot-time kprobe trace): the bits each variant credited
and the bits its sampled interrupts were worth by the measured min-entropy per
interrupt (interrupts so far × H_min), each milestone that claims bits marked.
Made with Debian's python3-matplotlib (scripts/setup.sh installs it), off screen.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable, Optional

from . import entropy
from ..checks import measure
from .entropy_report import CLAIMED_BITS, cells
from ..core.bootrecord import BootRecord

SAMPLE_VALUES = 256
# Trace events that credit bits, and the field that says how many: 6.1 and the RFC
# credit the input pool (_credit_init_bits), the LRNG feeds its DRBG from the pool.
CREDIT_EVENTS = {"cred": "bits"}
FIGURE_INCHES = (12, 4.5)
DPI = 90


def _histogram(boot_dir: Path) -> Optional[list[int]]:
    path = boot_dir / entropy.SAMPLES_FILE
    if not path.is_file():
        return None
    counts = [0] * SAMPLE_VALUES
    for byte in path.read_bytes():
        counts[byte] += 1
    return counts


def _curves(record: BootRecord, h_min: float) -> Optional[tuple[list[float], list[float],
                                                                  list[float], list[float]]]:
    """(times, credited bits, times, measured bits) from the boot trace, up to the
    capture (whose noise is the bench's, not the boot's)."""
    events = measure.trace_events(record)
    if not events:
        return None
    stop = entropy.capture_start(record)
    credited_t, credited, measured_t, measured = [0.0], [0.0], [0.0], [0.0]
    for e in events:
        if stop is not None and e.t >= stop:
            break
        if e.event in CREDIT_EVENTS and CREDIT_EVENTS[e.event] in e.args:
            credited_t.append(e.t)
            credited.append(credited[-1] + e.int(CREDIT_EVENTS[e.event]))
        elif e.event == "air":
            measured_t.append(e.t)
            measured.append(measured[-1] + h_min)
    return credited_t, credited, measured_t, measured


def plot(records: Iterable[BootRecord], outdir: Path) -> list[Path]:
    """One PNG per profile under outdir; the paths written."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    records = list(records)
    written = []
    for profile in sorted({r.profile for r in records}):
        mine = [r for r in records if r.profile == profile]
        measured = {c.variant: c.measured for c in cells(mine) if c.measured is not None}
        fig, (hist_ax, bits_ax) = plt.subplots(1, 2, figsize=FIGURE_INCHES)
        for record in mine:
            counts = _histogram(record.data_log.parent)
            if counts is not None:
                hist_ax.plot(range(SAMPLE_VALUES), counts, label=record.variant, linewidth=0.8)
            h_min = measured.get(record.variant)
            curves = _curves(record, h_min) if h_min is not None else None
            if curves is None:
                continue
            credited_t, credited, measured_t, worth = curves
            line, = bits_ax.step(credited_t, credited, where="post",
                                 label=f"{record.variant}: credited")
            bits_ax.step(measured_t, worth, where="post", linestyle="--",
                         color=line.get_color(),
                         label=f"{record.variant}: interrupts × {h_min:.2f} bits")
            for name, claimed in CLAIMED_BITS.items():
                t = record.milestone(name) if name in record.spec().milestones else None
                if t is not None:
                    bits_ax.axvline(t, color=line.get_color(), linewidth=0.5)
                    bits_ax.annotate(f"{name} ({claimed})", (t, claimed), fontsize=7,
                                     color=line.get_color())
        hist_ax.set(title=f"{profile}: low 8 bits of the time-stamp delta",
                    xlabel="sample value", ylabel="samples")
        bits_ax.set(title=f"{profile}: credited against measured bits",
                    xlabel="guest time (s)", ylabel="bits", yscale="symlog")
        bits_ax.set_ylim(bottom=0)
        for ax in (hist_ax, bits_ax):
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=7)
        fig.tight_layout()
        path = outdir / f"entropy-{profile}.png"
        fig.savefig(path, dpi=DPI)
        plt.close(fig)
        written.append(path)
    return written
