"""Whether a plot the bench wrote shows anything: a blank figure (axes, labels, a
legend frame, all grey, black or white) is told from one with curves, bars or
milestone lines drawn in colour. For the tests of the plots and reports."""
from __future__ import annotations

from pathlib import Path

import matplotlib.image

PNG_MAGIC = b"\x89PNG"
# A drawn pixel: its colour channels differ by more than this (0..1 scale).
COLOURED_SPREAD = 0.25
# How many such pixels make a plot rather than a stray anti-aliased edge.
MIN_COLOURED_PIXELS = 500


def coloured_pixels(png: Path) -> int:
    """How many of the image's pixels are in colour."""
    pixels = matplotlib.image.imread(str(png))[..., :3]
    return int(((pixels.max(axis=-1) - pixels.min(axis=-1)) > COLOURED_SPREAD).sum())


def drawn(png: Path) -> bool:
    """A PNG with something drawn in colour on it."""
    return png.read_bytes()[:4] == PNG_MAGIC and coloured_pixels(png) >= MIN_COLOURED_PIXELS
