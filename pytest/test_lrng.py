"""The lrng variant: Stephan Müller's 2016 LRNG on 6.1 (kernel/patches/lrng).

Each interrupt's time stamp that passes the stuck test is folded to one bit into
the pool and credited 256/288 bits; the primary DRBG is initially seeded from 32
interrupts, minimally seeded at 112 bits (128 interrupts), fully seeded at 256 bits
(288 interrupts). Per-node secondary DRBGs serve the callers; node 0's, seeded
from the fully seeded primary, is 6.1's "ready" ("node 0 seeded").

Evidence comes from outside the series: the kernel log's order (the probe's
/dev/kmsg markers against the stage messages) and a kprobe trace armed on the
kernel command line (fixtures/trace-lrng-boot: the kprobes of trace-lrng, and the
function tracer from boot on the interrupts' path). The probe runs before anything in the
guest writes to a tty, so the stages are there to be seen; each boot stays up
until fully seeded (console noise, started once the probe's early calls are in
flight, supplies the interrupts). The headline crediting check also runs on
test-lrng-fullbit, a kernel that credits a full bit per interrupt, where it must
fail, as must test-lrng-earlyinit and test-lrng-earlymin at the first and second
stages. The ABI tests (test_rng_abi.py) and the VMBus tests (test_vmbus.py) run for
lrng as for every variant.
"""
from __future__ import annotations

import pytest

from benchlib.checks import lrngcheck, milestones, wakes
from benchlib.testing import tracedboot
from benchlib.checks.ordering import (assert_nonblock_eagain_until_ready, blocking_return_time,
                                      ready_position)
from benchlib.core.profiles import QUIET, Needs, get_profile
from benchlib.core.bootrecord import BootRecord

VARIANT = "lrng"
# The tests' trace set: the kprobes, and the function tracer from boot (every
# interrupt counted, those before the kprobes included).
LRNG_TRACE = "lrng-boot"
# The clone test's trace set: the secondary DRBGs' reseeds (lrng_sdrbg_inject()).
CLONE_TRACE = "clone-lrng"
FULLBIT = "test-lrng-fullbit"
# Minimally seeded after 64 interrupts (56 bits), not 128: wrong at stage 2 alone.
EARLYMIN = "test-lrng-earlymin"
# Each interrupt counted twice until initially seeded: wrong from stage 1 on, the
# series' own count agreeing with itself.
EARLYINIT = "test-lrng-earlyinit"
# Blocked readers woken a second after readiness (a delayed work): late on purpose.
LATEWAKE = "test-lrng-latewake"
# A kernel whose DRBG fails its known-answer test at boot (a wrong expected byte).
KATFAIL = "test-lrng-katfail"
INTERRUPT_ONLY = Needs(interrupt_only=True, hyperv=False)
HYPERV_INTERRUPT_ONLY = Needs(interrupt_only=True, hyperv=True)
DIRECT_SEED = Needs(interrupt_only=False, hyperv=False, numa_nodes=1)
# Interrupt timing that follows the instruction count (-icount): the same number of
# interrupts before the DRBGs' first seeding at every boot (30, so test-lrng-earlyinit
# is initially seeded below the 32 it should wait for, every time).
DETERMINISTIC = Needs(interrupt_only=True, hyperv=False, deterministic=True)
NUMA = Needs(numa_nodes=2, hyperv=False)
# A guest with the CPU's RNG (RDRAND/RDSEED) and one without, both traced anyway.
# Ready at once, so that nothing but the writes below is in question.
WRITES_PROFILE = Needs(virtio_rng=True, hyperv=False, numa_nodes=1)
CPU_RNG = Needs(first=True, cpu_rng=True, hyperv=False, numa_nodes=1)
LRNG_TASKS = ("probe", "until", "lrngstate", "crypto")
# With the DRBGs out of service the probe's calls return at once; a kernel that
# blocks them is seen at this timeout instead of the default 60 s.
KATFAIL_PROBE_TIMEOUT_S = 20


@pytest.fixture(scope="module")
def lrng_boot(boot_guest, bench_variant):
    """lrng_boot(profile, variant="lrng") -> the record of one traced boot (cached)."""
    return tracedboot.cached(boot_guest, bench_variant, VARIANT, LRNG_TASKS, trace=LRNG_TRACE)


def ready(record: BootRecord) -> tuple[int, float]:
    spec = record.spec()
    return ready_position(record, spec.pattern(spec.ready).search, spec.ready)


# ---- Stages --------------------------------------------------------------------------

