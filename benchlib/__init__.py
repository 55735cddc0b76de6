"""The bench's harness: profiles, kernels, guests, boot records and reports.

Kept out of the test files so that tests, the pytest plugin (plugin.py, which the
root conftest.py loads) and the main job (benchlib.run) share one implementation.
"""
