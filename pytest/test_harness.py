"""Harness self-tests: no hypervisor needed."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from benchlib.credit import check_credit_rule, expected_credit, parse_hist, stock_spill_credit
from benchlib.profiles import PLACEHOLDERS, all_profiles
from benchlib.record import parse_console, parse_data

DUMMY = {key: f"/tmp/{key}" for key in PLACEHOLDERS} | {"name": "x", "domain_type": "qemu"}


@pytest.mark.parametrize("name", list(all_profiles()))
def test_harness_profile_renders_and_validates(name: str, tmp_path: Path) -> None:
    profile = all_profiles()[name]
    assert profile.description, f"{name} has no description"
    xml = profile.render(**DUMMY)
    assert "$" not in xml
    if shutil.which("virt-xml-validate") is None:
        pytest.fail("virt-xml-validate is missing: run scripts/setup.sh")
    path = tmp_path / f"{name}.xml"
    path.write_text(xml)
    result = subprocess.run(["virt-xml-validate", str(path), "domain"], capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stderr


def test_harness_render_is_strict() -> None:
    profile = next(iter(all_profiles().values()))
    with pytest.raises(ValueError, match="no value for kernel"):
        profile.render(**{k: v for k, v in DUMMY.items() if k != "kernel"})


def test_harness_parses_console_and_data() -> None:
    messages = parse_console("[    0.000000] Linux version 6.1\r\n"
                             "[    1.850000] random: crng init done\r\nnoise\n")
    assert messages == [(0.0, "Linux version 6.1"), (1.85, "random: crng init done")]
    tasks, probe = parse_data("@@BEGIN probe\n@@PROBE event=kmsg t=1.5 text=random: a b\n"
                              "@@END probe rc=0\n@@BEGIN x\n@@SECTION s\n1\n")
    assert tasks["probe"].rc == 0 and tasks["x"].rc is None
    assert tasks["x"].sections() == {"s": ["1"]}
    assert probe == [{"event": "kmsg", "t": "1.5", "text": "random: a b"}]


def test_harness_stock_credit_rule() -> None:
    assert [stock_spill_credit(c) for c in (1, 63, 64, 127, 128, 1024, (1 << 31) | 640)] == \
        [1, 1, 1, 1, 2, 16, 10]
    hist = parse_hist(["{ count:        640 } hitcount:          2",
                       "{ count:         10 } hitcount:          1", "Totals:"])
    assert hist == [({"count": "640"}, 2), ({"count": "10"}, 1)]
    assert expected_credit({640: 2, 10: 1}) == 21


def credit_sections(spills: dict[int, int], credits: dict[int, int]) -> dict[str, list[str]]:
    return {"hist mix": [f"{{ count: {c} }} hitcount: {n}" for c, n in spills.items()],
            "hist cred": [f"{{ bits: {b} }} hitcount: {n}" for b, n in credits.items()],
            "entropy_before": ["3"], "entropy_after": ["100"]}


def test_harness_credit_check_rejects_a_wrong_rule() -> None:
    spills = {(1 << 31) | 640: 2, (1 << 31) | 200: 3, (1 << 31) | 70: 1}
    right = credit_sections(spills, {10: 2, 3: 3, 1: 1})
    check_credit_rule(right, stock_spill_credit)
    with pytest.raises(AssertionError, match="against the rule's"):
        check_credit_rule(right, lambda count: max((count & 0xFFFF) // 32, 1))
    with pytest.raises(AssertionError, match="every spill was small"):
        check_credit_rule(credit_sections({70: 3}, {1: 3}), stock_spill_credit)
