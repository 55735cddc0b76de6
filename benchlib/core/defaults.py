"""Every default a bench boot has, once. The host always puts these on the
guest's command line (bench.*), so the init's own fallbacks (fixtures/init,
for a guest booted by hand) never decide; test_defaults.py checks that they
agree with these."""
from __future__ import annotations

# How long the probe waits for the RNG to be ready (bench.timeout).
PROBE_TIMEOUT_S = 60
# How long a boot may wait for its variant's final milestone (bench.until_cap),
# and how long the entropy capture records interrupts (bench.entropy_cap).
CAP_S = 300
# The bench.* parameters with a host-side default, and the default.
GUEST_PARAMS: dict[str, float] = {
    "timeout": PROBE_TIMEOUT_S,
    "until_cap": CAP_S,
    "entropy_cap": CAP_S,
}
