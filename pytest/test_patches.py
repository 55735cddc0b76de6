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
    """The patches that port a 2016 design credit its author (Suggested-by) and
    link the posting they come from; at least one of the series must."""
    author, link = DESIGN_POSTINGS[series_of]
    messages = {p.name: commit_message(p)
                for p in sorted(paths.KERNEL_DIR.glob(f"patches/{series_of}/*.patch"))}
    credited = [name for name, text in messages.items()
                if f"\nSuggested-by: {author}\n" in text + "\n" and f"\nLink: {link}\n" in text]
    assert credited, f"no {series_of} patch has 'Link: {link}' and 'Suggested-by: {author}'"