@pytest.mark.profiles(INTERRUPT_ONLY, HYPERV_INTERRUPT_ONLY, DIRECT_SEED)
def test_lrng_stages_printed_in_order(lrng_boot, profile: str) -> None:
    record = lrng_boot(profile)
    milestones.assert_in_order(record,
                               all_required=get_profile(profile).caps.interrupt_only)


# ---- Who blocks --------------------------------------------------------------------------

@pytest.mark.profiles(QUIET)
def test_lrng_nonblock_eagain_until_fully_seeded(lrng_boot, profile: str) -> None:
    record = lrng_boot(profile)
    first_call = record.probe_event("nonblock_first")
    assert first_call, f"the probe made no GRND_NONBLOCK call ({record.data_log})"
    assert first_call["errno"] == "EAGAIN", (
        f"the first GRND_NONBLOCK call at {first_call['t']} s already succeeded: the probe "
        "never saw the LRNG before it was fully seeded")
    assert_nonblock_eagain_until_ready(record, ready(record), record.spec().ready)


@pytest.mark.profiles(QUIET)
def test_lrng_blocking_getrandom_returns_at_fully_seeded(lrng_boot, profile: str) -> None:
    record = lrng_boot(profile)
    killed = record.probe_event("blocking_timeout")
    assert not killed, f"blocking getrandom() was still blocked at the probe's limit: {killed}"
    blocking_return_time(record, ready(record), record.spec().ready, must_start_before=True)


def assert_blocking_woken_at_ready(record: BootRecord) -> str:
    """The blocked reader was woken at readiness (before node 0's message), never
    after it; says by what."""
    at = ready(record)
    woken = wakes.assert_not_woken_after_ready(record, at[1], record.spec().ready)
    assert woken, (f"the blocked reader was never woken: the LRNG's readers sleep until "
                   f"woken ({record.data_log})")
    return f"woken at {woken.t:.6f} s by {wakes.waker(woken)}"


@pytest.mark.profiles(QUIET)
def test_lrng_blocking_getrandom_woken_at_ready_not_later(lrng_boot, profile: str) -> None:
    print(f"\n{profile}: {assert_blocking_woken_at_ready(lrng_boot(profile))}")


def test_lrng_negative_control_latewake_wakes_after_ready(lrng_boot) -> None:
    """Blocked readers woken a second after readiness on purpose: the check from
    above must fail, where the one from below passes."""
    record = lrng_boot(QUIET.one(), LATEWAKE)
    blocking_return_time(record, ready(record), record.spec().ready, must_start_before=True)
    with pytest.raises(AssertionError, match="slept on past"):
        assert_blocking_woken_at_ready(record)


# ---- Crediting, seen by kprobes -----------------------------------------------------------

@pytest.mark.profiles(INTERRUPT_ONLY)
def test_lrng_stage_thresholds_from_the_trace(lrng_boot, profile: str) -> None:
    windows = lrngcheck.assert_stage_thresholds(lrng_boot(profile))
    print(f"\n{profile}: " + "; ".join(str(w) for w in windows))


def test_lrng_negative_control_fullbit_fails_the_thresholds(lrng_boot) -> None:
    """A full bit per interrupt, on purpose: fully seeded on 256 interrupts' credits,
    32 short of the seed's 288, however many more the pool held when it was read."""
    record = lrng_boot(QUIET.one(), FULLBIT)
    with pytest.raises(AssertionError, match="fully seeded after"):
        lrngcheck.assert_stage_thresholds(record)


def test_lrng_negative_control_earlyinit_fails_the_thresholds(lrng_boot) -> None:
    """Initially seeded on purpose from a pool the series counts as 32 interrupts
    when fewer went in: only the trace's own count, from boot, sees it. (The first
    seeding waits for the DRBGs, at late_initcall, with every interrupt since boot
    in the pool: in a deterministic profile always the same number, below 32.)"""
    record = lrng_boot(DETERMINISTIC.one(), EARLYINIT)
    with pytest.raises(AssertionError, match="initially seeded after"):
        lrngcheck.assert_stage_thresholds(record)


def test_lrng_negative_control_earlymin_fails_the_thresholds(lrng_boot) -> None:
    """Minimally seeded on purpose after 64 interrupts' credits, half the seed's 128,
    with stages 1 and 3 right: the second stage's check must fail on its own."""
    record = lrng_boot(QUIET.one(), EARLYMIN)
    with pytest.raises(AssertionError, match="minimally seeded after"):
        lrngcheck.assert_stage_thresholds(record)


