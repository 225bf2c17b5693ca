"""Drawn point sets as a setting (``drawn:x,y x,y ...``): written and read back exactly,
checked in one sentence, and run as their points by the CLI and the core run."""

from __future__ import annotations

import contextlib
import io
import json
import math

import numpy as np
import pytest

from gradviz.core.common.errors import GradvizError
from gradviz.core.settings.compact import parse_compact, to_compact
from gradviz.core.settings.config import FitConfig
from gradviz.core.settings.drawn import format_drawn, parse_drawn
from gradviz.core.settings.reproduce import fit_command_line

POINTS = [[0.0, 0.0], [3.0, 0.0], [0.0, 4.0], [-1.25, 0.1]]


def test_drawn_points_read_back_exactly():
    rng = np.random.default_rng(0)
    points = rng.normal(size=(30, 2))
    spec = format_drawn(points)
    assert spec.startswith("drawn:") and ";" not in spec
    assert np.array_equal(np.array(parse_drawn(spec)), points)  # every bit of every float


@pytest.mark.parametrize(
    ("spec", "named"),
    [
        ("drawn:1,2", "at least 2 points"),
        ("drawn:1,2 3,x", "Drawn point 2 is '3,x', not numbers"),
        ("drawn:1,2 3,4,5", "point 2 has 3 coordinates but point 1 has 2"),
        ("drawn:1,2 nan,4", "must be finite"),
    ],
)
def test_a_bad_drawn_set_is_named_in_one_sentence(spec, named):
    with pytest.raises(GradvizError, match=named):
        parse_drawn(spec)
    with pytest.raises(GradvizError, match=named):  # the settings table checks it too
        FitConfig(target=spec).validated()


def test_a_drawn_target_survives_experiment_lines_and_command_lines():
    config = FitConfig(target=format_drawn(POINTS), n=4, dim=2)
    config_back, _ = parse_compact(to_compact(config))
    assert config_back == config
    assert f"--target '{config.target}'" in fit_command_line(config)


def test_the_cli_fits_the_drawn_points_themselves():
    spec = format_drawn(POINTS)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        from gradviz.cli import main

        code = main(["fit", "--target", spec, "--steps", "3", "--threads", "1", "--json"])
    assert code == 0
    from gradviz.core.lab.fit import DistanceFitRun

    run = DistanceFitRun(FitConfig(target=spec, steps=3))  # N = 200, D = 3 unless set
    snapshot = run.snapshot()
    assert snapshot.target_coords.shape == (4, 2)  # N and D come from the points
    for i, j in ((0, 1), (0, 2), (1, 2), (2, 3)):
        expected = math.hypot(POINTS[i][0] - POINTS[j][0], POINTS[i][1] - POINTS[j][1])
        assert snapshot.target_distances[i, j] == pytest.approx(expected, rel=1e-6)
    assert json.loads(out.getvalue())["final_loss"] >= 0
