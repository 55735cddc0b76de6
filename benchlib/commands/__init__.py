"""The commands wing: what boots things for a user.

`python3 -m benchlib.commands.run` (make run: matrix.py's cells, clones.py's clone
check, imagerun.py's images, dryrun.py's plan, progress.py and eta.py), .soak,
.overhead and .irqsoff; options.py checks their arguments, and the suite's
(bench_options.py).

Rule (pytest/test_architecture.py): no other wing imports it.
"""
