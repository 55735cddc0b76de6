"""The main job's report as one page people look at: results/<timestamp>/report.html.

The page holds the same table and verdicts as report.txt, the getrandom()
throughput of each variant, one plot per profile of the time to each milestone
(every boot a point, the median a bar), the entropy table and plots when they
were made, and links to each boot's console log and domain XML. It is
self-contained: the plots are PNGs (Debian's python3-matplotlib, off screen)
inlined as data URIs, so the file can be mailed or attached to a CI job alone;
only the boots' logs are links, relative to the page, into boots/.
"""
from __future__ import annotations

import base64
import html
import io
import statistics
from pathlib import Path
from typing import Iterable, Optional

from . import throughput
from .errors import BadKernel
from .report import OK, SHARED_MARK, Cell, cell_text, columns, hosts_legend

PAGE = "report.html"
BOOT_DOMAIN_XML = "domain.xml"
# One plot row per (variant, milestone) pair: this tall, in inches, plus a margin.
PLOT_ROW_INCHES, PLOT_MARGIN_INCHES, PLOT_WIDTH_INCHES = 0.4, 1.6, 10
PLOT_DPI = 90
# Boots of one row are spread a little vertically, so equal times stay visible.
POINT_JITTER = 0.12
STYLE = """
body { font-family: sans-serif; margin: 1.5em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; }
th, td { border: 1px solid #bbb; padding: 0.25em 0.5em; text-align: left;
         vertical-align: top; font-size: 90%; }
th { background: #eee; }
td.ok { background: #dfd; } td.bad { background: #fdd; } td.skip { background: #eee; }
pre { background: #f6f6f6; padding: 0.5em; overflow-x: auto; }
img { max-width: 100%; border: 1px solid #ccc; margin: 0.3em 0; }
"""


def _esc(value: object) -> str:
    return html.escape(str(value))


def _png_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def _verdict_class(cell: Cell) -> str:
    if cell.skipped:
        return "skip"
    return "ok" if cell.verdict() == OK else "bad"


def _link(outdir: Path, path: Path, label: str) -> str:
    try:
        href = path.relative_to(outdir)
    except ValueError:
        href = path
    return f'<a href="{_esc(href)}">{_esc(label)}</a>'


def _boot_links(cell: Cell, outdir: Path) -> str:
    links = []
    for record in cell.records:
        xml = record.console_log.parent / BOOT_DOMAIN_XML
        shared = f" {SHARED_MARK}" if record.shared_host else ""
        links.append(f"{_esc(record.name)}: {_link(outdir, record.console_log, 'console')} "
                     f"{_link(outdir, xml, 'domain XML')} on {_esc(record.host)}{shared}")
    links += [f"failed: {_esc(failure)}" for failure in cell.failures]
    return "<br>".join(links)


def _throughput_text(variant: str, profile: str, rows: list[dict[str, object]]) -> str:
    if profile != throughput.PROFILE:
        return ""
    return "<br>".join(f"{r['threads']}×{r['size']} B: {r['median_mb_s']} MB/s"
                       for r in rows if r["variant"] == variant)


def matrix_table(cells: list[Cell], outdir: Path, rows: list[dict[str, object]]) -> str:
    """The profile × variant table: the report's columns, throughput, verdict, boots."""
    cols = columns(cells)
    heads = ["profile", "variant", *cols]
    if rows:
        heads.append(f"getrandom() MB/s (measured in {throughput.PROFILE})")
    heads += ["verdict", "boots"]
    out = ["<table id='matrix'>", "<tr>" + "".join(f"<th>{_esc(h)}</th>" for h in heads) + "</tr>"]
    for cell in cells:
        samples = {} if cell.skipped else cell.samples()
        values = [cell_text(cell, name, samples) if not cell.skipped else "" for name in cols]
        if rows:
            values.append(_throughput_text(cell.variant, cell.profile, rows))
        row = [_esc(cell.profile), _esc(cell.variant), *(_esc(v) for v in values[:len(cols)]),
               *values[len(cols):]]
        out.append("<tr>" + "".join(f"<td>{v}</td>" for v in row)
                   + f"<td class='{_verdict_class(cell)}'>{_esc(cell.verdict())}</td>"
                   + f"<td>{_boot_links(cell, outdir)}</td></tr>")
    out.append("</table>")
    return "\n".join(out)


def milestone_points(cells: Iterable[Cell]) -> dict[str, list[float]]:
    """'variant: milestone' -> every boot's guest printk time of it, in order."""
    points: dict[str, list[float]] = {}
    for cell in cells:
        for name, values in cell.samples().items():
            if name in _milestone_names(cell):
                points.setdefault(f"{cell.variant}: {name}", []).extend(values)
    return points


