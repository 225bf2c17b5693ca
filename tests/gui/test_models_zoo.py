"""The model zoo through the app: for every model saved every way (tests/core's zoo), the
model panel (the real ModelOpener, panel and explorer) says what `inspect --json` says
(layers, parameters, widths, assumptions, why it cannot run) or the same refusal, and the
explorer's Jacobians are those `jacobian --json` computes on the explorer's own inputs."""

from __future__ import annotations

import json
import pathlib
import sys
import warnings

import numpy as np
import pytest
from PySide6.QtCore import Qt
from test_models_own_code import opener, wait_result  # noqa: F401 - fixture

from gradviz.cli import main
from gradviz.gui.pages.models.model_panel import _in_app_words as in_app_words
from gradviz.gui.pages.models.open_model import OpenState

sys.path.insert(0, str(pathlib.Path(__file__).parents[1] / "core"))
from test_modelio_zoo import PROGRAMS, SAMPLE_SHAPES, build_zoo, zoo_params  # noqa: E402

WAIT_MS = 120_000
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning")
SETTLED = (OpenState.OPEN, OpenState.LISTED, OpenState.FAILED)


@pytest.fixture(scope="module")
def zoo(tmp_path_factory):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return build_zoo(tmp_path_factory.mktemp("zoo"))


def cli(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def open_in_app(qtbot, opener, path, shape):  # noqa: F811 - the fixture imported above
    """Open ``path`` as the user would: the trust question answered Open, the input shape
    asked for (a program that does not declare it) answered with ``shape``."""
    opener.ask_in_dim = lambda info, guess: shape
    opener.open_path(str(path))
    qtbot.waitUntil(
        lambda: opener.state in SETTLED or opener.trust_dialog is not None, timeout=WAIT_MS
    )
    if opener.trust_dialog is not None:
        qtbot.mouseClick(opener.trust_dialog.open_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: opener.state in SETTLED, timeout=WAIT_MS)


def assert_panel_describes(panel, described):
    """The panel's summary, layer table, assumptions and reason say what ``described``
    (inspect's or the loaded model's JSON) says."""
    layers = described["layers"]
    summary = panel.summary.text()
    assert summary.startswith(f"{len(layers)} layers, {described['parameters']:,} parameters; ")
    for side in ("in", "out"):
        width = described[f"{side}_dim"] or described[f"{side}_from_weights"] or "?"
        assert f"{width} {side}put" in summary, (side, summary)
    from_weights = any(
        described[f"{side}_dim"] is None and described[f"{side}_from_weights"]
        for side in ("in", "out")
    )
    assert summary.endswith("(from the weights)") == from_weights, summary
    rows = panel.layers.row_texts()
    assert [(row[0], row[1]) for row in rows] == [(lay["name"], lay["type"]) for lay in layers]
    shown = [line.removeprefix("• ") for line in panel.assumptions.text().splitlines()]
    assert shown == [in_app_words(note) for note in described["assumptions"]]
    if described["runnable"]:
        assert not panel.reason.isVisibleTo(panel)
    elif described["order_to_confirm"]:
        assert panel.order.order.text() == " → ".join(described["order_to_confirm"])
        assert "confirm the order" in panel.reason.text()
    else:
        assert panel.reason.text() == f"Cannot run: {described['not_runnable_reason']}"


# The app opens each program in a process of its own, and so do inspect and jacobian: every
# way is run in the default run on net_x, the other models' programs with the slow cases.
@pytest.mark.parametrize(("name", "way"), zoo_params(everyway=("net_x",)))
def test_the_model_panel_agrees_with_inspect_and_jacobian_on_every_zoo_entry(
    qtbot,
    capsys,
    tmp_path,
    opener,  # noqa: F811
    zoo,
    name,
    way,
):
    path, _ = zoo[name, way]
    shape = SAMPLE_SHAPES[name]
    trust = ("--trust",) if way in PROGRAMS else ()
    code, out, err = cli(capsys, "inspect", path, "--json", *trust)
    open_in_app(qtbot, opener, path, shape)
    if code != 0:  # refused: the same sentence in the app's error box
        assert opener.state is OpenState.FAILED
        assert opener.errors == [err.strip().split("error: ", 1)[1]]
        return
    described = json.loads(out)
    if opener.state is OpenState.LISTED:
        assert_panel_describes(opener.panel, described)
        return
    assert opener.state is OpenState.OPEN and opener.errors == []
    result = wait_result(qtbot, opener.explorer, path.name)
    x = np.asarray(result.inputs, dtype=np.float64).reshape(-1, *shape)
    np.save(tmp_path / "x.npy", x)
    # What the user answered the app's question for the input (a program that does not
    # declare it), given to the CLI as its option.
    asked = described["in_dim"] is None and described["in_shape"] is None
    answer = (
        ("--in-dim", shape[0]) if len(shape) == 1 else ("--input-shape", ",".join(map(str, shape)))
    )
    # The activation the panel assumed and shows in its combo, given to the CLI, which asks
    # for it rather than assume one.
    activation = ("--activation", opener.panel.activation.currentText())
    code, out, err = cli(
        capsys, "jacobian", "--model", path, "--inputs", f"file:{tmp_path / 'x.npy'}",
        "--dtype", "float64", "--out", tmp_path / "j.npy", "--json", *trust,
        *(answer if asked else ()), *(activation if described["activation_from_caller"] else ()),
    )  # fmt: skip
    assert code == 0, err
    summary = json.loads(out.strip().splitlines()[-1])
    # An image model's JSON gives its sample shape; the panel counts its numbers.
    in_dim = summary.get("in_dim") or int(np.prod(summary["in_shape"]))
    loaded = {**described, "in_dim": in_dim, "out_dim": summary["out_dim"]}
    assert_panel_describes(opener.panel, {**loaded, "assumptions": summary["assumptions"]})
    expected = np.load(tmp_path / "j.npy").reshape(result.jacobians.shape)
    np.testing.assert_allclose(result.jacobians, expected, rtol=1e-4, atol=1e-6)
