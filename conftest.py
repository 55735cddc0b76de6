"""The suite's root conftest: it only loads the bench's two plugins.

- bench_options.py: the options and their checks, wherever pytest is started
  (tox.ini cannot name it: pytest-3, or a run from pytest/, could not import it
  then; `make test` also loads it with -p; loaded once either way);
- pytest/benchlib/plugin.py: the shared fixtures and hooks.
"""
import sys
from pathlib import Path

# benchlib (pytest/benchlib) and the test modules' helpers import from pytest/.
sys.path.insert(0, str(Path(__file__).parent / "pytest"))

pytest_plugins = ("bench_options", "benchlib.plugin")