def _milestone_names(cell: Cell) -> list[str]:
    try:
        return list(cell.records[0].spec().milestones) if cell.records else []
    except BadKernel:
        return []       # a kernel the bench knows no milestones of


def milestone_plot(profile: str, points: dict[str, list[float]]) -> bytes:
    """One PNG: a row per variant and milestone, each boot a point, the median a bar."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = list(points)
    fig, ax = plt.subplots(figsize=(PLOT_WIDTH_INCHES,
                                    PLOT_MARGIN_INCHES + PLOT_ROW_INCHES * len(labels)))
    for row, label in enumerate(labels):
        times = points[label]
        spread = [row + POINT_JITTER * ((i % 3) - 1) for i in range(len(times))]
        ax.scatter(times, spread, s=18, color="tab:blue", zorder=3,
                   label="one boot" if row == 0 else None)
        ax.scatter([statistics.median(times)], [row], marker="|", s=400, color="black",
                   zorder=4, label="median" if row == 0 else None)
    ax.set_yticks(range(len(labels)), labels)
    ax.set_ylim(len(labels) - 0.5, -0.5)        # first row on top
    ax.set_xlim(left=0)                          # time since boot: from 0
    ax.set_xlabel("guest printk time since boot (s)")
    ax.set_title(f"{profile}: time to each milestone")
    ax.grid(axis="x", alpha=0.4)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize="small")
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=PLOT_DPI)
    plt.close(fig)
    return buffer.getvalue()


def plots_section(cells: list[Cell]) -> str:
    out = []
    for profile in dict.fromkeys(c.profile for c in cells):
        points = milestone_points(c for c in cells if c.profile == profile and c.records)
        if not points:
            out.append(f"<p>{_esc(profile)}: no boot reached a milestone, nothing to plot.</p>")
            continue
        out.append(f"<img class='milestones' alt='{_esc(profile)}: time to each milestone' "
                   f"src='{_png_uri(milestone_plot(profile, points))}'>")
    return "\n".join(out)


def page(outdir: Path, cells: list[Cell], meta: dict[str, object],
         throughput_rows: list[dict[str, object]], texts: list[str],
         images: list[Path]) -> str:
    """The whole page. texts: further plain-text tables (entropy, throughput);
    images: further PNG files (the entropy plots), inlined."""
    bad = [c for c in cells if not c.skipped and c.verdict() != OK]
    summary = (f"{len(bad)} of {len(cells)} cells not ok" if bad
               else f"all {len(cells)} cells ok or skipped with a reason")
    kernels = meta.get("kernels", {})
    versions = meta.get("kernel_versions", {})
    kernel_rows = "".join(
        f"<tr><td>{_esc(v)}</td><td>{_esc(path)}</td><td>{_esc(versions.get(v, ''))}</td></tr>"
        for v, path in kernels.items()) if isinstance(kernels, dict) else ""
    verdicts = "".join(
        f"<li class='{_verdict_class(c)}'>{_esc(c.profile)} × {_esc(c.variant)}: "
        f"{_esc(c.verdict())}</li>" for c in cells)
    extra = "".join(f"<pre>{_esc(text)}</pre>" for text in texts)
    extra += "".join(f"<img class='entropy' alt='{_esc(p.name)}' "
                     f"src='{_png_uri(p.read_bytes())}'>" for p in images)
    if extra:
        extra = "<h2>Entropy and throughput</h2>\n" + extra
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>Boot-time randomness bench: {_esc(outdir.name)}</title>
<style>{STYLE}</style></head>
<body>
<h1>Boot-time randomness bench: {_esc(outdir.name)}</h1>
<p id="summary">{_esc(summary)}. Guests ran under {_esc(str(meta.get('accel', '?')).upper())}
({_esc(meta.get('accel_why', ''))}), {_esc(meta.get('boots', '?'))} boot(s) per cell.</p>
<table id="kernels"><tr><th>variant</th><th>kernel image</th><th>version</th></tr>
{kernel_rows}</table>
<h2>Profile × variant</h2>
{matrix_table(cells, outdir, throughput_rows)}
{"".join(f"<p class='hosts'>{_esc(line)}</p>" for line in hosts_legend(cells))}
<h2>Verdicts</h2>
<ul id="verdicts">{verdicts}</ul>
<h2>Time to each milestone</h2>
{plots_section(cells)}
{extra}
</body></html>
"""


def write(outdir: Path, cells: list[Cell], meta: dict[str, object],
          throughput_rows: Optional[list[dict[str, object]]] = None,
          texts: Optional[list[str]] = None, images: Optional[list[Path]] = None) -> Path:
    path = outdir / PAGE
    path.write_text(page(outdir, cells, meta, throughput_rows or [], texts or [],
                         images or []))
    return path
