"""Kernel variants as data: kernel/patches/<variant>/variant.toml beside the series.

A variant says which kernel messages mark its RNG's milestones, which milestone
6.1's ABI calls "ready" (getrandom() stops blocking), which is the last of its
boot, the kprobe trace set that observes it and its crediting rule by name. A
test-only variant (`test-*`) names its parent in a `parent` file and inherits
whatever its own variant.toml does not say. A kernel a user brings is read as
stock 6.1, the kernel it is most likely to be.
"""
from __future__ import annotations

import re
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from .errors import BadKernel
from .paths import KERNEL_DIR

METADATA = "variant.toml"
PARENT = "parent"
TEST_PREFIX = "test-"
# How a kernel the user brings (--kernel) is read.
CUSTOM = "custom"
CUSTOM_AS = "stock"
# What the report calls the user's kernel (--kernel, --kernel-deb).
USERS_KERNEL = "the kernel you named (--kernel or --kernel-deb), read with stock 6.1's milestones"
REQUIRED = ("ready", "final", "trace", "credit_rule", "milestones")
# VARIANT+FLAVOUR (kernel/build.sh): a variant built with an extra config fragment
# (kernel/configs/flavours/), e.g. crng+debug. Its RNG is the variant's.
FLAVOUR_SEPARATOR = "+"


def base_name(name: str) -> str:
    """The variant a (possibly flavoured) kernel name is built from."""
    return name.split(FLAVOUR_SEPARATOR, 1)[0]


@dataclass(frozen=True)
class Variant:
    name: str
    description: str
    ready: str                       # milestone name
    final: str                       # milestone name
    trace: str                       # fixtures/trace-NAME
    credit_rule: str                 # benchlib.checks.credit.CREDIT_RULES key
    milestones: dict[str, str]       # milestone name -> regular expression
    parent: Optional[str] = None
    also_ready: tuple[str, ...] = ()  # later milestones that are ready too (skipped states)
    # fixtures/trace-NAME for the clone test: the generation ID's path and the reseeds
    clone_trace: str = "clone-stock"
    # fixtures/trace-NAME for an image boot: getrandom() calls, waits, credits
    image_trace: str = "image-stock"
    # Interrupts at which a CPU's fast pool spills before ready (None: no fast pool)
    spill_interrupts: Optional[int] = None
    # Where the variant's output generator departs from the design it ports, said
    # under the throughput table (whose figures are that generator's)
    output_note: str = ""

    @property
    def ready_milestones(self) -> list[str]:
        """Ready is reached at the first of these (states may be skipped)."""
        return [self.ready, *self.also_ready]

    @property
    def test_only(self) -> bool:
        return self.name.startswith(TEST_PREFIX)

    def pattern(self, milestone: str) -> re.Pattern[str]:
        return re.compile(self.milestones[milestone])

    def milestone_of(self, text: str) -> Optional[str]:
        """The milestone a kernel message marks, if any."""
        return next((name for name, regex in self.milestones.items()
                     if re.search(regex, text)), None)

    def until_pattern(self) -> str:
        """The final milestone as the guest's `until` task greps for it in dmesg:
        its regex with spaces as '.' (the kernel command line splits on spaces)
        and without a leading '^' (dmesg puts the time stamp first)."""
        return self.milestones[self.final].lstrip("^").replace(" ", ".")


def parent_of(name: str) -> Optional[str]:
    """The variant a variant builds on: the first name in patches/NAME/parent,
    comments (#) and blank lines ignored; None without the file."""
    path = KERNEL_DIR / "patches" / name / PARENT
    if not path.is_file():
        return None
    names = [w for line in path.read_text().splitlines() for w in line.split("#")[0].split()]
    if not names:
        raise BadKernel(f"{path} names no variant")
    return names[0]


def chain(name: str) -> list[str]:
    """A variant and its ancestors, the root first; BadKernel for an unknown
    variant or parent, or a cycle. kernel/build.sh builds in this order."""
    found = [name]
    while True:
        if not (KERNEL_DIR / "patches" / found[0] / "series").is_file():
            raise BadKernel(f"unknown kernel variant '{found[0]}' (known: "
                            f"{', '.join(all_names())})" + (
                                f", named parent of '{found[1]}'" if len(found) > 1 else ""))
        parent = parent_of(found[0])
        if parent is None:
            return found
        if parent in found:
            raise BadKernel(f"the parents of variant '{name}' form a cycle: "
                            f"{' -> '.join(reversed(found))} -> {parent}")
        found.insert(0, parent)


