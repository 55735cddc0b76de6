"""The suite's root conftest: it only loads the bench's two plugins.

- bench_options.py: the options and their checks, wherever pytest is started
  (tox.ini cannot name it: pytest-3, or a run from pytest/, could not import it
  then; `make test` also loads it with -p; loaded once either way);
- benchlib/testing/plugin.py: the shared fixtures and hooks.

Both import benchlib, the package beside this file: pytest puts this folder on
sys.path to import this conftest (its default import mode, "prepend"), and
`python3 -m pytest` from here has it there already.
"""
pytest_plugins = ("bench_options", "benchlib.testing.plugin")
