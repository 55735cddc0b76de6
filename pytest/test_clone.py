"""Clones: one saved guest restored twice must not repeat its RNG's output.

Every kernel under test (stock, crng, lrng, or the user's --kernel / --kernel-deb)
boots in a profile with a VM generation ID and in one without, is saved at an early
and at a late save point, and the saved image is restored twice
(benchlib/commands/clones.py). With a generation ID and a kernel that has the vmgenid
driver, the clones' reads differ from the first one on, and each clone's trace
shows the generation ID's path and a reseed after it. Without one (or without the
driver), the late clones repeat each other's first reads: the negative control
that proves the comparison can fail; an early save is reported, not asserted (6.1
reseeds every uptime/2 then, so early clones may part by a periodic reseed).

The cases run at once (their guests mostly wait for an uptime): the first test
of this module that needs one runs every selected case.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, Optional

import pytest

from benchlib.commands import clones
from benchlib.boot import plan
from benchlib.commands.clones import EARLY, LATE, CloneCase, CloneOutcome
from benchlib.core.errors import BenchError, NeedsKvm
from benchlib.boot.hosts import HostPool
from benchlib.core.kernels import variant_kernel
from benchlib.core.profiles import Profile, all_profiles, get_profile
from benchlib.core.userkernel import KernelUnderTest
from benchlib.core.variants import CUSTOM

def _quiet_tcg(profile: Profile) -> bool:
    caps = profile.caps
    return (profile.requires == "any" and caps.interrupt_only and not caps.deterministic
            and caps.numa_nodes == 1)


def clone_profiles() -> dict[str, Optional[str]]:
    """The profile with a generation ID and the one without, by capability: TCG
    profiles where interrupts are the only entropy, so that they differ in the ID."""
    found = [p for p in all_profiles().values() if _quiet_tcg(p)]
    with_id = next((p.name for p in found if p.caps.vm_generation_id), None)
    without = next((p.name for p in found if not p.caps.vm_generation_id
                    and not p.caps.input_devices), None) \
        or next((p.name for p in found if not p.caps.vm_generation_id), None)
    return {"with_id": with_id, "without_id": without}


PROFILES = clone_profiles()
POINTS = (EARLY, LATE)


def _profile_param(kind: str) -> list:
    name = PROFILES[kind]
    if name is None:
        return [pytest.param(None, marks=pytest.mark.skip(
            reason=f"no quiet TCG profile {kind.replace('_', ' ')} a VM generation ID"))]
    return [name]


def case_key(variant: str, profile: str, point: str) -> str:
    return f"{variant}/{profile}/{point}"


def _selected_cases(session: pytest.Session, module: object) -> list[tuple[str, str, str]]:
    """(variant, profile, point) of every selected test of this module."""
    cases = []
    for item in session.items:
        params = getattr(item, "callspec", None)
        if getattr(item, "module", None) is not module or params is None:
            continue
        p = params.params
        if p.get("profile") and "variant" in p and "point" in p:
            cases.append((p["variant"], p["profile"], p["point"]))
    return list(dict.fromkeys(cases))


@pytest.fixture(scope="module")
def clone_outcome(request: pytest.FixtureRequest, host_pool: HostPool, initrd: Path,
                  accel: str, run_dir: Path, kernel_under_test: KernelUnderTest
                  ) -> Callable[[str, str, str], CloneOutcome]:
    """clone_outcome(variant, profile, point): that case's outcome; the first call
    runs every selected case of the module at once."""
    results: dict[str, object] = {}

    def build(variant: str, profile_name: str, point: str) -> CloneCase:
        if variant == CUSTOM:
            under = kernel_under_test
            return clones.clone_case(get_profile(profile_name), under.label, under.image,
                                     initrd, run_dir, accel, point, users=under)
        return clones.clone_case(get_profile(profile_name), variant, variant_kernel(variant),
                                 initrd, run_dir, accel, point)

    def get(variant: str, profile_name: str, point: str) -> CloneOutcome:
        try:
            plan.check(get_profile(profile_name), accel)
        except NeedsKvm as exc:
            pytest.skip(str(exc))
        if not results:
            cases = {}
            for case in _selected_cases(request.session, request.module):
                try:
                    cases[case_key(*case)] = build(*case)
                except BenchError as exc:      # e.g. a kernel not built: that case fails
                    results[case_key(*case)] = exc
            with host_pool.lease(host_pool.first):
                results.update(clones.run_cases(host_pool.first.conn, cases, clones.CONCURRENT_CASES))
        key = case_key(variant, profile_name, point)
        if key not in results:
            results.update(clones.run_cases(host_pool.first.conn,
                                            {key: build(variant, profile_name, point)}, 1))
        outcome = results[key]
        if isinstance(outcome, BenchError):
            pytest.fail(str(outcome), pytrace=False)
        assert isinstance(outcome, CloneOutcome)
        (outcome.folder / "clone.json").write_text(_json(outcome))
        return outcome

    return get


def _json(outcome: CloneOutcome) -> str:
    return json.dumps(outcome.summary(), indent=2, sort_keys=True)


def assert_clones_complete(outcome: CloneOutcome) -> None:
    """Both clones ran their reads after the restore and dumped a whole trace and
    kernel log: anything less is no evidence either way."""
    for clone in outcome.clones:
        assert not clone.problems, f"{clone.name}: {'; '.join(clone.problems)} ({outcome.folder})"
    rounds = outcome.compared_rounds()
    assert rounds, (f"no read of either clone came after the restore (the save came after "
                    f"rounds {sorted(outcome.pre_save_rounds)}): {outcome.folder}")
    assert len(outcome.first_reads()) == len(outcome.cpus) >= 1, \
        f"not every CPU was read in both clones: {outcome.folder}"


def assert_diverged(outcome: CloneOutcome) -> None:
    shared = outcome.shared_blocks()
    assert not shared, (
        f"{outcome.variant} in {outcome.profile} ({outcome.point} save at "
        f"{outcome.save_uptime:.1f} s): {len(shared)} 16-byte block(s) read by both clones, "
        f"the first {shared[0][0]} by {outcome.clones[0].name} (round, cpu) {shared[0][1]} and "
        f"by {outcome.clones[1].name} {shared[0][2]}; trace: {outcome.explain()}")


def assert_repeated(outcome: CloneOutcome) -> None:
    """The hazard, seen: both clones' first read after the restore, on every CPU, alike."""
    differ = {cpu: pair for cpu, pair in outcome.first_reads().items() if pair[0] != pair[1]}
    assert not differ, (
        f"{outcome.variant} in {outcome.profile}: without a generation ID the clones of a "
        f"{outcome.point} save (uptime {outcome.save_uptime:.1f} s) were expected to repeat "
        f"their first read, but CPU(s) {sorted(differ)} differ; what reseeded them: "
        f"{outcome.explain()}")


