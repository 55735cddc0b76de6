"""report.html renders in a real browser: the main job (benchlib.run, two boots of
the stock kernel in one profile) writes the page, and Debian's Chromium, headless
through chromedriver (python3-selenium), must show the table with a row per cell
and its verdict, and every plot decoded to a non-empty image. The page's links to
each boot's console log and domain XML must lead to files that exist. The page is
opened from a copy on its own, so a plot that is a file beside it, not inlined,
fails too.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

from benchlib import paths, report_html

PROFILE = "tcg-virtio-rng"      # ready within a second: a short boot
BOOTS = 2                       # more than one point per milestone row
RUN_TIMEOUT_S = 900
CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
CHROMIUM_FLAGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]
PAGE_LOAD_S = 60


@pytest.fixture(scope="module")
def report_dir(bench_variant, accel: str, run_dir: Path) -> Path:
    """The output folder of one main-job run: stock, one profile, two boots."""
    bench_variant("stock")      # with --kernel, skipped: this test reports the bench's own
    results = run_dir / "report-html-run"
    run = subprocess.run(
        [sys.executable, "-m", "benchlib.run", "--no-build", "--variant", "stock",
         "--profile", PROFILE, "--boots", str(BOOTS), "--cap", "30", "--no-throughput",
         "--no-clones", "--no-budget", "--no-entropy", "--accel", accel],
        cwd=paths.REPO / "pytest", capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
        env={**os.environ, "RESULTS_DIR": str(results)})
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    (outdir,) = [d for d in results.iterdir() if d.is_dir()]
    assert (outdir / report_html.PAGE).is_file(), f"no {report_html.PAGE} in {outdir}: {run.stdout}"
    return outdir


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    for binary in (CHROMIUM, CHROMEDRIVER):
        assert binary.is_file(), f"{binary} is missing: scripts/setup.sh installs chromium " \
                                 "and chromium-driver"
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    driver.set_page_load_timeout(PAGE_LOAD_S)
    driver.set_script_timeout(PAGE_LOAD_S)
    try:
        yield driver
    finally:
        driver.quit()


# What the browser made of the page: the matrix table's cells as text, and for each
# image its decoded size and the share of its pixels that came out opaque (drawn
# on a canvas: a PNG the browser could decode only in part leaves the rest
# transparent; matplotlib's figures are opaque throughout).
RENDERED_JS = """
const done = arguments[arguments.length - 1];
const rows = [...document.querySelectorAll('#matrix tr')].map(
    tr => [...tr.children].map(td => td.innerText.trim()));
const links = [...document.querySelectorAll('#matrix a')].map(a => a.getAttribute('href'));
Promise.all([...document.querySelectorAll('img')].map(async img => {
    try { await img.decode(); } catch (e) { return [img.className, 0, 0, 0]; }
    const canvas = document.createElement('canvas');
    canvas.width = img.naturalWidth; canvas.height = img.naturalHeight;
    const ctx = canvas.getContext('2d');
    ctx.drawImage(img, 0, 0);
    const px = ctx.getImageData(0, 0, canvas.width, canvas.height).data;
    let opaque = 0;
    for (let i = 3; i < px.length; i += 4) if (px[i] === 255) opaque++;
    return [img.className, img.naturalWidth, img.naturalHeight, opaque / (px.length / 4)];
})).then(images => done({rows: rows, images: images, links: links}));
"""
# Share of a plot's pixels that must be opaque once drawn.
MIN_OPAQUE = 0.99


def test_report_html_renders_table_and_plots_in_chromium(report_dir: Path, browser,
                                                         tmp_path: Path) -> None:
    # The page alone, away from its boots: the plots must be in it, not beside it.
    page = tmp_path / report_html.PAGE
    shutil.copy(report_dir / report_html.PAGE, page)
    browser.get(page.as_uri())
    seen = browser.execute_async_script(RENDERED_JS)
    cells = json.loads((report_dir / "report.json").read_text())["cells"]

    header, *rows = seen["rows"]
    assert header[:2] == ["profile", "variant"] and "verdict" in header, header
    assert len(rows) == len(cells) == 1, seen["rows"]
    verdict = rows[0][header.index("verdict")]
    assert (rows[0][:2], verdict) == ([PROFILE, "stock"], cells[0]["verdict"]), rows
    ready = rows[0][header.index("ready (printk)")]
    assert ready.endswith(f"{BOOTS}/{BOOTS}"), f"ready column '{ready}': not every boot counted"

    plots = [img for img in seen["images"] if img[0] == "milestones"]
    assert plots, f"no milestone plot in {page}: {seen['images']}"
    for name, width, height, opaque in seen["images"]:
        assert width > 0 and height > 0 and opaque >= MIN_OPAQUE, (
            f"{page}: Chromium did not render the '{name}' image: {width}×{height}, "
            f"{opaque:.0%} of its pixels drawn")

    assert len(seen["links"]) == 2 * BOOTS, seen["links"]
    for href in seen["links"]:
        assert (report_dir / href).is_file(), f"{page} links to '{href}', which does not exist"

