"""The bench's harness: profiles, kernels, guests, boot records and reports.

Kept out of the test files so that tests, the pytest plugin (testing/plugin.py,
which the root conftest.py loads) and the commands (benchlib.commands.run, ...)
share one implementation. Importable from the repository's root.

It is split into wings, each a sub-package, and each wing imports only those below
it (pytest/test_architecture.py holds the rules and checks them):

  core      the foundation: errors, paths, variants, profiles, kernels, BootRecord
  checks    each variant's checks and the trace readers, on a BootRecord
  boot      one boot: plan, guest, channels, stages, record (the @@ protocol), hosts
  images    real userspace images: recipes, roots, image boots, first-boot traces
  report    the cells and their forms: text, JSON, JUnit, HTML, entropy, throughput
  commands  what boots things for a user: run, soak, overhead, irqsoff
  testing   the pytest side: fixtures, made-up records
"""