# ---- The CPU's RNG ---------------------------------------------------------------------------

@pytest.mark.profiles(CPU_RNG, QUIET.first_only())
def test_lrng_seeds_its_primary_drbg_with_the_cpu_rng(lrng_boot, profile: str) -> None:
    """Each seeding from the noise sources leads with 256 bits of RDRAND/RDSEED output
    where the guest has them, credited 8 bits with random.trust_cpu=on; zeros and no
    extra credit where it has none. 6.1's arch_get_random_longs() gives one long per
    call on x86: a port that asks for four at once gets nothing."""
    caps = get_profile(profile).caps
    found = lrngcheck.assert_cpu_rng_in_seedings(lrng_boot(profile), caps.cpu_rng,
                                                 caps.trusted_rdrand)
    print(f"\n{profile}: " + "; ".join(map(str, found[:3])))


# ---- RNDADDENTROPY ------------------------------------------------------------------------

@pytest.mark.profiles(QUIET)
def test_lrng_seeds_hold_only_what_the_sources_wrote(lrng_boot, profile: str) -> None:
    """A seeding short of the full 288 interrupts reads fewer pool words than its
    buffer has room for; the primary DRBG is seeded with the CPU RNG's 32 bytes and
    those words only, never with the buffer's stale rest (the trace's seed length
    against the bits each pool read credited)."""
    lrngcheck.assert_seeds_hold_only_what_was_read(lrng_boot(profile))


def test_lrng_rndaddentropy_credits_only_a_whole_write(boot_guest, bench_variant) -> None:
    """6.1 credits RNDADDENTROPY only once all of the data is in: a write that faults
    part-way fails with EFAULT and credits nothing (fixtures/addentropy.c)."""
    record = boot_guest(WRITES_PROFILE.one(), tasks=["addentropy"], variant=bench_variant(VARIANT),
                        trace=VARIANT)
    credited = lrngcheck.assert_credited_only_whole_writes(record)
    print(f"\nbits credited per write: {credited}")


def test_lrng_write_to_urandom_renews_no_cpus_key(boot_guest, bench_variant) -> None:
    """Any user may write to /dev/urandom: a flood of writes must not send every
    other process's requests to the DRBG for a new key (lrng 0021). The reader's
    key fetches are counted beside the LRNG's own reseeds (task writerekey)."""
    record = boot_guest(WRITES_PROFILE.one(), tasks=["writerekey"], variant=bench_variant(VARIANT),
                        params={"bench_seconds": "1"})
    print(f"\n{lrngcheck.assert_write_renews_no_key(record)}")


def test_lrng_cpu_back_online_fetches_a_new_key(boot_guest, bench_variant) -> None:
    """A CPU taken offline and back serves no key from before it went down: its
    ChaCha20 key is renewed, as 6.1 renews its per-CPU CRNG (lrng 0024)."""
    record = boot_guest(WRITES_PROFILE.one(), tasks=["cpukey"], variant=bench_variant(VARIANT))
    print(f"\n{lrngcheck.assert_cpu_key_renewed(record)}")


def test_lrng_rndreseedcrng_reseeds_whatever_the_credit(boot_guest, bench_variant) -> None:
    """The recipe for a snapshot without a generation ID: a write, then RNDRESEEDCRNG.
    Called several times in a row (the first take the primary DRBG's entropy), each answers
    0 and reseeds every secondary DRBG at the call, as 6.1 reseeds its CRNG (lrng 0025)."""
    record = boot_guest(WRITES_PROFILE.one(), tasks=["probe", "reseedioctl"],
                        variant=bench_variant(VARIANT), trace=CLONE_TRACE)
    print(f"\n{lrngcheck.assert_reseed_ioctl_reseeds(record)}")


# ---- NUMA ------------------------------------------------------------------------------

def numa_read_boot(boot_guest, bench_variant, profile: str, extra_cmdline: str = ""):
    """Wait for the last node's secondary DRBG to be seeded, then read on each CPU
    (task lrngnoderead), the LRNG's debugfs state around each read."""
    nodes = get_profile(profile).caps.numa_nodes
    last_node = f"lrng: secondary DRBG on node {nodes - 1} fully seeded".replace(" ", ".")
    return boot_guest(profile, tasks=["until", "lrngnoderead"], variant=bench_variant(VARIANT),
                      params={"until": last_node, "until_cap": str(tracedboot.UNTIL_CAP_S),
                              "noise_bg": str(tracedboot.NOISE_LINES), "noise_gap": "0"},
                      extra_cmdline=extra_cmdline)


