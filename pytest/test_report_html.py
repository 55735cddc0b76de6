"""report.html renders in a real browser: the main job (benchlib.commands.run, two boots of
the stock kernel in one profile, with a time-to-ready budget) writes the page, and
Debian's Chromium, headless through chromedriver (python3-selenium), must show a
title naming the kernel, the profile and the date, a headline that agrees with the
run's exit code, the legend of the table's marks, the table with a row per cell,
its verdict and its budget, and every plot decoded to a non-empty image. Every
link of the page (each boot's console and data logs, the plots, the other reports)
must lead to a file that exists. The page is opened from a copy on its own, so a
plot that is a file beside it, not inlined, fails too.

The same run's report.json must fit benchlib/report/report.schema.json (Debian's
python3-jsonschema), and its report.txt a terminal (report.TEXT_WIDTH columns).
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

from benchlib.core import paths
from benchlib.report import report, report_html, report_json

PROFILE = "tcg-virtio-rng"      # ready within a second: a short boot
BOOTS = 2                       # more than one point per milestone row
# A budget every boot meets: the page must show it against the cell.
BUDGET_S = 120
RUN_TIMEOUT_S = 900
CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
CHROMIUM_FLAGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]
PAGE_LOAD_S = 60


@pytest.fixture(scope="module")
def report_dir(bench_variant, accel: str, run_dir: Path) -> Path:
    """The output folder of one main-job run: stock, one profile, two boots."""
    bench_variant("stock")      # with --kernel, skipped: this test reports the bench's own
    results = run_dir / "report-html-run"
    results.mkdir(parents=True, exist_ok=True)
    budget = results / "budgets.toml"
    budget.write_text(f"[ready_s]\n{PROFILE} = {BUDGET_S}.0\n")
    run = subprocess.run(
        [sys.executable, "-m", "benchlib.commands.run", "--no-build", "--variant", "stock",
         "--profile", PROFILE, "--boots", str(BOOTS), "--cap", "30", "--no-throughput",
         "--no-clones", "--budget", str(budget), "--no-entropy", "--accel", accel],
        cwd=paths.REPO, capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
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
const answer = [...document.querySelectorAll('#answer tr')].map(
    tr => [...tr.children].map(td => [td.innerText.trim(), td.className,
                                      td.getBoundingClientRect().top]));
const legendBox = document.querySelector('#legend-box');
const legendOpen = legendBox ? legendBox.open : true;
// What a reader sees once they open the folded parts (the legend, each cell's logs).
document.querySelectorAll('details').forEach(d => d.open = true);
const rows = [...document.querySelectorAll('#matrix tr')].map(
    tr => [...tr.children].map(td => td.innerText.trim()));
const links = [...document.querySelectorAll('a')].map(a => a.getAttribute('href'));
const legend = [...document.querySelectorAll('#legend dt')].map(
    dt => [dt.innerText.trim(), dt.nextElementSibling ? dt.nextElementSibling.innerText.trim() : '',
           dt.getBoundingClientRect().height > 0]);
const headline = document.querySelector('#headline');
const page = {title: document.title, h1: document.querySelector('h1').innerText.trim(),
              headline: headline ? headline.innerText.trim() : '',
              headlineClass: headline ? headline.className : ''};
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
})).then(images => done({rows: rows, images: images, links: links, legend: legend,
                         page: page, answer: answer, legendOpen: legendOpen,
                         matrixTop: document.querySelector('#matrix').getBoundingClientRect().top}));
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
    ready = rows[0][header.index(report.READY)]
    assert ready.rstrip(report.SHARED_MARK).endswith(f"{BOOTS}/{BOOTS}"), (
        f"ready column '{ready}': not every boot counted")

    plots = [img for img in seen["images"] if img[0] == "milestones"]
    assert plots, f"no milestone plot in {page}: {seen['images']}"
    for name, width, height, opaque in seen["images"]:
        assert width > 0 and height > 0 and opaque >= MIN_OPAQUE, (
            f"{page}: Chromium did not render the '{name}' image: {width}×{height}, "
            f"{opaque:.0%} of its pixels drawn")


def test_report_html_says_what_ran_when_and_whether_it_passed(report_dir: Path, browser
                                                               ) -> None:
    browser.get((report_dir / report_html.PAGE).as_uri())
    seen = browser.execute_async_script(RENDERED_JS)["page"]
    found = json.loads((report_dir / "report.json").read_text())
    day = found["meta"]["started"][:10]
    for part in ("stock", PROFILE, day):
        assert part in seen["title"] and part in seen["h1"], (
            f"the page's title '{seen['title']}' does not say '{part}'")
    # The run exited 0 (report_dir asserts it): the headline says it passed.
    assert seen["headline"] == found["result"]["headline"], seen
    assert seen["headline"].startswith("passed") and seen["headlineClass"] == "passed", seen


def test_report_html_shows_the_legend_and_the_budget(report_dir: Path, browser) -> None:
    browser.get((report_dir / report_html.PAGE).as_uri())
    seen = browser.execute_async_script(RENDERED_JS)
    shown = {term: explanation for term, explanation, visible in seen["legend"] if visible}
    for mark in ("median [min-max] n/N", report.SHARED_MARK, "> C s", "- 0/N",
                 report.CLONE_SAFE, report.BUDGET):
        assert shown.get(mark), f"the legend does not explain '{mark}': {seen['legend']}"
    for value in ("yes", "no: identical for N reads", "no driver"):
        assert value in shown[report.CLONE_SAFE], shown[report.CLONE_SAFE]

    header, row = seen["rows"]
    budget = row[header.index(report.BUDGET)]
    assert budget == f"{BUDGET_S} s: median met", f"the budget column says '{budget}'"


def test_report_html_links_lead_to_files(report_dir: Path, browser) -> None:
    """Every link, followed from the page's folder, is a file: each boot's console and
    data logs, domain XML and record, the plot files, report.txt/json, junit.xml."""
    browser.get((report_dir / report_html.PAGE).as_uri())
    links = browser.execute_async_script(RENDERED_JS)["links"]
    for href in links:
        assert (report_dir / href).is_file(), f"the page links to '{href}', which does not exist"
    names = [Path(href).name for href in links]
    for log in ("console.log", "data.log", report.BOOT_DOMAIN_XML, report.BOOT_RECORD):
        assert names.count(log) == BOOTS, f"{names.count(log)} links to a boot's {log}: {links}"
    for name in ("report.txt", "report.json", "junit.xml",
                 report_html.milestone_plot_path(report_dir, PROFILE).name):
        assert name in names, f"no link to {name}: {links}"


def test_report_json_of_a_real_run_fits_its_schema(report_dir: Path) -> None:
    try:
        report_json.validate(json.loads((report_dir / "report.json").read_text()))
    except ImportError:
        pytest.fail("python3-jsonschema is missing: scripts/setup.sh installs it")


def test_report_txt_of_a_real_run_fits_a_terminal(report_dir: Path) -> None:
    lines = (report_dir / "report.txt").read_text().splitlines()
    wide = [line for line in lines if len(line) > report.TEXT_WIDTH]
    assert not wide, f"report.txt lines over {report.TEXT_WIDTH} columns: {wide}"



def test_report_html_opens_with_the_answer(report_dir: Path, browser) -> None:
    """The first table is the answer: a square per profile × kernel, coloured by the
    verdict, with the time to the kernel's own (named) ready milestone; the legend is
    folded until opened."""
    browser.get((report_dir / report_html.PAGE).as_uri())
    seen = browser.execute_async_script(RENDERED_JS)
    cells = json.loads((report_dir / "report.json").read_text())["cells"]
    (head, *rows) = seen["answer"]
    assert [c[0] for c in head] == ["profile", "stock"], seen["answer"]
    assert len(rows) == 1 and rows[0][0][0] == PROFILE, seen["answer"]
    text, klass, top = rows[0][1]
    assert klass == {"ok": "ok", "not_ok": "bad"}.get(cells[0]["status"], klass), (klass, cells)
    assert text.startswith("ready ") and "(crng init done)" in text, text
    assert top < seen["matrixTop"], "the answer is not above the table of figures"
    assert not seen["legendOpen"], "the legend is open before the reader opens it"
