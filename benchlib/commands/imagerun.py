"""make run --image: the image matrix (images × kernels × profiles) and its report.

Each cell is one image on one kernel in one profile: a first boot of the image as
it ships, then a second boot with the seed file the first one saved
(benchlib/images/imageboot.py). The report says, per cell, who blocked waiting for
randomness (task, unit, path, from when, how long), when the RNG got ready, the
first-boot milestones, what was credited before ready and by whom, and what the
second boot did with the seed; report.html draws each boot's timeline.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Optional

import libvirt

from ..report import image_report
from ..images import imageboot, images
from ..boot import plan
from ..core.errors import NeedsKvm
from ..images.imageboot import ImageCase
from ..core.profiles import Profile
from ..core.userkernel import KernelUnderTest


def progress(message: str) -> None:
    print(f"==> [images] {message}", file=sys.stderr, flush=True)


def list_images() -> str:
    """One line per recipe: its name and description; which roots are cached."""
    lines = []
    for name in images.names():
        recipe = images.load(name)
        cached = "root cached" if images.cached_root(recipe) else "root not built yet"
        lines.append(f"{name:<32} {recipe.description} ({cached})")
    return "\n".join(lines)


# Host wall time of one image boot under TCG with four at once on 2 cores (about
# 40 s alone): for the estimate only.
BOOT_WALL_S = 90


def describe_plan(names: list[str], profiles: list[Profile], labels: list[str]) -> str:
    cells = len(names) * len(profiles) * len(labels)
    waves = -(-cells // imageboot.BOOTS_AT_ONCE) * 2
    roots = {images.recipe_key(images.load(n)) for n in names}
    unbuilt = [n for n in names if images.cached_root(images.load(n)) is None]
    return (f"images: {' '.join(names)}; profiles: {' '.join(p.name for p in profiles)}; "
            f"kernels: {' '.join(labels)}\n{cells} cell(s), 2 boots each (first, second with "
            f"its seed), {imageboot.BOOTS_AT_ONCE} at a time: about "
            f"{waves * BOOT_WALL_S / 60:.0f} min of boots"
            + (f"; {len(roots)} root(s), {len(unbuilt)} to build first (a few minutes each)"
               if unbuilt else ""))


def plan_cases(names: list[str], profiles: list[Profile], kernels: dict[str, Path],
               users: Optional[KernelUnderTest], accel: str
               ) -> tuple[list[ImageCase], list[dict[str, object]]]:
    """The cells to boot, and the cells that cannot run here (with why). Roots are
    built (or taken from the cache) first: minutes, once per root."""
    cases, skipped = [], []
    for name in names:
        recipe = images.load(name)
        root = images.build_root(recipe, progress)
        for profile in profiles:
            for label, kernel in kernels.items():
                cell = {"image": recipe.name, "profile": profile.name, "kernel": label}
                try:
                    plan.check(profile, accel)
                    modular = users if users is not None and label == users.label else None
                    imageboot.systemd_check(label, modular)
                except (NeedsKvm, images.BadImage) as exc:
                    skipped.append({**cell, "why": str(exc)})
                    progress(f"{recipe.name} × {label} × {profile.name}: not booted: {exc}")
                    continue
                cases.append(ImageCase(recipe, root, profile, label, kernel, modular,
                                       second_boot=True))
    return cases, skipped


def run(args: object, profiles: list[Profile], kernels: dict[str, Path],
        users: Optional[KernelUnderTest], conn: libvirt.virConnect, outdir: Path,
        accel: str, meta: dict[str, object]) -> int:
    """Boot the image matrix, write the reports; 0 when every cell booted twice and
    its trace could see everything, 1 otherwise."""
    names: list[str] = getattr(args, "image")
    cases, skipped = plan_cases(names, profiles, kernels, users, accel)
    started = time.monotonic()
    total = len(cases) * 2
    finished = 0

    def done(key: str, what: str) -> None:
        nonlocal finished
        finished += 1
        progress(f"[{finished}/{total}] {key} {what} ({time.monotonic() - started:.0f} s)")

    progress(f"{len(cases)} cell(s), two boots each (first boot, second boot with its seed), "
             f"{imageboot.BOOTS_AT_ONCE} at a time")
    outcomes = imageboot.run_cases(conn, cases, outdir / "boots", accel, done=done)
    rows = [image_report.row(o) for o in outcomes.values()]
    meta = {**meta, "images": [image_report.recipe_meta(images.load(n)) for n in names]}
    report = {"format": image_report.FORMAT, "meta": meta, "cells": rows, "not_booted": skipped}
    (outdir / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    text = image_report.text(rows, skipped, meta)
    (outdir / "report.txt").write_text(text + "\n")
    image_report.junit(outdir / "junit.xml", rows, skipped)
    page = image_report.html(outdir, list(outcomes.values()), rows, skipped, meta)
    print(text)
    print(f"\nreport: {outdir}/report.txt, report.json, junit.xml, {page.name}; "
          f"boots: {outdir}/boots/")
    failed = [r for r in rows if r["failures"]]
    for row in failed:
        print(f"bench: {row['image']} × {row['kernel']} × {row['profile']}: "
              f"{'; '.join(row['failures'])}", file=sys.stderr)  # type: ignore[arg-type]
    return 1 if failed or not rows else 0
