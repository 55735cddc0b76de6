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
import tomllib
from dataclasses import dataclass
from typing import Optional

from .errors import BadKernel
from .paths import KERNEL_DIR

METADATA = "variant.toml"
PARENT = "parent"
TEST_PREFIX = "test-"
# How a kernel the user brings (--kernel) is read.
CUSTOM = "custom"
CUSTOM_AS = "stock"
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
    credit_rule: str                 # benchlib.credit.CREDIT_RULES key
    milestones: dict[str, str]       # milestone name -> regular expression
    parent: Optional[str] = None
    also_ready: tuple[str, ...] = ()  # later milestones that are ready too (skipped states)
    # fixtures/trace-NAME for the clone test: the generation ID's path and the reseeds
    clone_trace: str = "clone-stock"
    # fixtures/trace-NAME for an image boot: getrandom() calls, waits, credits
    image_trace: str = "image-stock"

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


def _raw(name: str, seen: tuple[str, ...] = ()) -> dict[str, object]:
    folder = KERNEL_DIR / "patches" / name
    if not (folder / "series").is_file():
        raise BadKernel(f"unknown kernel variant '{name}' (known: {', '.join(all_names())})")
    data: dict[str, object] = {}
    parent_file = folder / PARENT
    if parent_file.is_file():
        parent = parent_file.read_text().strip()
        if parent in seen:
            raise BadKernel(f"variant '{name}': parent loop {' -> '.join((*seen, parent))}")
        data.update(_raw(parent, (*seen, name)))
        data["parent"] = parent
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
    return Variant(name=name, description=str(data.get("description", "")),
                   ready=str(data["ready"]), final=str(data["final"]),
                   trace=str(data["trace"]), credit_rule=str(data["credit_rule"]),
                   milestones=milestones, parent=data.get("parent"),  # type: ignore[arg-type]
                   also_ready=also_ready,
                   clone_trace=str(data.get("clone_trace", "clone-stock")),
                   image_trace=str(data.get("image_trace", "image-stock")))


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
