"""scripts/setup.sh on a machine where nothing runs yet, as CI's fresh machine.

The commands it would run against the host (dpkg-query, pgrep, setsid, virsh,
...) are stubs in a folder put first on PATH: the script's own logic runs, the
host's packages and daemons are not touched. A stub daemon "starts" by creating
a flag file that the stub pgrep and virsh then see.
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SETUP = REPO / "scripts" / "setup.sh"

# Each stub: what the host's command would say on a machine with every package
# installed and no libvirtd running until setsid starts one.
STUBS = {
    "dpkg-query": 'echo "install ok installed"',
    "pgrep": '[ -f "$STATE/libvirtd.up" ] && { echo 4242; exit 0; }; exit 1',
    "pkill": 'rm -f "$STATE/libvirtd.up"',
    "ps": 'echo tini',
    "setsid": 'echo "$*" >>"$STATE/started"; touch "$STATE/libvirtd.up"',
    "virsh": ('[ -f "$STATE/libvirtd.up" ] || exit 1; '
              'echo "Running hypervisor: QEMU 7.2.0"'),
    "getent": 'exit 0',
    "id": '[ "$1" = -u ] && echo 0; exit 0',
}


@pytest.fixture
def fresh_host(tmp_path: Path) -> dict[str, str]:
    """PATH with the stubs first, and where the stubs keep their state."""
    bin_dir, state = tmp_path / "bin", tmp_path / "state"
    bin_dir.mkdir()
    state.mkdir()
    for name, body in STUBS.items():
        stub = bin_dir / name
        stub.write_text(f"#!/bin/sh\n{body}\n")
        stub.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}",
            "STATE": str(state),
            "BENCH_QEMU_CONF": str(tmp_path / "qemu.conf"),
            "BENCH_LIBVIRT_LOG_DIR": str(tmp_path / "log")}


def run_setup(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(SETUP)], env=env, capture_output=True, text=True,
                          timeout=60, check=False)


def test_setup_on_a_fresh_machine_starts_libvirtd_and_says_ready(fresh_host: dict[str, str]) -> None:
    result = run_setup(fresh_host)
    assert result.returncode == 0, f"setup.sh failed on a fresh machine:\n{result.stderr}"
    started = (Path(fresh_host["STATE"]) / "started").read_text()
    assert "tini -s -- libvirtd" in started, started
    assert "ready: QEMU 7.2.0" in result.stderr, result.stderr


def test_setup_writes_its_qemu_conf_block_once_and_replaces_an_old_one(fresh_host: dict[str, str]) -> None:
    conf = Path(fresh_host["BENCH_QEMU_CONF"])
    conf.write_text('#user = "qemu"\n# bench: managed (an older version)\nuser = "root"\n')
    assert run_setup(fresh_host).returncode == 0
    first = conf.read_text()
    assert first.startswith('#user = "qemu"\n'), "the host's own lines must stay"
    assert first.count("# bench: managed") == 1
    assert 'stdio_handler = "file"' in first
    again = run_setup(fresh_host)
    assert again.returncode == 0 and conf.read_text() == first
    assert "changing the host's" not in again.stderr, "an up-to-date block is left alone"


def test_setup_names_the_log_when_libvirtd_never_answers(fresh_host: dict[str, str]) -> None:
    stub = Path(fresh_host["PATH"].split(":")[0]) / "virsh"
    stub.write_text("#!/bin/sh\nexit 1\n")
    log_dir = Path(fresh_host["BENCH_LIBVIRT_LOG_DIR"])
    result = run_setup(fresh_host)
    assert result.returncode == 1
    assert f"{log_dir}/libvirtd-bench.log" in result.stderr.splitlines()[-1]