@pytest.mark.parametrize("point", POINTS)
@pytest.mark.parametrize("profile", _profile_param("with_id"))
def test_clones_with_generation_id_diverge(clone_outcome, variant: str, profile: str,
                                           point: str, record_property) -> None:
    """With a generation ID: each clone got a new one from libvirt, the kernel's
    vmgenid driver handed it to the RNG (vmfork traced in each clone after the save
    point, a reseed traced after it), and no 16-byte block is read by both clones.
    A kernel without the driver is judged as a profile without an ID."""
    outcome = clone_outcome(variant, profile, point)
    record_property("clone_safe", outcome.verdict())
    assert_clones_complete(outcome)
    ids = outcome.genids
    assert all(ids) and len(set(ids)) == len(ids), \
        f"libvirt did not give each restore a new generation ID: {ids}"
    if not outcome.driver:
        print(f"\n{variant} in {profile}: the kernel has no vmgenid driver (CONFIG_VMGENID): "
              f"clone-safe: {outcome.verdict()}")
        if point == LATE:
            assert_repeated(outcome)
        return
    for clone in outcome.clones:
        assert clone.could_see(clones.VMFORK_EVENT), (
            f"{clone.name}: the trace could not see add_vmfork_randomness (armed: "
            f"{clone.armed}, missed: {clone.missed})")
        assert clone.vmforks(), (f"{clone.name}: no add_vmfork_randomness after the save point "
                                 f"in the trace: {outcome.explain()}")
        assert clone.reseeds_after_vmfork(), (
            f"{clone.name}: the generation ID reached add_vmfork_randomness, but no reseed "
            f"of the RNG followed it: {outcome.explain()}")
        if clones.DRBG_SEED_EVENT in clone.armed:
            # The LRNG's secondaries are reseeded from the primary DRBG's output:
            # the primary must have taken the ID first (lrng 0020).
            assert clone.could_see(clones.DRBG_SEED_EVENT) and clone.vmfork_id_seeds(), (
                f"{clone.name}: the primary DRBG did not take the generation ID between "
                f"add_vmfork_randomness and the secondaries' reseed: their seeds came from "
                f"a state both clones share (missed: {clone.missed}): {outcome.explain()}")
    assert_diverged(outcome)
    assert outcome.verdict() == "yes"


@pytest.mark.parametrize("point", POINTS)
@pytest.mark.parametrize("profile", _profile_param("without_id"))
def test_clones_without_generation_id_repeat(clone_outcome, variant: str, profile: str,
                                             point: str, record_property) -> None:
    """Without a generation ID, the negative control: the late clones' first reads
    are alike on every CPU (the comparison can fail, and the bench sees the hazard);
    no vmfork is traced. The early clones' verdict is reported, not asserted."""
    outcome = clone_outcome(variant, profile, point)
    record_property("clone_safe", outcome.verdict())
    assert_clones_complete(outcome)
    for clone in outcome.clones:
        # An absence proves something only where the trace could have seen it: a
        # kernel without the vmgenid driver has no add_vmfork_randomness to probe.
        if clone.could_see(clones.VMFORK_EVENT):
            assert not clone.vmforks(), f"{clone.name}: a vmfork without a generation ID? " \
                                        f"{outcome.explain()}"
    print(f"\n{variant} in {profile}, {point} save at {outcome.save_uptime:.1f} s: clone-safe: "
          f"{outcome.verdict()}; after the save: {outcome.explain()}")
    if point == LATE:
        assert_repeated(outcome)
        assert outcome.verdict().startswith("no: identical")