def _raw(name: str) -> dict[str, object]:
    """The variant's variant.toml over its ancestors', and its parent's name."""
    names = chain(name)
    data: dict[str, object] = {}
    for ancestor in names:
        data.update(_metadata(KERNEL_DIR / "patches" / ancestor))
    if len(names) > 1:
        data["parent"] = names[-2]
    return data


def _metadata(folder: Path) -> dict[str, object]:
    data: dict[str, object] = {}
    meta = folder / METADATA
    if meta.is_file():
        with meta.open("rb") as handle:
            try:
                data.update(tomllib.load(handle))
            except tomllib.TOMLDecodeError as exc:
                raise BadKernel(f"{meta}: {exc}") from exc
    return data


def load(name: str) -> Variant:
    """A variant's metadata; BadKernel naming what is missing or wrong."""
    base = base_name(name)
    data = _raw(CUSTOM_AS if base == CUSTOM else base)
    folder = KERNEL_DIR / "patches" / base
    missing = [key for key in REQUIRED if key not in data]
    if missing:
        raise BadKernel(f"variant '{name}': {folder / METADATA} does not say "
                        f"{', '.join(missing)}")
    milestones = {str(k): str(v) for k, v in dict(data["milestones"]).items()}
    also_ready = tuple(str(m) for m in list(data.get("also_ready", [])))  # type: ignore
    for key, value in (("ready", data["ready"]), ("final", data["final"]),
                       *(("also_ready", m) for m in also_ready)):
        if value not in milestones:
            raise BadKernel(f"variant '{name}': {key} names '{value}', which is not one of "
                            f"its milestones ({', '.join(milestones)})")
    for milestone, regex in milestones.items():
        try:
            re.compile(regex)
        except re.error as exc:
            raise BadKernel(f"variant '{name}': milestone '{milestone}': bad regex: {exc}")
    # A user's kernel is read as stock's milestones, but is not Debian's kernel.
    description = (USERS_KERNEL if base == CUSTOM else str(data.get("description", "")))
    return Variant(name=name, description=description,
                   ready=str(data["ready"]), final=str(data["final"]),
                   trace=str(data["trace"]), credit_rule=str(data["credit_rule"]),
                   milestones=milestones, parent=data.get("parent"),  # type: ignore[arg-type]
                   also_ready=also_ready,
                   clone_trace=str(data.get("clone_trace", "clone-stock")),
                   output_note=str(data.get("output_note", "")),
                   image_trace=str(data.get("image_trace", "image-stock")),
                   spill_interrupts=spill_interrupts(name, data))


def spill_interrupts(name: str, data: dict[str, object]) -> Optional[int]:
    """variant.toml's spill_interrupts: a positive whole number, or absent."""
    value = data.get("spill_interrupts")
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise BadKernel(f"variant '{name}': spill_interrupts must be a positive whole "
                        f"number, not {value!r}")
    return value


def all_names() -> list[str]:
    return sorted(p.parent.name for p in (KERNEL_DIR / "patches").glob("*/series"))


def known_variants() -> list[str]:
    """Variants the report and the per-variant tests cover (test-only ones excluded)."""
    return [n for n in all_names() if not n.startswith(TEST_PREFIX)]


def all_milestones(names: list[str]) -> list[str]:
    """Every milestone name of these variants, in their declared order."""
    seen: list[str] = []
    for name in names:
        for milestone in load(name).milestones:
            if milestone not in seen:
                seen.append(milestone)
    return seen


def main(argv: list[str]) -> int:
    """`python3 -m benchlib.core.variants chain VARIANT`: the chain kernel/build.sh builds,
    one name a line, the root first; a one-line error and exit 1 otherwise."""
    if len(argv) != 2 or argv[0] != "chain":
        print("usage: python3 -m benchlib.core.variants chain VARIANT", file=sys.stderr)
        return 2
    try:
        print("\n".join(chain(argv[1])))
    except BadKernel as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
