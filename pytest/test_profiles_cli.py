"""The profile options of the main job (benchlib.commands.run): --list-profiles says which
profiles run on this host and why the others do not; --profiles-dir reads a user's
own profiles, checked against the templating rules at load. No guest is booted."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from benchlib.boot import guest, plan
from benchlib.core import paths, profiles
from benchlib.commands import run
from benchlib.core.errors import BadProfile, NeedsKvm

QUIET = "tcg-quiet"


@pytest.fixture(autouse=True)
def default_directory():
    """--profiles-dir sets where profiles are read from: reset it after each test."""
    yield
    profiles.use_directory(paths.PROFILE_DIR)


def listed(capsys, *argv: str) -> dict[str, str]:
    """{profile: its 'yes ...' or 'no ...' column} from --list-profiles."""
    assert run.main(["--list-profiles", "--accel", "tcg", *argv]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("guests run under TCG here"), lines[0]
    return {line.split()[0]: line.split(None, 1)[1] for line in lines[1::2]}


def test_profiles_list_says_which_run_here_and_why_not(capsys, monkeypatch,
                                                      tmp_path: Path) -> None:
    monkeypatch.setattr(guest, "patched_qemu", lambda: tmp_path / "no-qemu")
    rows = listed(capsys)
    assert set(rows) == set(profiles.all_profiles())
    for name, profile in profiles.all_profiles().items():
        if profile.requires == "hyperv":
            assert rows[name].startswith("no ") and "patched QEMU" in rows[name], rows[name]
        else:
            assert rows[name].startswith("yes "), rows[name]


def test_profiles_dir_is_read_instead_of_vm_definitions(capsys, tmp_path: Path) -> None:
    shutil.copy(paths.PROFILE_DIR / f"{QUIET}.xml", tmp_path / "team-quiet.xml")
    assert list(listed(capsys, "--profiles-dir", str(tmp_path))) == ["team-quiet"]
    assert run.main(["--dry-run", "--no-budget", "--profiles-dir", str(tmp_path),
                     "--profile", "team-quiet", "--variant", "stock"]) == 0
    assert "profiles: team-quiet;" in capsys.readouterr().out


def test_profiles_dir_bad_files_are_named_one_per_line(tmp_path: Path) -> None:
    template = (paths.PROFILE_DIR / f"{QUIET}.xml").read_text()
    (tmp_path / "typo.xml").write_text(template.replace("${kernel}", "${kernal}"))
    (tmp_path / "dollar.xml").write_text(template.replace("</name>", "$5</name>", 1))
    (tmp_path / "cut.xml").write_text(template.replace("</domain>", ""))
    with pytest.raises(BadProfile) as raised:
        run.main(["--list-profiles", "--accel", "tcg", "--profiles-dir", str(tmp_path)])
    lines = str(raised.value).splitlines()
    assert len(lines) == 3, lines
    assert "cut.xml: not XML" in lines[0]
    assert "dollar.xml: bad placeholder" in lines[1]
    assert "typo.xml: unknown placeholder $kernal" in lines[2]
    with pytest.raises(BadProfile, match="profile directory '/nonexistent' does not exist"):
        run.main(["--dry-run", "--profiles-dir", "/nonexistent"])


def test_kvm_profile_is_listed_as_needing_kvm_and_refused_under_tcg(capsys,
                                                                      tmp_path: Path) -> None:
    """<bench:requires>kvm</bench:requires>: a profile copied from a real guest that
    only KVM can run. Under TCG it is listed 'no', saying so, and refused by name."""
    template = (paths.PROFILE_DIR / f"{QUIET}.xml").read_text()
    (tmp_path / "team-kvm.xml").write_text(template.replace(
        "<bench:requires>any</bench:requires>", "<bench:requires>kvm</bench:requires>"))
    rows = listed(capsys, "--profiles-dir", str(tmp_path))
    assert rows["team-kvm"].startswith("no ") and "needs KVM" in rows["team-kvm"], rows
    kvm = profiles.get_profile("team-kvm", tmp_path)
    with pytest.raises(NeedsKvm, match="profile 'team-kvm' needs KVM .* under TCG"):
        plan.check(kvm, "tcg")
    assert guest.choose_emulator(kvm, "kvm") == paths.DEFAULT_EMULATOR
