"""Time-to-ready budgets as tests: `pytest --budget FILE` makes one test per profile
in the file and kernel under test, test_ready_within_budget[profile-variant]. Each
boots the kernel --boots times with the matrix's probe (a blocking reader), takes
the variant's own ready milestone (guest printk time) from the kmsg dump, and fails
when the median is over the budget or a boot never got ready. The longest blocking
getrandom() wait of the same boots is recorded as a JUnit property."""
from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from benchlib.report import budgets
from benchlib.checks import measure
from benchlib.commands.matrix import MATRIX_PROBE_FLAGS


def test_ready_within_budget(budget_case, boot_guest, request, record_property) -> None:
    profile, variant, budget_s = budget_case
    boots = request.config.getoption("--boots")
    records = [boot_guest(profile, tasks=["probe"], variant=variant,
                          params={"probe": MATRIX_PROBE_FLAGS}) for _ in range(boots)]
    ready = [measure.ready_printk(r) for r in records]
    waits = [w for w in (measure.blocking_wait(r) for r in records) if w is not None]
    times = [t for t in ready if t is not None]
    if times:
        record_property("ready_median_s", round(statistics.median(times), 3))
    if waits:
        record_property("longest_blocking_wait_s", round(max(waits), 3))
    verdict = budgets.judge(ready, budget_s)
    assert verdict is None, (f"{profile} × {variant}: {verdict}; console logs: "
                             + " ".join(str(r.console_log) for r in records))


def test_budget_file_errors_name_the_bad_entry(tmp_path: Path) -> None:
    """Budget files are checked at load: one line naming the bad value."""
    cases = {"[ready_s]\nno-such-profile = 2.0\n": "unknown profile 'no-such-profile'",
             "[ready_s]\ntcg-quiet = -1\n": "tcg-quiet = -1 is not a positive number",
             "[ready_s]\ntcg-quiet = \"fast\"\n": "tcg-quiet = 'fast' is not a positive",
             "[limits]\ntcg-quiet = 2\n": r"expected one table \[ready_s\], found limits",
             "[ready_s\n": "budget file"}
    for i, (text, message) in enumerate(cases.items()):
        path = tmp_path / f"b{i}.toml"
        path.write_text(text)
        with pytest.raises(budgets.BadBudget, match=message):
            budgets.load(path)
    assert budgets.load(budgets.DEFAULT_FILE), "the shipped budget file is empty"


def test_budget_judged_on_the_median() -> None:
    assert budgets.judge([1.0, 9.0, 2.0], 3.0) is None        # median 2.0
    assert budgets.judge([4.0, 1.0, 5.0], 3.0).startswith("over budget: ready median 4.000")
    assert budgets.judge([1.0, None, 1.0], 3.0).startswith("1/3 boot(s) never ready")
    assert budgets.judge([], 3.0) == "no boot to judge against the budget"
