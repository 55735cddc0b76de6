"""The profiles' input devices are what their domain XML says: PS/2 keyboard and
mouse where the i8042 controller is there, none where it is switched off."""
from __future__ import annotations

import pytest

from benchlib.checks.procfs import parse_input_devices
from benchlib.core.profiles import Needs, get_profile


@pytest.mark.profiles(Needs(hyperv=False))
def test_stock_input_devices_match_profile(boot_guest, profile: str) -> None:
    expected = (1, 1) if get_profile(profile).caps.input_devices else (0, 0)
    record = boot_guest(profile, tasks=["inputs"])
    devices = parse_input_devices(record.finished_task("inputs").lines)
    found = (sum(d.is_keyboard for d in devices), sum(d.is_mouse for d in devices))
    assert found == expected, (
        f"{profile}: {found[0]} keyboard(s), {found[1]} mouse/mice: {[d.name for d in devices]}")
