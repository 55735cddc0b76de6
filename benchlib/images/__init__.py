"""The images wing: real userspace images booted on the bench's kernels.

images.py builds (or finds cached) an image's root from its recipe, imageboot.py boots
it and firstboot.py reads its first boot's trace. `python3 -m benchlib.images.images`
builds the roots (make images).

Rule (pytest/test_architecture.py): never imports report or the commands.
"""