@pytest.mark.profiles(NUMA)
def test_lrng_numa_secondaries_seeded_and_serve_their_node(boot_guest, bench_variant,
                                                           profile: str) -> None:
    """The 2016 output path, kept behind lrng.drbg_output=1: each node's secondary
    DRBG serves the reads of its CPUs."""
    nodes = get_profile(profile).caps.numa_nodes
    record = numa_read_boot(boot_guest, bench_variant, profile, "lrng.drbg_output=1")
    lrngcheck.assert_secondaries_seeded(record, nodes)
    lrngcheck.assert_reads_served_by_own_node(record, nodes)


@pytest.mark.profiles(NUMA)
def test_lrng_output_comes_from_a_chacha20_generator_keyed_per_cpu(boot_guest, bench_variant,
                                                                   profile: str) -> None:
    """By default the reads come from each CPU's ChaCha20 generator: the secondary
    DRBGs give keys only (lrng 0008), not the 64 KiB each CPU read."""
    nodes = get_profile(profile).caps.numa_nodes
    record = numa_read_boot(boot_guest, bench_variant, profile)
    lrngcheck.assert_secondaries_seeded(record, nodes)
    lrngcheck.assert_output_from_chacha20(record)


# The LRNG's default urandom_min_reseed_secs (LRNG_SDRBG_RESEED_MAX_TIME).
DEFAULT_RESEED_SECS = 600


@pytest.mark.profiles(NUMA)
def test_lrng_numa_leaves_urandom_min_reseed_secs_as_it_was(boot_guest, bench_variant,
                                                            profile: str) -> None:
    """Once every node's secondary DRBG is seeded, the sysctl still reads its
    default: the LRNG's stretch for further nodes is its own (lrng 0026), not a
    rewrite of the administrator's setting (it read 700 on two nodes)."""
    nodes = get_profile(profile).caps.numa_nodes
    last_node = f"lrng: secondary DRBG on node {nodes - 1} fully seeded".replace(" ", ".")
    record = boot_guest(profile, tasks=["until", "reseedsecs"], variant=bench_variant(VARIANT),
                        params={"until": last_node, "until_cap": str(tracedboot.UNTIL_CAP_S),
                                "noise_bg": str(tracedboot.NOISE_LINES), "noise_gap": "0"})
    lrngcheck.assert_secondaries_seeded(record, nodes)
    secs = record.finished_task("reseedsecs").lines[0].strip()
    assert secs == str(DEFAULT_RESEED_SECS), (
        f"urandom_min_reseed_secs reads {secs} after {nodes} nodes were seeded, where "
        f"nobody wrote it ({record.data_log})")


# ---- Reseed interval ------------------------------------------------------------------

@pytest.mark.parametrize("output", ["chacha20", "drbg"])
def test_lrng_reseed_interval_kept_by_either_output_generator(boot_guest, bench_variant,
                                                               output: str) -> None:
    """urandom_min_reseed_secs bounds how long output comes from one seed: a read
    past it reseeds node 0's secondary DRBG (lrng 0010: the ChaCha20 keys too),
    and an interval of months neither overflows into a reseed per read (lrng 0009)
    nor is silently cut."""
    record = boot_guest(WRITES_PROFILE.one(), tasks=["probe", "lrngreseed"],
                        variant=bench_variant(VARIANT),
                        extra_cmdline="lrng.drbg_output=1" if output == "drbg" else "")
    phases = lrngcheck.assert_reseed_interval_kept(record)
    print("\n" + "\n".join(map(str, phases.values())))


# ---- DRBG ---------------------------------------------------------------------------------

def test_lrng_drbg_known_answer_and_crypto_selftests(lrng_boot) -> None:
    lrngcheck.assert_drbg_self_tests(lrng_boot(QUIET.one()))


def test_lrng_out_of_service_when_the_drbg_fails_its_known_answer(boot_guest,
                                                                  bench_variant) -> None:
    """On a kernel whose DRBG fails its known-answer test, the DRBG never serves, and
    getrandom() fails with EIO at once instead of blocking forever (lrng 0014; before
    it the DRBG served anyway). The probe's own timeout bounds the wait."""
    record = boot_guest(QUIET.one(), tasks=["probe", "urandom"], variant=bench_variant(KATFAIL),
                        params={"probe": "b", "timeout": str(KATFAIL_PROBE_TIMEOUT_S)})
    lrngcheck.assert_out_of_service(record)
