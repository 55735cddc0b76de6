"""The pytest side of the harness: the fixtures (plugin.py, which the root
conftest.py loads), made-up records (synthetic.py) and the variant tests' traced
boot (tracedboot.py).

Rule (pytest/test_architecture.py): only the tests import it.
"""
