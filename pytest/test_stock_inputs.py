"""The profiles' input devices are what they say: none in tcg-quiet, PS/2 in tcg-input."""
from __future__ import annotations

import pytest

from benchlib.procfs import parse_input_devices


@pytest.mark.parametrize("profile, keyboards, mice", [("tcg-quiet", 0, 0), ("tcg-input", 1, 1)])
def test_stock_input_devices_match_profile(boot_guest, profile: str, keyboards: int,
                                           mice: int) -> None:
    record = boot_guest(profile, tasks=["inputs"])
    devices = parse_input_devices(record.task("inputs").lines)
    found = (sum(d.is_keyboard for d in devices), sum(d.is_mouse for d in devices))
    assert found == (keyboards, mice), (
        f"{profile}: {found[0]} keyboard(s), {found[1]} mouse/mice: {[d.name for d in devices]}")
