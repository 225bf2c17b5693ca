"""Colours shared by the views: Health palettes (colour-blind safe) and colormap lists."""

from __future__ import annotations

import numpy as np

from gradviz.core.common.health import Health

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
# NaN takes the mask's yellow where the colormap has nothing close to it (the diverging
# maps), and magenta where it does (viridis and friends end in yellow).
NAN_FALLBACK = "#FF00FF"
#: Text that warns of a NaN or Inf on the window's light background (yellow is unreadable
#: there; the plots keep the yellow of the mask).
ALARM_TEXT = "#b03a2e"

NONFINITE_COLOURS = {1: OKABE_ITO[Health.NEG_INF], 2: OKABE_ITO[Health.POS_INF], 3: NAN_FALLBACK}
NONFINITE_NAMES = {1: "-Inf", 2: "+Inf", 3: "NaN"}
_MIN_NAN_DISTANCE = 90.0  # RGB distance from every colour of the map; yellow vs CET-D1: ~100


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


def nan_colour(colormap_lut: np.ndarray) -> str:
    """NaN colour for a heatmap whose colormap has this ``(K, 3+)`` uint8 lookup table."""
    yellow = np.array(_rgba(OKABE_ITO[Health.NAN])[:3], dtype=np.float64)
    distance = np.sqrt(((colormap_lut[:, :3].astype(np.float64) - yellow) ** 2).sum(axis=1))
    return OKABE_ITO[Health.NAN] if distance.min() >= _MIN_NAN_DISTANCE else NAN_FALLBACK


def nonfinite_colours(nan: str) -> dict[int, str]:
    """Overlay colours with the given NaN colour."""
    return {**NONFINITE_COLOURS, 3: nan}
