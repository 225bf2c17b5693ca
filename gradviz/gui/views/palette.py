"""Colours shared by the views: Health palettes (colour-blind safe) and colormap lists."""

from __future__ import annotations

import numpy as np

from gradviz.core.health import Health

# Okabe & Ito (2008), "Color Universal Design": distinguishable with every common form of
# colour blindness. Calm colours for healthy gradients, loud ones for the alarms; NaN gets
# the yellow that stands out most on a dark background.
OKABE_ITO: dict[Health, str] = {
    Health.FINITE: "#0072B2",  # blue
    Health.ZERO: "#56B4E9",  # sky blue
    Health.BLOCKED: "#009E73",  # bluish green
    Health.NEG_INF: "#CC79A7",  # reddish purple
    Health.POS_INF: "#D55E00",  # vermillion
    Health.NAN: "#F0E442",  # yellow
}

# The same alarms on a muted grey background, for spotting rare problems in a big matrix.
ALARMS_ONLY: dict[Health, str] = {
    **OKABE_ITO,
    Health.FINITE: "#3a3a3a",
    Health.ZERO: "#6a6a6a",
    Health.BLOCKED: "#8a8a8a",
}

HEALTH_PALETTES: dict[str, dict[Health, str]] = {
    "Okabe-Ito": OKABE_ITO,
    "alarms only": ALARMS_ONLY,
}

# Colormaps offered for matrices of non-negative values and for signed values.
SEQUENTIAL_MAPS = ["viridis", "cividis", "inferno", "magma", "CET-L1"]
DIVERGING_MAPS = ["CET-D1", "CET-D1A", "CET-D9", "CET-CBD1"]

# Non-finite overlay on float heatmaps: code 1 -Inf, 2 +Inf, 3 NaN (see arrays.nonfinite_codes).
NONFINITE_COLOURS = {1: OKABE_ITO[Health.NEG_INF], 2: OKABE_ITO[Health.POS_INF], 3: "#FF00FF"}
NONFINITE_NAMES = {1: "-Inf", 2: "+Inf", 3: "NaN"}


def _rgba(colour: str) -> tuple[int, int, int, int]:
    c = colour.lstrip("#")
    return int(c[0:2], 16), int(c[2:4], 16), int(c[4:6], 16), 255


def categorical_lut(colours: dict[int, str]) -> np.ndarray:
    """(256, 4) uint8 RGBA lookup table; codes not in ``colours`` are transparent."""
    lut = np.zeros((256, 4), dtype=np.uint8)
    for code, colour in colours.items():
        lut[int(code)] = _rgba(colour)
    return lut


def health_lut(palette: str) -> np.ndarray:
    """Lookup table for uint8 Health codes with the named palette."""
    return categorical_lut({int(h): c for h, c in HEALTH_PALETTES[palette].items()})


NONFINITE_LUT = categorical_lut(NONFINITE_COLOURS)
