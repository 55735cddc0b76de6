"""The foundation wing: what every other wing uses, and nothing of theirs.

Errors, the repository's paths, defaults, the variants (kernel/patches/*/variant.toml),
the profiles (vm-definitions/), the kernels and their configs and modules, a user's
kernel, the tasks a boot can run, the commands' exit codes, and the BootRecord that
a boot's channels are parsed into (bootrecord.py).

Rule (pytest/test_architecture.py): imports no other wing.
"""
