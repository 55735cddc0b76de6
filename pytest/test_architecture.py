"""The harness's wings and their import rules, checked on the code.

benchlib/ is split into wings, one sub-package each (benchlib/__init__.py lists
them, docs/tests.md#the-harness-benchlib says what is in each). The import graph is
built from the source with ast, not by importing it: every `import` and `from ...
import`, absolute or relative, at the top of a module or inside a function. Then:
every module is in a wing, no wing imports one its rule forbids (RULES, the one
place the rules are written, each with its reason), and no two modules import each
other, directly or through others.

The same functions run on a made-up package with planted violations, which they
must report: a check that passes on the harness because it sees nothing would fail
there.
"""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Iterable, Optional

REPO = Path(__file__).resolve().parent.parent
PACKAGE = "benchlib"

# The wings, the foundation first: each may import only the wings before it.
WINGS = ("core", "checks", "boot", "images", "report", "commands", "testing")

# (wing, the wings it must never import, why). The rules' one place.
RULES = (
    ("core", {"checks", "boot", "images", "report", "commands", "testing"},
     "the foundation: every wing uses it, so it uses nothing of theirs"),
    ("checks", {"boot", "images", "report", "commands", "testing"},
     "a check reads a BootRecord however it was made (booted, stored, made up), never a guest"),
    ("boot", {"images", "report", "commands", "testing"},
     "a boot knows nothing of what it is for: images, reports and commands use it"),
    ("images", {"report", "commands", "testing"},
     "an image boot is a kind of boot: the image report and the commands read it"),
    ("report", {"commands", "testing"},
     "the forms are made from cells: the commands call them, never the other way round"),
    ("commands", {"testing"},
     "a user's command never needs pytest's side of the harness"),
)


def module_name(path: Path, root: Path, package: str) -> str:
    """benchlib/boot/guest.py -> benchlib.boot.guest; a package by its __init__.py."""
    parts = path.relative_to(root).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join((package, *parts))


