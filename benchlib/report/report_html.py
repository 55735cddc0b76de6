"""The main job's report as one page people look at: results/<timestamp>/report.html.

The page says what ran (which kernels, which profiles) and when, and whether the
run failed, by the rule its exit code follows (report.run_failed: a cell not ok or
a variant's getrandom() throughput over budget or not judged). Then the answer at a
glance: a profile × kernel grid, each square coloured by its verdict with the time
to the kernel's own ready milestone (named) and the clone-safe verdict. Then: a
legend of the tables' marks (folded); the profile × variant table (each figure as
report.txt gives it, the ready budget against it, the verdict, each boot's logs
folded); the verdicts; the
getrandom() throughput table; the entropy tables and findings; one plot per
profile of the time to each milestone (every boot a point, the median a bar) and
the entropy plots; and links to every file of the run beside the page.

It is self-contained: the plots are PNG files in the report's folder (Debian's
python3-matplotlib, off screen), inlined as data URIs as well, so the page can be
mailed or attached to a CI job alone; the files and logs are links relative to it.
"""
from __future__ import annotations

import base64
import html
import io
import re
import statistics
from pathlib import Path
from typing import Any, Iterable, Optional, Sequence

from . import entropy_report, throughput
from ..core.errors import BadKernel
from .report import (BOOT_DOMAIN_XML, BOOT_RECORD, BUDGET, LEGEND_ITEMS, READY, SHARED_MARK,
                     VERDICT, Cell, cell_hosts, cell_text, columns, headline, host_labels,
                     hosts_legend, own_milestones, relative, run_failed, run_summary, title,
                     variant_spec, verdict_text)

