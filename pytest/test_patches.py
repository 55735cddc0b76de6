"""Every kernel patch in the repository is checkpatch --strict clean."""
from __future__ import annotations

import subprocess

import pytest

from benchlib import paths

PATCHES = sorted(paths.KERNEL_DIR.glob("patches/*/*.patch"))


@pytest.mark.parametrize("patch", PATCHES, ids=[f"{p.parent.name}/{p.name[:40]}" for p in PATCHES])
def test_kernel_patch_is_checkpatch_clean(patch) -> None:
    result = subprocess.run([str(paths.REPO / "scripts" / "check-patches.sh"), str(patch)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("series", sorted(paths.KERNEL_DIR.glob("patches/*/series")),
                         ids=lambda s: s.parent.name)
def test_kernel_series_names_every_patch_once(series) -> None:
    named = [line.split("#")[0].strip() for line in series.read_text().splitlines()]
    named = [n for n in named if n]
    present = sorted(p.name for p in series.parent.glob("*.patch"))
    assert sorted(named) == present and len(set(named)) == len(named), (named, present)