def imported(source: str, module: str, is_package: bool, known: set[str]) -> set[str]:
    """The modules of `known` that `module`'s source imports, anywhere in it: an import
    of a name is one of the module that holds it (a package: its __init__.py)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                here = module.split(".") if is_package else module.split(".")[:-1]
                if node.level - 1 >= len(here):
                    raise ValueError(f"{module}: 'from {'.' * node.level}{node.module or ''}' "
                                     "leaves the package")
                base = here[:len(here) - (node.level - 1)]
                stem = ".".join(base + ([node.module] if node.module else []))
            else:
                stem = node.module or ""
            targets = [f"{stem}.{alias.name}" for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:     # a name in a module: the module
                target = target.rpartition(".")[0]
            if target:
                found.add(target)
    found.discard(module)
    return found


def import_graph(root: Path, package: str = PACKAGE) -> dict[str, set[str]]:
    """Every module under root (the package's folder) -> the package's modules it imports."""
    files = {module_name(path, root, package): path for path in sorted(root.rglob("*.py"))}
    return {name: imported(path.read_text(), name, path.name == "__init__.py", set(files))
            for name, path in files.items()}


def wing_of(module: str) -> Optional[str]:
    """benchlib.boot.guest -> boot; the package itself has none."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that import each other, directly or through others
    (Tarjan's strongly connected components of more than one module, or one that
    imports itself)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in sorted(graph.get(module, ())):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == module:
                    break
            if len(group) > 1 or module in graph.get(module, ()):
                found.append(sorted(group))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


def problems(graph: dict[str, set[str]], wings: Iterable[str] = WINGS,
             rules: Iterable[tuple[str, set[str], str]] = RULES) -> list[str]:
    """Everything the graph does against the wings and their rules, one line each."""
    wings = set(wings)
    said = [f"{module} is in no wing ({', '.join(sorted(wings))})"
            for module in sorted(graph) if wing_of(module) is not None
            and wing_of(module) not in wings]
    for wing, banned, why in rules:
        for module in sorted(m for m in graph if wing_of(m) == wing):
            said += [f"{module} imports {target}: {wing} never imports {wing_of(target)} ({why})"
                     for target in sorted(graph[module]) if wing_of(target) in banned]
    said += [f"import cycle: {' <-> '.join(group)}" for group in cycles(graph)]
    return said


def test_architecture_wings_obey_their_import_rules() -> None:
    graph = import_graph(REPO / PACKAGE)
    found = problems(graph)
    assert not found, "\n".join(found)


def test_architecture_graph_and_rules_cover_the_harness() -> None:
    """The rules name the wings there are, and the graph sees the imports the code has
    (a relative one, one across wings, one inside a function), so that an empty
    graph cannot pass for a clean one."""
    packages = {p.parent.name for p in (REPO / PACKAGE).glob("*/__init__.py")}
    assert packages == set(WINGS)
    assert {wing for wing, _, _ in RULES} | {WINGS[-1]} == set(WINGS)
    for position, (wing, banned, _) in enumerate(RULES):
        assert wing == WINGS[position] and banned == set(WINGS[position + 1:]), wing
    graph = import_graph(REPO / PACKAGE)
    assert "benchlib.checks.trace" in graph["benchlib.checks.crngcheck"]
    assert "benchlib.core.bootrecord" in graph["benchlib.checks.crngcheck"]
    assert "benchlib.core.cli" in graph["benchlib.images.images"]      # inside main()
    assert sum(map(len, graph.values())) > 200


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_architecture_planted_violations_are_reported(tmp_path: Path) -> None:
    """A made-up package with one of each violation: the functions above name them all,
    and nothing else."""
    root = _write(tmp_path / "made", {
        "__init__.py": "",
        "core/__init__.py": "",
        "core/errors.py": "class Error(Exception):\n    pass\n",
        "checks/__init__.py": "",
        "checks/trace.py": "from ..core.errors import Error\n\n\n"
                           "def parse():\n    from ..boot import guest   # planted\n"
                           "    return guest, Error\n",
        "boot/__init__.py": "",
        "boot/guest.py": "import os\nimport made.report.forms   # planted\n"
                         "from made.core import errors\nfrom . import stages\n",
        "boot/stages.py": "from .. import core\n",
        "report/__init__.py": "",
        "report/forms.py": "from .cells import Cell\n",
        "report/cells.py": "from . import forms   # planted: a cycle\nCell = object\n",
        "commands/__init__.py": "",
        "commands/run.py": "from ..report import cells, forms\nfrom ..checks.trace import parse\n",
        "loose.py": "import json\n",
    })
    graph = import_graph(root, "made")
    assert graph["made.checks.trace"] == {"made.core.errors", "made.boot.guest"}
    assert graph["made.boot.guest"] == {"made.report.forms", "made.core.errors", "made.boot.stages"}
    assert graph["made.boot.stages"] == {"made.core"}
    assert problems(graph) == [
        "made.loose is in no wing (boot, checks, commands, core, images, report, testing)",
        f"made.checks.trace imports made.boot.guest: checks never imports boot ({RULES[1][2]})",
        f"made.boot.guest imports made.report.forms: boot never imports report ({RULES[2][2]})",
        "import cycle: made.report.cells <-> made.report.forms",
    ]


def test_architecture_cycles_are_found_through_other_modules() -> None:
    graph = {"b.core.a": {"b.core.b"}, "b.core.b": {"b.core.c"}, "b.core.c": {"b.core.a"},
             "b.core.d": {"b.core.a"}, "b.core.e": {"b.core.e"}}
    assert cycles(graph) == [["b.core.a", "b.core.b", "b.core.c"], ["b.core.e"]]
    assert problems({"b.core.x": {"b.commands.y"}, "b.commands.y": set()}) == [
        f"b.core.x imports b.commands.y: core never imports commands ({RULES[0][2]})"]
