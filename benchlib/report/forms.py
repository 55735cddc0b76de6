"""A run's report as files: report.txt (benchlib/report/report.py's text), report.json
(benchlib/report/report_json.py, which builds on report.py's cells) and junit.xml.
report.html is benchlib/report/report_html.py's.

Apart from both, so that neither of them imports the other back.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional, Sequence

from . import entropy_report
from .report import Cell, junit, text
from .report_json import as_json


def write(outdir: Path, cells: list[Cell], meta: dict[str, object],
          throughput_rows: Optional[list[dict[str, object]]] = None,
          entropy_cells: Optional[list[entropy_report.EntropyCell]] = None,
          plots: Sequence[Path] = (), notes: Sequence[str] = ()) -> str:
    """report.txt, report.json and junit.xml in outdir; the text, to print."""
    rows = throughput_rows or []
    said = text(cells, meta, outdir, rows, entropy_cells, plots, notes)
    (outdir / "report.txt").write_text(said + "\n")
    data = as_json(cells, meta, outdir, rows, entropy_cells, plots)
    (outdir / "report.json").write_text(json.dumps(data, indent=2, allow_nan=False) + "\n")
    junit(cells, rows).write(outdir / "junit.xml", encoding="unicode", xml_declaration=True)
    return said
