"""Time-to-ready budgets: per profile, how long a kernel's RNG may take to be ready.

A budget file is TOML with one table:

    [ready_s]
    tcg-virtio-rng = 4.0     # seconds of guest printk time
    hyperv = 8.0

A cell (profile × variant) is judged on the median, over its boots, of the
variant's own ready milestone (variant.toml `ready`, or the first of `also_ready`):
over the budget, or a boot that never got ready, is a failed verdict in the report,
a non-zero exit of `make run`, and a failed test under `pytest --budget FILE`. A
profile the file does not name has no budget. vm-definitions/budgets.toml is the
default, with its numbers' provenance in it.
"""
from __future__ import annotations

import statistics
import tomllib
from pathlib import Path
from typing import Optional

from ..core.errors import BenchError
from ..core.paths import PROFILE_DIR
from ..core.profiles import all_profiles

DEFAULT_FILE = PROFILE_DIR / "budgets.toml"
TABLE = "ready_s"


class BadBudget(BenchError):
    """A budget file that cannot be used, named with what is wrong in it."""


def load(path: Path) -> dict[str, float]:
    """{profile: seconds} from a budget file; BadBudget naming the bad entry."""
    if not path.is_file():
        raise BadBudget(f"budget file '{path}' does not exist")
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise BadBudget(f"budget file '{path}': {exc}") from None
    if set(data) != {TABLE} or not isinstance(data[TABLE], dict):
        raise BadBudget(f"budget file '{path}': expected one table [{TABLE}], found "
                        f"{', '.join(sorted(data)) or 'nothing'}")
    known = all_profiles()
    budgets = {}
    for profile, seconds in data[TABLE].items():
        if profile not in known:
            raise BadBudget(f"budget file '{path}': unknown profile '{profile}' "
                            f"(known: {', '.join(known)})")
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds <= 0:
            raise BadBudget(f"budget file '{path}': {profile} = {seconds!r} is not a "
                            f"positive number of seconds")
        budgets[profile] = float(seconds)
    return budgets


def judge(ready_s: list[Optional[float]], budget_s: float) -> Optional[str]:
    """None if the boots' median time to ready is within the budget; else why not.
    A boot that never got ready (None) fails the budget: it gave no time to judge."""
    missing = sum(t is None for t in ready_s)
    if not ready_s:
        return "no boot to judge against the budget"
    if missing:
        return f"{missing}/{len(ready_s)} boot(s) never ready (budget {budget_s:g} s)"
    times = [t for t in ready_s if t is not None]
    median = statistics.median(times)
    if median > budget_s:
        return (f"over budget: ready median {median:.3f} s [{min(times):.3f}-{max(times):.3f}] "
                f"over {len(times)} boot(s) > {budget_s:g} s")
    return None
