"""The RNG's user-space interface, as 6.1 defines it, for every variant: read,
write and poll on /dev/random and /dev/urandom; every ioctl as root and, for the
privileged ones, EPERM for an unprivileged user; getrandom()'s flags (INSECURE with
RANDOM, or an unknown flag, is EINVAL); every sysctl readable with a sane value,
boot_id stable within a boot, uuid fresh on each read. A replacement RNG (lrng)
must keep all of it. The guest side is fixtures/rngabi.c; a check it did not
report is a failure, as a failed one is."""
from __future__ import annotations


PROFILE = "tcg-virtio-rng"     # ready at once in every variant: nothing blocks
PRIVILEGED = ("RNDADDTOENTCNT", "RNDADDENTROPY", "RNDZAPENTCNT", "RNDCLEARPOOL",
              "RNDRESEEDCRNG")
EXPECTED_CHECKS = (
    *(f"{dev}_{op}" for dev in ("random", "urandom") for op in ("open", "read", "write", "poll")),
    "getrandom_default", "getrandom_nonblock", "getrandom_random", "getrandom_insecure",
    "getrandom_insecure_random_einval", "getrandom_unknown_flag_einval",
    "ioctl_RNDGETENTCNT", *(f"ioctl_{name}_root" for name in PRIVILEGED),
    "ioctl_RNDGETENTCNT_user", *(f"ioctl_{name}_user_eperm" for name in PRIVILEGED),
    *(f"sysctl_{name}" for name in ("poolsize", "entropy_avail", "write_wakeup_threshold",
                                    "urandom_min_reseed_secs")),
    "sysctl_boot_id_stable", "sysctl_uuid_fresh",
)


def test_abi_from_user_space(boot_guest, variant: str) -> None:
    record = boot_guest(PROFILE, tasks=["abi"], variant=variant)
    task = record.task("abi")
    checks = {p["check"]: p for p in record.probe_events("abi")}
    missing = [name for name in EXPECTED_CHECKS if name not in checks]
    assert not missing, f"{variant}: checks never reported: {missing} ({record.data_log})"
    failed = [f"{name}: {checks[name].get('text', '')}"
              for name in EXPECTED_CHECKS if checks[name]["result"] != "ok"]
    assert not failed, f"{variant}: " + "; ".join(failed) + f" ({record.data_log})"
    assert task.rc == 0, f"{variant}: rngabi exited {task.rc} ({record.data_log})"
