"""The boot wing: one boot of a guest, from its request to its record.

plan.py makes the BootRequest, guest.py boots it (channels, stages, the kernel's
reports), record.py parses what came back (the @@ protocol), hosts.py and remote.py
lend the hypervisors' slots, restore.py saves and clones a guest, accel.py probes the
accelerator.

Rule (pytest/test_architecture.py): never imports images, report or the commands.
"""
