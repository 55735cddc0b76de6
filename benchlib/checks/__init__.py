"""The checks wing: each variant's checks and the trace readers.

They read a BootRecord (benchlib/core/bootrecord.py), however it was made: booted,
rebuilt from a results folder, or made up (benchlib/testing/synthetic.py).

Rule (pytest/test_architecture.py): imports the foundation only; never boot, images,
report or the commands.
"""
