"""Facts with one home: the boots' defaults (benchlib/core/defaults.py), the fatal
kernel reports (benchlib/boot/kreports.py), the variants' parent files
(benchlib/core/variants.py). No hypervisor needed."""
from __future__ import annotations

import re
import secrets
import shutil
import subprocess
from pathlib import Path
from typing import Callable, Iterator

import pytest

from benchlib.core import paths, variants
from benchlib.boot import plan
from benchlib.core.errors import BadKernel
from benchlib.core.defaults import GUEST_PARAMS
from benchlib.boot.guest import CLOSING_TASKS
from benchlib.core.tasks import TASKS, needs
from benchlib.boot.kreports import FATAL_STARTS
from benchlib.commands.options import shared_options
from benchlib.core.profiles import get_profile

BENCHLIB = paths.REPO / "benchlib"


def init_fallbacks() -> dict[str, str]:
    """The defaults fixtures/init falls back to: `$(param NAME DEFAULT)`."""
    text = (paths.FIXTURE_DIR / "init").read_text()
    return dict(re.findall(r"\$\(param (\w+) ([^)\s|]+)", text))


@pytest.mark.parametrize("name", sorted(GUEST_PARAMS))
def test_defaults_the_init_falls_back_to_the_hosts_defaults(name: str) -> None:
    fallback = init_fallbacks().get(name)
    assert fallback is not None, f"fixtures/init reads no bench.{name}"
    assert float(fallback) == GUEST_PARAMS[name], (
        f"fixtures/init falls back to bench.{name}={fallback}, benchlib/core/defaults.py says "
        f"{GUEST_PARAMS[name]:g}")


def test_defaults_every_cap_a_boot_obeys_is_on_its_command_line() -> None:
    request = plan.request(get_profile("tcg-quiet"), variant="stock", kernel=paths.REPO,
                           initrd=paths.REPO, outdir=paths.REPO,
                           tasks=["probe", "until", "entropy_capture"])
    for name, default in GUEST_PARAMS.items():
        assert f"bench.{name}={default:g}" in request.cmdline(), name


def test_defaults_fatal_reports_are_written_in_kreports_only() -> None:
    written = [(path.name, words) for path in sorted(BENCHLIB.rglob("*.py"))
               if path.name != "kreports.py"
               for words in FATAL_STARTS if words.strip() in path.read_text()]
    assert not written, f"fatal report words outside benchlib/boot/kreports.py: {written}"


@pytest.fixture
def scratch_variants() -> Iterator[Callable[[str, str], str]]:
    """scratch(name, parent_text) -> name: a variant folder with an empty series and
    that parent file, removed afterwards."""
    made: list[Path] = []

    def scratch(name: str, parent_text: str) -> str:
        folder = paths.KERNEL_DIR / "patches" / f"scratch-{secrets.token_hex(3)}-{name}"
        folder.mkdir()
        made.append(folder)
        (folder / "series").write_text("# nothing\n")
        (folder / "parent").write_text(parent_text)
        return folder.name

    yield scratch
    for folder in made:
        shutil.rmtree(folder, ignore_errors=True)


def build_sh_chain_error(variant: str) -> str:
    done = subprocess.run([str(paths.KERNEL_DIR / "build.sh"), "--fingerprint", variant],
                          capture_output=True, text=True, timeout=60)
    return "" if done.returncode == 0 else done.stderr


def test_defaults_parent_files_have_one_reader(scratch_variants) -> None:
    """kernel/build.sh takes a variant's ancestors from benchlib/core/variants.py: a
    parent file with comments is read alike, and a cycle is an error in both."""
    commented = scratch_variants("commented", "# builds on the RFC CRNG\n\ncrng  # its tree\n")
    assert variants.chain(commented) == ["crng", commented]
    assert build_sh_chain_error(commented) == ""
    first = scratch_variants("a", "placeholder\n")
    second = scratch_variants("b", f"{first}\n")
    (paths.KERNEL_DIR / "patches" / first / "parent").write_text(f"{second}\n")
    with pytest.raises(BadKernel, match="form a cycle"):
        variants.chain(first)
    assert "form a cycle" in build_sh_chain_error(first)


# Flags that mean something else in one command, and why.
OWN_MEANING = {
    ("soak.py", "--boots"): "boots per profile × variant of the soak (20), not per cell",
    ("overhead.py", "--profile"): "the one profile the benchmark's pairs boot in",
    ("irqsoff.py", "--boots"): "boots per kernel of the interrupts-off benchmark, in rounds",
    ("irqsoff.py", "--profile"): "the one profile the interrupts-off benchmark boots in",
}


def test_defaults_shared_options_are_declared_in_options_only() -> None:
    """The options the main job, the soak and the tests share get their defaults
    from benchlib/commands/options.py alone: no command declares one of them itself."""
    sources = [*sorted(BENCHLIB.rglob("*.py")), paths.REPO / "bench_options.py"]
    declared = [(path.name, name) for path in sources for name in shared_options()
                if (path.name, name) not in OWN_MEANING
                and re.search(rf"(add_argument|addoption)\(\s*\"{re.escape(name)}\"",
                              path.read_text())]
    assert not declared, f"shared options declared outside benchlib/commands/options.py: {declared}"


def test_defaults_the_init_runs_the_closing_tasks_the_host_names() -> None:
    """The order of the closing tasks lives in guest.py: the init's fallback for
    a hand boot is only the kernel log, and a traced boot with modules names all three."""
    assert init_fallbacks().get("closing") == ",".join(CLOSING_TASKS)
    request = plan.request(get_profile("tcg-quiet"), variant="stock", kernel=paths.REPO,
                           initrd=paths.REPO, outdir=paths.REPO, trace="stock")
    assert "bench.closing=trace,modules,kmsg" in request.cmdline(with_modules=True)
    assert request.stage_tasks(with_modules=True)[-3:] == ["trace", "modules", "kmsg"]


def test_defaults_a_capturing_boot_keeps_its_irq_lines() -> None:
    """A boot that runs the entropy capture turns the kernel's spurious-IRQ check
    off (tasks.TASKS: the check once disabled the data channel's line in the
    middle of a capture); a boot that does not capture keeps it."""
    def cmdline(tasks: list[str]) -> list[str]:
        return plan.request(get_profile("tcg-quiet"), variant="stock", kernel=paths.REPO,
                            initrd=paths.REPO, outdir=paths.REPO, tasks=tasks).cmdline().split()
    assert "noirqdebug" in needs("entropy_capture").cmdline.split()
    assert cmdline(["probe", "until", "entropy_capture"]).count("noirqdebug") == 1
    assert "noirqdebug" not in cmdline(["probe", "until"])


def test_defaults_every_task_the_host_describes_is_one_the_init_runs() -> None:
    """tasks.TASKS names tasks of fixtures/init (a task_NAME function) and caps it
    gives (a bench.* parameter the init reads, with its default in GUEST_PARAMS)."""
    init = (paths.REPO / "fixtures" / "init").read_text()
    for task in TASKS.values():
        assert f"task_{task.name}() {{" in init, f"tasks.TASKS names '{task.name}': no such task"
        if task.cap:
            assert task.cap in GUEST_PARAMS and f"param {task.cap} " in init, task
