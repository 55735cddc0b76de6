"""The entropy report's plots and findings, from synthetic data: no hypervisor needed.
A profile's PNG is made from the boot's samples and its kprobe trace (credited bits
against interrupts × the measured min-entropy), with the milestone marked."""
from __future__ import annotations

import json
import random
from pathlib import Path

import matplotlib.pyplot

from benchlib.report import entropy, entropy_plots
from benchlib.report.pngcheck import PNG_MAGIC, drawn
from benchlib.report.entropy_report import EntropyCell
from benchlib.core.bootrecord import BootRecord, TaskOutput

TRACE_HEAD = "# entries-in-buffer/entries-written: {0}/{0}   #P:1"
SAMPLES = 20_000
SEED = 11


def trace_line(t: float, event: str, args: str) -> str:
    return f"          <idle>-0       [000] d.h..     {t:.6f}: {event}: (x+0x0/0x10) {args}"


def synthetic_boot(folder: Path) -> BootRecord:
    folder.mkdir()
    rng = random.Random(SEED)
    (folder / entropy.SAMPLES_FILE).write_bytes(bytes(rng.randrange(256) for _ in range(SAMPLES)))
    (folder / entropy.SUMMARY_FILE).write_text(json.dumps(
        {"samples": SAMPLES, "min_entropy": 6.5, "limiting": "compression"}))
    events = [trace_line(0.5 + i / 100, "air", "irq=4") for i in range(40)]
    events += [trace_line(0.9, "cred", "bits=128"), trace_line(1.2, "cred", "bits=128")]
    record = BootRecord(name="bench-x", profile="tcg-quiet", variant="stock", kernel="k",
                        accel="tcg", cmdline="", console_log=folder / "console.log",
                        data_log=folder / "data.log")
    record.messages = [(1.25, "random: crng init done"), (2.0, entropy.CAPTURE_MARK)]
    record.tasks = {"trace": TaskOutput("trace", 0, ["@@SECTION trace",
                                                     TRACE_HEAD.format(len(events)), *events]),
                    entropy.TASK: TaskOutput(entropy.TASK, 0)}
    return record


def test_entropy_plot_per_profile(tmp_path: Path) -> None:
    record = synthetic_boot(tmp_path / "boot")
    written = entropy_plots.plot([record], tmp_path)
    assert written == [tmp_path / "entropy-tcg-quiet.png"]
    data = written[0].read_bytes()
    assert data.startswith(PNG_MAGIC) and len(data) > 10_000, len(data)
    assert drawn(written[0]), "the plot has no curve drawn"


def test_blank_plot_is_told_from_a_drawn_one(tmp_path: Path) -> None:
    """The check above on a plot with axes and labels but nothing drawn."""
    figure, axes = matplotlib.pyplot.subplots()
    axes.set_xlabel("interrupts")
    axes.set_ylabel("bits")
    blank = tmp_path / "blank.png"
    figure.savefig(blank)
    matplotlib.pyplot.close(figure)
    assert not drawn(blank)


def test_entropy_plot_curves_stop_at_the_capture(tmp_path: Path) -> None:
    """The right panel's data: credited bits step with each credit event, measured
    bits with each sampled interrupt (× H_min), none from the capture's own noise."""
    record = synthetic_boot(tmp_path / "boot")
    record.tasks["trace"].lines.append(trace_line(2.5, "air", "irq=3"))   # during the capture
    record.tasks["trace"].lines[1] = TRACE_HEAD.format(len(record.tasks["trace"].lines) - 2)
    curves = entropy_plots._curves(record, 6.5)
    assert curves is not None
    _, credited, _, measured = curves
    assert credited == [0.0, 128.0, 256.0]
    assert measured[-1] == 40 * 6.5 and len(measured) == 41


def test_entropy_report_flags_credit_above_the_measured_entropy() -> None:
    """A variant crediting more per interrupt than was measured is a finding, in
    words; one crediting less is not; a deterministic profile always is."""
    over = EntropyCell("tcg-quiet", "lrng", min_entropy=[0.5], credit_per_irq=256 / 288)
    under = EntropyCell("tcg-quiet", "stock", min_entropy=[6.5], credit_per_irq=1 / 64)
    icount = EntropyCell("tcg-icount", "stock", min_entropy=[0.016], credit_per_irq=1 / 64,
                         deterministic=True)
    assert any("over-credited" in f for f in over.findings()), over.findings()
    assert not under.findings()
    assert any("credit for entropy that is not there" in f for f in icount.findings())
