"""The repository's patch series: every kernel patch checkpatch --strict clean, every
series file naming each of its patches once; the QEMU series numbered in its order,
by one author who signs off each patch, and clean by QEMU's own checkpatch."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from benchlib.core import paths

PATCHES = sorted(paths.KERNEL_DIR.glob("patches/*/*.patch"))
SERIES = sorted(paths.KERNEL_DIR.glob("patches/*/series")) + [paths.QEMU_SERIES]


def series_names(series: Path) -> list[str]:
    """The patch files a series file names, in order (comments and blank lines dropped)."""
    named = [line.split("#")[0].strip() for line in series.read_text().splitlines()]
    return [n for n in named if n]


def qemu_patches() -> list[Path]:
    return [paths.QEMU_SERIES.parent / name for name in series_names(paths.QEMU_SERIES)]


@pytest.mark.parametrize("patch", PATCHES, ids=[f"{p.parent.name}/{p.name[:40]}" for p in PATCHES])
def test_kernel_patch_is_checkpatch_clean(patch) -> None:
    result = subprocess.run([str(paths.REPO / "scripts" / "check-patches.sh"), str(patch)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("series", SERIES, ids=lambda s: f"{s.parent.parent.parent.name}-"
                         f"{s.parent.name}" if s != paths.QEMU_SERIES else "qemu")
def test_series_names_every_patch_once(series) -> None:
    named = series_names(series)
    present = sorted(p.name for p in series.parent.glob("*.patch"))
    assert sorted(named) == present and len(set(named)) == len(named), (named, present)


def test_qemu_patches_numbered_in_order_by_one_signing_author() -> None:
    """Subject "[PATCH NN/MM]" with NN the patch's place in the series and MM its
    length, the same From line on every patch, and a Signed-off-by of that author."""
    patches = qemu_patches()
    authors = set()
    for place, patch in enumerate(patches, 1):
        text = patch.read_text()
        counter = re.search(r"^Subject: \[PATCH (\d+)/(\d+)\]", text, re.M)
        assert counter and (int(counter[1]), int(counter[2])) == (place, len(patches)), (
            f"{patch.name}: subject counter {counter[0] if counter else 'missing'}, "
            f"expected [PATCH {place:02d}/{len(patches)}]")
        author = re.search(r"^From: (.+)$", text, re.M)
        assert author, f"{patch.name}: no From line"
        authors.add(author[1])
        assert f"\nSigned-off-by: {author[1]}\n" in commit_message(patch) + "\n", (
            f"{patch.name}: no Signed-off-by of its author {author[1]}")
    assert len(authors) == 1, f"the QEMU patches have {len(authors)} authors: {sorted(authors)}"


@pytest.mark.parametrize("patch", qemu_patches(), ids=lambda p: p.name[:40])
def test_qemu_patch_is_checkpatch_clean(patch: Path) -> None:
    """QEMU's scripts/checkpatch.pl, from the source tree qemu/build.sh unpacked:
    no error and no warning."""
    source = paths.qemu_source()
    if source is None:
        pytest.skip(f"no QEMU source tree under {paths.BUILD_DIR}/qemu/src: run qemu/build.sh")
    result = subprocess.run(["perl", str(source / "scripts" / "checkpatch.pl"), "--no-tree",
                             str(patch)], capture_output=True, text=True)
    assert result.returncode == 0 and "has no obvious style problems" in result.stdout, (
        result.stdout[-2000:] + result.stderr)


# The postings each ported design comes from (../shared/seeds): Ts'o's CRNG RFC and
# Mueller's LRNG v3, by Message-ID on lore.kernel.org.
DESIGN_POSTINGS = {
    "crng": ("Theodore Ts'o <tytso@mit.edu>",
             "https://lore.kernel.org/r/1462170413-7164-1-git-send-email-tytso@mit.edu"),
    "lrng": ("Stephan Mueller <smueller@chronox.de>",
             "https://lore.kernel.org/r/2346517.m8UHYeMDSf@positron.chronox.de"),
}


def commit_message(patch) -> str:
    """A format-patch file's commit message: from the Subject to the '---' line."""
    text = patch.read_text()
    return text[text.index("\nSubject:"):text.index("\n---\n")]


@pytest.mark.parametrize("series_of", sorted(DESIGN_POSTINGS))
def test_design_author_credited_with_a_link_to_the_posting(series_of: str) -> None:
    """The patches that port a 2016 design credit its author as the kernel does for
    code based on someone else's (Originally-by) and link the posting it comes
    from; at least one of the series must."""
    author, link = DESIGN_POSTINGS[series_of]
    messages = {p.name: commit_message(p)
                for p in sorted(paths.KERNEL_DIR.glob(f"patches/{series_of}/*.patch"))}
    credited = [name for name, text in messages.items()
                if f"\nOriginally-by: {author}\n" in text + "\n" and f"\nLink: {link}\n" in text]
    assert credited, f"no {series_of} patch has 'Link: {link}' and 'Originally-by: {author}'"


# The kernel series of more than one patch: counted n/N over the whole series.
KERNEL_SERIES = [s for s in sorted(paths.KERNEL_DIR.glob("patches/*/series"))
                 if len(series_names(s)) > 1]
# The 2016 designs' authors: credited with Originally-by: where a patch carries
# their code, never with Suggested-by: (they suggested none of the bench's changes).
DESIGNERS = ("Theodore Ts'o <tytso@mit.edu>", "Stephan Mueller <smueller@chronox.de>")


@pytest.mark.parametrize("series", KERNEL_SERIES, ids=lambda s: s.parent.name)
def test_kernel_series_counted_and_credited(series: Path) -> None:
    names = series_names(series)
    for place, name in enumerate(names, 1):
        text = (series.parent / name).read_text()
        counter = re.search(r"^Subject: \[PATCH (\d+)/(\d+)\]", text, re.M)
        assert counter and (int(counter[1]), int(counter[2])) == (place, len(names)), (
            f"{name}: subject counter {counter[0] if counter else 'missing'}, "
            f"expected [PATCH {place:02d}/{len(names)}]")
        message = commit_message(series.parent / name)
        for who in DESIGNERS:
            assert f"Suggested-by: {who}" not in message, f"{name}: Suggested-by: {who}"
            if f"Originally-by: {who}" in message:
                assert "\nLink: https://lore.kernel.org/r/" in message, (
                    f"{name}: Originally-by: {who} without a Link: to the posting")