PAGE = "report.html"
# The report's other files, linked from the page when they are there.
REPORT_FILES = ("report.txt", "report.json", "junit.xml", "throughput.json")
# One PNG per profile: the time to each milestone.
MILESTONE_PLOT = "milestones-{}.png"
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
td.ok, li.ok { background: #dfd; } td.bad, li.bad { background: #fdd; }
td.skip, li.skip { background: #eee; } td.finding, li.finding { background: #ffe9b3; }
td.num { text-align: right; }
#headline { font-size: 120%; font-weight: bold; padding: 0.3em 0.5em; }
#headline.passed { background: #dfd; } #headline.failed { background: #fdd; }
dl#legend { display: grid; grid-template-columns: max-content auto; gap: 0.2em 1em; }
dl#legend dt { font-family: monospace; font-weight: bold; }
dl#legend dd { margin: 0; }
figure { margin: 0.5em 0 1.5em; }
img { max-width: 100%; border: 1px solid #ccc; margin: 0.3em 0; }
"""


def _esc(value: object) -> str:
    return html.escape(str(value))


def _png_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def _verdict_class(cell: Cell) -> str:
    return {"skipped": "skip", "ok": "ok", "not_ready": "finding",
            "clone_unsafe": "finding"}.get(cell.status(), "bad")


def _link(outdir: Path, path: object, label: str) -> str:
    return f'<a href="{_esc(relative(path, outdir))}">{_esc(label)}</a>'


def _boot_links(cell: Cell, outdir: Path, labels: dict[str, str]) -> str:
    """Per boot: its console and data logs, its domain XML and record when there, and
    its host (by its label, h1, h2..., when there are several)."""
    links = []
    for record in cell.records:
        folder = record.console_log.parent
        files = [_link(outdir, record.console_log, "console.log"),
                 _link(outdir, record.data_log, "data.log")]
        files += [_link(outdir, folder / name, label)
                  for name, label in ((BOOT_DOMAIN_XML, "domain XML"), (BOOT_RECORD, "record"))
                  if (folder / name).is_file()]
        shared = f" {SHARED_MARK}" if record.shared_host else ""
        host = labels.get(record.host, record.host) if len(labels) > 1 else record.host
        links.append(f"{_esc(record.name)}: {' '.join(files)} on {_esc(host)}{shared}")
    for view_name, view in _clone_views(cell):
        log = Path(str(view.get("data_log", "")))
        files = [_link(outdir, log, "data.log")]
        if (log.parent / "console.log").is_file():
            files.insert(0, _link(outdir, log.parent / "console.log", "console.log"))
        links.append(f"clone {_esc(view_name)}: {' '.join(files)}")
    links += [f"failed: {_esc(failure)}" for failure in cell.failures]
    if not links:
        return ""
    return (f"<details><summary>{len(links)} boot(s): logs</summary>"
            + "<br>".join(links) + "</details>")


def _clone_views(cell: Cell) -> list[tuple[str, dict[str, Any]]]:
    views = (cell.clone or {}).get("clones") or {}
    return [(str(name), view) for name, view in views.items()
            if isinstance(view, dict) and view.get("data_log")] if isinstance(views, dict) else []


def _budget_class(cell: Cell) -> str:
    met = cell.budget_met()
    return "" if met is None else (" class='ok'" if met else " class='bad'")


def matrix_table(cells: list[Cell], outdir: Path) -> str:
    """The profile × variant table: time to ready against the profile's budget, each
    of the variant's milestones, the other figures, the verdict and the boots' logs."""
    every = {m for c in cells for m in own_milestones(c.variant)}
    others = [n for n in columns(cells) if n != READY and n not in every]
    labels = host_labels(cells)
    heads = ["profile", "variant", READY, BUDGET, "milestones", *others,
             *(["hosts"] if len(labels) > 1 else []), VERDICT, "boots"]
    out = ["<table id='matrix'>", "<tr>" + "".join(f"<th>{_esc(h)}</th>" for h in heads) + "</tr>"]
    for cell in cells:
        samples = {} if cell.skipped else cell.samples()

        def figure(name: str) -> str:
            return "" if cell.skipped else _esc(cell_text(cell, name, samples))

        milestones = "<br>".join(f"{_esc(m)}: {figure(m)}" for m in own_milestones(cell.variant)) \
            if not cell.skipped else ""
        row = [f"<td>{_esc(cell.profile)}</td>", f"<td>{_esc(cell.variant)}</td>",
               f"<td>{figure(READY)}</td>",
               f"<td{_budget_class(cell)}>{_esc(cell.budget_text())}</td>",
               f"<td>{milestones}</td>", *(f"<td>{figure(name)}</td>" for name in others)]
        if len(labels) > 1:
            row.append(f"<td>{_esc(cell_hosts(cell, labels))}</td>")
        row += [f"<td class='{_verdict_class(cell)}'>{_esc(verdict_text(cell, outdir))}</td>",
                f"<td>{_boot_links(cell, outdir, labels)}</td>"]
        out.append("<tr>" + "".join(row) + "</tr>")
    out.append("</table>")
    return "\n".join(out)


def legend() -> str:
    """What the tables' marks and figures mean (report.LEGEND_ITEMS), folded."""
    return ("<details id='legend-box'><summary>Legend: what each mark and figure means"
            "</summary><dl id='legend'>"
            + "".join(f"<dt>{_esc(term)}</dt><dd>{_esc(text)}</dd>"
                      for term, text in LEGEND_ITEMS) + "</dl></details>")


def _answer_cell(cell: Cell) -> str:
    """One square of the answer: coloured by the verdict, the median time to the
    variant's own ready milestone (named: the kernels' "ready" differ), the
    clone-safe verdict, and the verdict in full on hovering."""
    if cell.skipped:
        said = ["skipped"]
    else:
        ready = cell.samples().get(READY, [])
        spec = variant_spec(cell.variant)
        event = f" ({spec.ready})" if spec else ""
        said = [f"ready {statistics.median(ready):.2f} s{event}" if ready
                else f"not ready{event}"]
        said += [f"clone-safe: {cell.clone_safe}"] if cell.clone_safe else []
        said += [f"{cell.status().replace('_', ' ')}"]
    return (f"<td class='{_verdict_class(cell)}' title='{_esc(cell.verdict())}'>"
            + "<br>".join(_esc(line) for line in said) + "</td>")


def answer_grid(cells: list[Cell]) -> str:
    """The answer first: a profile a row, a kernel a column, each square coloured by
    its verdict (green ok, amber a finding, red not ok, grey skipped)."""
    variants = list(dict.fromkeys(c.variant for c in cells))
    profiles = list(dict.fromkeys(c.profile for c in cells))
    by = {(c.profile, c.variant): c for c in cells}
    out = ["<table id='answer'><tr><th>profile</th>"
           + "".join(f"<th>{_esc(v)}</th>" for v in variants) + "</tr>"]
    for profile in profiles:
        out.append(f"<tr><th>{_esc(profile)}</th>" + "".join(
            _answer_cell(by[(profile, v)]) if (profile, v) in by else "<td>-</td>"
            for v in variants) + "</tr>")
    out.append("</table>")
    return "\n".join(out)


def throughput_table(rows: Sequence[dict[str, Any]]) -> str:
    """getrandom() throughput per measure, variant and case, against the baseline's."""
    return "\n".join(_measure_table(m, [r for r in rows if r["profile"] == m.profile])
                     for m in throughput.MEASURES if any(r["profile"] == m.profile for r in rows))


def _measure_table(way: throughput.Measure, rows: Sequence[dict[str, Any]]) -> str:
    heads = ["variant", "threads", "request (bytes)", "MB/s median", "min", "max", "boots",
             f"vs {throughput.BASELINE}", "budget"]
    out = [f"<p>Measured in {_esc(way.profile)} ({_esc(way.question)}), one boot per variant "
           f"in turn; a variant fails under {way.min_ratio:g} of {_esc(throughput.BASELINE)}, "
           f"judged on medians of at least {way.min_boots} boot(s).</p>",
           f"<table id='throughput-{_esc(way.name)}'>",
           "<tr>" + "".join(f"<th>{_esc(h)}</th>" for h in heads) + "</tr>"]
    for r in rows:
        ratio = "-" if r["ratio_to_stock"] is None else f"{r['ratio_to_stock']:.3f}"
        klass = {True: " class='ok'", False: " class='bad'"}.get(
            r["within_budget"], " class='bad'" if r in throughput.unjudged([r]) else "")
        nums = [r["threads"], r["request_bytes"], f"{r['median_mb_s']:.2f}",
                f"{r['min_mb_s']:.2f}", f"{r['max_mb_s']:.2f}", r["boots"], ratio]
        out.append(f"<tr><td>{_esc(r['variant'])}</td>"
                   + "".join(f"<td class='num'>{_esc(n)}</td>" for n in nums)
                   + f"<td{klass}>{_esc(throughput.judgement(r) or '-')}</td></tr>")
    out.append("</table>")
    return "\n".join(out)


def _html_table(table_id: str, heads: Sequence[str], rows: Iterable[Sequence[str]],
                numeric: set[int]) -> str:
    out = [f"<table id='{table_id}'>",
           "<tr>" + "".join(f"<th>{_esc(h)}</th>" for h in heads) + "</tr>"]
    for row in rows:
        out.append("<tr>" + "".join(
            f"<td class='num'>{_esc(v)}</td>" if i in numeric else f"<td>{_esc(v)}</td>"
            for i, v in enumerate(row)) + "</tr>")
    return "\n".join([*out, "</table>"])


def entropy_section(found: Optional[list[entropy_report.EntropyCell]]) -> str:
    """The entropy tables (per cell; behind each milestone), findings and caveat."""
    if found is None:
        return ""
    out = [f"<p>{_esc(entropy_report.TITLE)}.</p>",
           _html_table("entropy", entropy_report.MAIN_HEADER,
                       (entropy_report.main_rows(c) for c in found), {2, 4, 5})]
    behind = [row for c in found for row in entropy_report.behind_rows(c)]
    if behind:
        out += ["<p>Entropy behind each milestone that claims bits: the interrupts sampled "
                "before it (kprobe trace) × the measured min-entropy per interrupt = the bits "
                "that stood behind it, against the bits the design claims there.</p>",
                _html_table("entropy-behind", entropy_report.BEHIND_HEADER, behind,
                            {3, 4, 5, 6})]
    findings = [f for c in found for f in c.findings()]
    if findings:
        out.append("<h3>Findings</h3><ul id='findings'>"
                   + "".join(f"<li>{_esc(f)}</li>" for f in findings) + "</ul>")
    out.append(f"<p>{_esc(entropy_report.CAVEAT)}</p>")
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


def milestone_plot_path(outdir: Path, profile: str) -> Path:
    return outdir / MILESTONE_PLOT.format(re.sub(r"[^A-Za-z0-9_.-]", "_", profile))


def milestone_plots(outdir: Path, cells: list[Cell]) -> list[Path]:
    """One PNG per profile with a boot that reached a milestone, in outdir; the
    paths written. ImportError without python3-matplotlib."""
    written = []
    for profile in dict.fromkeys(c.profile for c in cells):
        points = milestone_points(c for c in cells if c.profile == profile and c.records)
        if points:
            path = milestone_plot_path(outdir, profile)
            path.write_bytes(milestone_plot(profile, points))
            written.append(path)
    return written


def _figure(outdir: Path, path: Path, kind: str, alt: str) -> str:
    """A plot inlined (the page stands alone) with a link to its file."""
    return (f"<figure><img class='{kind}' alt='{_esc(alt)}' src='{_png_uri(path.read_bytes())}'>"
            f"<figcaption>{_link(outdir, path, path.name)}</figcaption></figure>")


def plots_section(outdir: Path, cells: list[Cell], plots: Sequence[Path]) -> str:
    out = []
    for profile in dict.fromkeys(c.profile for c in cells):
        path = milestone_plot_path(outdir, profile)
        if path in plots and path.is_file():
            out.append(_figure(outdir, path, "milestones", f"{profile}: time to each milestone"))
        else:
            out.append(f"<p>{_esc(profile)}: no plot (no boot reached a milestone, or "
                       "python3-matplotlib is missing).</p>")
    return "\n".join(out)


def files_section(outdir: Path, plots: Sequence[Path]) -> str:
    """Links to the report's files and plots (the boots' logs are in the table)."""
    files = [outdir / name for name in REPORT_FILES if (outdir / name).is_file()]
    items = [_link(outdir, p, p.name) for p in [*files, *plots] if p.is_file()]
    return "<ul id='files'>" + "".join(f"<li>{item}</li>" for item in items) + "</ul>"


def _run_lines(meta: dict[str, Any]) -> str:
    said = run_summary(meta)
    out = [f"<p id='run'>Run: {_esc(said)}.</p>"] if said else []
    if meta.get("command_line"):
        out.append(f"<p>Command: <code>{_esc(meta['command_line'])}</code></p>")
    return "\n".join(out)


def _kernels_table(meta: dict[str, Any]) -> str:
    rows = "".join(f"<tr><td>{_esc(k.get('variant'))}</td><td>{_esc(k.get('image'))}</td>"
                   f"<td>{_esc(k.get('version'))}</td></tr>" for k in meta.get("kernels") or [])
    rows += "".join(f"<tr><td>QEMU ({_esc(', '.join(q.get('profiles') or []))})</td>"
                    f"<td>{_esc(q.get('emulator'))}</td><td>{_esc(q.get('version') or '?')}"
                    f"</td></tr>" for q in meta.get("qemu") or [])
    return ("<table id='kernels'><tr><th>what</th><th>binary</th><th>version</th></tr>"
            f"{rows}</table>")


def page(outdir: Path, cells: list[Cell], meta: dict[str, Any],
         throughput_rows: Sequence[dict[str, Any]] = (),
         entropy_cells: Optional[list[entropy_report.EntropyCell]] = None,
         plots: Sequence[Path] = (), notes: Sequence[str] = ()) -> str:
    """The whole page. plots: the PNG files of the run (milestone_plots, the entropy
    plots), each inlined and linked; notes: what else to say (a plot not made)."""
    rows = list(throughput_rows)
    name = title(cells, meta)
    verdicts = "".join(
        f"<li class='{_verdict_class(c)}'>{_esc(c.profile)} × {_esc(c.variant)}: "
        f"{_esc(verdict_text(c, outdir))}</li>" for c in cells)
    milestone_files = {milestone_plot_path(outdir, c.profile) for c in cells}
    others = [p for p in plots if p not in milestone_files and p.is_file()]
    entropy = entropy_section(entropy_cells)
    entropy += "".join(_figure(outdir, p, "entropy", p.name) for p in others)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>{_esc(name)}</title>
<style>{STYLE}</style></head>
<body>
<h1>{_esc(name)}</h1>
<p id="headline" class="{'failed' if run_failed(cells, rows) or meta.get('interrupted') else 'passed'}">{
    _esc(('INCOMPLETE: ' + str(meta['interrupted']) + '. ') if meta.get('interrupted') else '')}{
    _esc(headline(cells, rows))}</p>
<h2>The answer: profile × kernel</h2>
{answer_grid(cells)}
{_run_lines(meta)}
{_kernels_table(meta)}
<h2>Profile × variant, in figures</h2>
{legend()}
{matrix_table(cells, outdir)}
{"".join(f"<p class='hosts'>{_esc(line.strip())}</p>" for line in hosts_legend(cells))}
<h2>Verdicts</h2>
<ul id="verdicts">{verdicts}</ul>
{f"<h2>getrandom() throughput</h2>{throughput_table(rows)}" if rows else ""}
<h2>Time to each milestone</h2>
{plots_section(outdir, cells, plots)}
{f"<h2>Entropy</h2>{entropy}" if entropy else ""}
<h2>Files</h2>
{files_section(outdir, plots)}
{"".join(f"<p class='note'>{_esc(note)}</p>" for note in notes)}
</body></html>
"""


def write(outdir: Path, cells: list[Cell], meta: dict[str, Any],
          throughput_rows: Optional[list[dict[str, Any]]] = None,
          entropy_cells: Optional[list[entropy_report.EntropyCell]] = None,
          plots: Sequence[Path] = (), notes: Sequence[str] = ()) -> Path:
    path = outdir / PAGE
    path.write_text(page(outdir, cells, meta, throughput_rows or [], entropy_cells, plots,
                         notes))
    return path
