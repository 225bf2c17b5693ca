"""The agreement test: random stories of user actions over the real window, and after every
action every readout of the page in focus agrees with the source in focus and with the CLI.

The rules are what a user does: start, pause, step, reset, change N or the method, edit the
network in the setup panel's editor, click a layer in its diagram (its weights and gradients
open in a window), pick a point set in its gallery or draw a point, open a lab
recording, a watch recording or a damaged one, scrub the timeline, tick or untick its Follow,
Show first NaN, Back to live view, switch pages, and press a page's "Add ..." buttons (a page
that offers them, such as Runs, joins without a rule of its own). The sources are the lab's
live snapshot, the pinned first NaN, a recorded step and a recording; the CLI's numbers for
each recording come from ``gradviz fit --json`` and ``gradviz inspect --json``, run once
here, in-process.

The default run is bounded (a few short stories on prepared recordings); the ``bench`` test
runs many longer ones: ``pytest -m bench tests/gui/test_agreement.py``.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import re
import shutil

import numpy as np
import pytest
from fixtures_app import isolated_settings, make_lab, small  # noqa: F401 - fixtures
from hypothesis import HealthCheck, Verbosity, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)
from PySide6.QtCore import QPointF, Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QPushButton

from gradviz.cli import main as cli_main
from gradviz.core.common.health import HEALTH_LABELS, Health
from gradviz.core.nets.networks import Linear, NetworkSpec
from gradviz.core.settings.drawn import is_drawn, parse_drawn
from gradviz.gui.pages.lab.earlier_runs import KEPT
from gradviz.gui.run.session import RunState
from gradviz.gui.run.status import has_nonfinite_gradients
from gradviz.gui.widgets.settings_form import FREE, NETWORK

WAIT_MS = 60_000
#: The live runs of the stories: short, so a story never leaves a run busy for long.
LIVE = dict(n=12, steps=60)


def _cli(*args: str) -> tuple[int, dict]:
    """``gradviz ARGS --json`` in this process: its exit code and its one JSON document."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli_main([*args, "--json"])
    return code, json.loads(out.getvalue())


def _watch_recording(path, steps: int, nan_at: int):
    """A watch recording of a small model whose loss is NaN at step ``nan_at``, written in
    this process (torch is already imported here; a subprocess would import it again)."""
    import torch
    from torch import nn

    import gradviz

    class Poisoned(nn.Module):
        """Its output is NaN while ``on``: the recording's origin module (the Graph page
        marks it from the first non-finite step on)."""

        on = False

        def forward(self, h):
            return h * float("nan") if self.on else h

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), Poisoned(), nn.Tanh(), nn.Linear(8, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(16, 4), torch.randn(16, 1)
    rec = gradviz.watch(model, str(path), every=1)
    for step in range(steps):
        model[1].on = step == nan_at
        loss = ((model(x) - y) ** 2).mean()
        optimizer.zero_grad()
        loss.backward()
        rec.log(loss=loss)
        optimizer.step()
    rec.close()
    return path


def _unreplayable_recording(path, steps: int, nan_at: int):
    """A watch recording whose first non-finite step (``nan_at``, made in a backward) could
    not be run again as it ran: its forward draws noise from a generator that is not the
    model's, so the recording says why it names no origin (``origin_unknown``)."""
    import torch
    from torch import nn

    import gradviz

    noise = torch.Generator().manual_seed(1)

    class Noisy(nn.Module):
        kink = False

        def forward(self, h):
            h = h + torch.rand(h.shape, generator=noise)
            return h + torch.sqrt((h - h.detach()).square()) if self.kink else h

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), Noisy(), nn.Tanh(), nn.Linear(8, 1))
    x = torch.randn(16, 4)
    with gradviz.watch(model, str(path), every=1) as rec:
        for step in range(steps):
            model[1].kink = step == nan_at
            loss = model(x).square().mean()
            model.zero_grad()
            loss.backward()
            rec.log(loss=loss)
    return path


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> dict[str, dict]:
    """The recordings the stories open, each with the CLI's numbers for it, by path:
    ``{"kind": "lab" | "watch" | "damaged" | "watch-unknown", "inspect": {...}, "fit": {...}
    or None}``."""
    root = tmp_path_factory.mktemp("agreement")
    found: dict[str, dict] = {}
    for name, method in (("naive", "naive"), ("safe", "safe")):
        path = str(root / name)
        args = ["fit", "--method", method, "--target", "gaussian", "--n", "10", "--steps", "6"]
        code, fit = _cli(*args, "--record", path)
        assert code == 0
        found[path] = {"kind": "lab", "fit": fit}
    watch = _watch_recording(root / "watch", steps=34, nan_at=20)
    damaged = root / "damaged"
    shutil.copytree(watch, damaged)
    (damaged / "rank0" / "stats" / "c" / "1" / "0" / "0").unlink()  # steps 16-31
    found[str(watch)] = {"kind": "watch", "fit": None}
    found[str(damaged)] = {"kind": "damaged", "fit": None}
    unknown = _unreplayable_recording(root / "unknown", steps=8, nan_at=5)
    found[str(unknown)] = {"kind": "watch-unknown", "fit": None}
    import zarr  # its I/O threads live as long as the process: start them before the test

    from gradviz.core.record.reader import Reader

    for path, entry in found.items():
        code, entry["inspect"] = _cli("inspect", path)
        reader = Reader(path)  # the Runs page's scalars, read independently of the page
        entry["scalars"] = {
            rank: {
                name: (series.steps.copy(), series.values.copy())
                for name in stream.scalar_names()
                for series in [stream.scalar(name)]
            }
            for rank in reader.ranks
            for stream in [reader.rank(rank)]
        }
        assert code in (0, 1)  # 1: a non-finite gradient or damage was found
        with contextlib.suppress(Exception):
            zarr.open_group(path, mode="r")["rank0/stats"][:]
    return found


def _texts(value) -> list[str]:
    """Every string inside a readout (nested dicts and lists)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _texts(v)]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _texts(v)]
    return []


def _same_float(a, b) -> bool:
    return (a is None and b is None) or (
        a is not None and b is not None and (a == b or (math.isnan(a) and math.isnan(b)))
    )


def damaged_steps(inspect: dict) -> list[tuple[int, int]]:
    """The (first, last) step ranges ``inspect --json`` names as missing."""
    return [tuple(r) for d in inspect["damaged"] for r in d["missing_steps"]]


def legend_of(codes: np.ndarray) -> dict[str, int]:
    """An independent count of Health codes, as a legend reads them."""
    tally = np.bincount(np.asarray(codes, np.uint8).ravel(), minlength=len(Health))
    return {HEALTH_LABELS[h]: int(tally[h]) for h in Health}


class AgreementMachine(RuleBasedStateMachine):
    """Drives ``lab`` (the app, shown); ``prepared`` as the fixture above."""

    lab = None
    qtbot = None
    prepared: dict[str, dict] = {}

    # ---- helpers --------------------------------------------------------------------------
    @property
    def session(self):
        return self.lab.session

    def wait(self, condition, timeout: int = WAIT_MS) -> None:
        self.qtbot.waitUntil(condition, timeout=timeout)

    def wait_for_live_frame(self) -> None:
        s = self.session
        self.wait(
            lambda: (
                s.latest is not None
                and s.latest.generation == s.generation
                and s.shown is not None
                and s.shown.generation == s.generation
            )
        )

    def open(self, kind: str) -> None:
        path = next(p for p, e in self.prepared.items() if e["kind"] == kind)
        shown = []
        self.lab.recordings.shown.connect(shown.append)
        try:
            assert self.lab.recordings.open(path)
            self.wait(lambda: bool(shown))
        finally:
            self.lab.recordings.shown.disconnect(shown.append)

    def focused_timeline(self):
        pages = self.lab.window.pages
        if pages.current() == 0:
            dock = self.lab.recordings.dock
            return self.lab.recordings.timeline if dock.isVisible() else None
        if pages.current() == self.lab.recordings.page_index:
            return self.lab.recordings.page.timeline
        if pages.current() == self.lab.graph.index and self.lab.graph.page.data is not None:
            return self.lab.graph.page.timeline
        return None

    # ---- rules: what a user does ------------------------------------------------------------
    # No preconditions: the app's state after an action depends on timing (a short run may
    # have finished or not), and hypothesis needs the same choices to offer the same rules.
    # A rule that does not apply does nothing, as a disabled button does; ``taken`` lists
    # the rules that acted.
    @initialize()
    def fresh_lab(self) -> None:
        """Each story starts on the lab page at step 0 of a small run."""
        self.taken: list[str] = []
        self.compared: set[str] = set()  # the Runs page's sources compared with a reference
        self.lab.window.pages.show_page(0)
        self.lab.recordings.close_source()
        self.lab.form.set_config(small("safe", **LIVE))
        self.lab.reset()
        self.wait_for_live_frame()

    @rule()
    def start(self) -> None:
        if not self.session.available:
            return
        self.lab.start()
        self.wait(lambda: self.session.state in (RunState.RUNNING, RunState.FINISHED))
        self.wait_for_live_frame()
        self.taken.append("start")

    @rule()
    def pause(self) -> None:
        if self.session.state is not RunState.RUNNING:
            return
        self.lab.pause()
        self.wait(lambda: self.session.state is not RunState.RUNNING)
        self.taken.append("pause")

    @rule()
    def step(self) -> None:
        s = self.session
        waiting = s.state in (RunState.READY, RunState.PAUSED, RunState.RUNNING)
        if not waiting or s.shown is None or s.shown.generation != s.generation:
            return
        before = s.latest.step
        self.lab.step_once()
        self.wait(
            lambda: (
                s.latest.step > before
                or s.state is RunState.FINISHED
                or (s.latest.done and s.state is RunState.PAUSED)
            )
        )
        self.taken.append("step")

    @rule()
    def reset(self) -> None:
        if not self.session.available:
            return
        self.lab.reset()
        self.wait_for_live_frame()
        self.taken.append("reset")

    @rule(n=st.sampled_from([8, 12, 16]), method=st.sampled_from(["safe", "naive", "masked"]))
    def change_n_or_method(self, n: int, method: str) -> None:
        if not self.session.available:
            return
        form = self.lab.form
        before = self.session.generation
        form.param("n").setValue(n)
        form.param("method").setValue(method)
        if self.session.generation != before:  # a setting changed: a fresh run
            self.wait_for_live_frame()
        self.taken.append("change_n_or_method")

    def after_an_edit(self, before: int, taken: str) -> None:
        """An edit restarts the run at once where it changed the setup: wait for its frame."""
        if self.session.generation != before:
            self.wait_for_live_frame()
        self.taken.append(taken)

    @rule(edit=st.sampled_from(["network", "add_layer", "remove_layer", "wider", "activation",
                                "free"]))  # fmt: skip
    def edit_the_network(self, edit: str) -> None:
        """The coordinate source's combo, and the network editor's + / - buttons and
        activation combos, as a user clicks them."""
        form = self.lab.form
        if not self.session.available:
            return
        editor, before = form.network_editor(), self.session.generation
        chosen = form.param("net").value() == NETWORK
        if edit == "free" or not chosen:
            form.param("net").setValue(FREE if chosen else NETWORK)
        elif edit == "add_layer" or editor.chain is None or not editor.chain.hidden_count:
            editor.add_layer.click()
        elif edit == "remove_layer":
            editor.remove_layer.click()
        elif edit == "wider":
            editor.column(1)["more"].click()
        elif edit in ("activation", "network"):
            combo = editor.column(1)["activation"]
            index = (combo.currentIndex() + 1) % combo.count()
            combo.setCurrentIndex(index)
            combo.activated.emit(index)  # what a pick in its list says
        self.after_an_edit(before, "edit_the_network")

    @rule(which=st.floats(0, 1))
    def open_a_layer(self, which: float) -> None:
        """A click on a layer's lines in the network diagram, where it draws gradients."""
        editor = self.lab.form.network_editor()
        if not editor.gradients:
            return
        diagram = editor.diagram
        layer = round(which * (len(editor.gradients) - 1))
        QTest.mouseClick(
            diagram, Qt.MouseButton.LeftButton, pos=diagram.layer_point(layer).toPoint()
        )
        view = self.lab.lab.network_gradients.layer_view
        assert view is not None and view.isVisible() and view.layer == layer
        self.taken.append("open_a_layer")

    @rule(which=st.floats(0, 1))
    def pick_a_point_set(self, which: float) -> None:
        """A thumbnail of the point-set gallery clicked (a generator, or "drawn")."""
        points = self.lab.form.point_gallery()
        buttons = points.gallery.buttons
        offered = [n for n, b in buttons.items() if b.isEnabled() and n != "file…"]
        if not self.session.available or not offered:
            return
        before = self.session.generation
        buttons[offered[round(which * (len(offered) - 1))]].click()
        points.refresh()  # the gallery's preview and canvas at once, not after its timer
        self.after_an_edit(before, "pick_a_point_set")

    @rule(x=st.floats(-2, 2), y=st.floats(-2, 2))
    def draw_a_point(self, x: float, y: float) -> None:
        """A click on the drawing canvas (where "drawn" is picked) adds a point there."""
        canvas = self.lab.form.point_gallery().gallery.drawing
        if not self.session.available or not canvas.isVisibleTo(self.lab.form):
            return
        before = self.session.generation
        canvas.add_point(QPointF(x, y))  # what the canvas does with a click at (x, y)
        self.after_an_edit(before, "draw_a_point")

    @rule(kind=st.sampled_from(["lab-naive", "lab-safe", "watch", "damaged", "watch-unknown"]))
    def open_recording(self, kind: str) -> None:
        if kind.startswith("lab-"):
            name = kind.removeprefix("lab-")
            path = next(p for p in self.prepared if os.path.basename(p) == name)
            shown = []
            self.lab.recordings.shown.connect(shown.append)
            try:
                assert self.lab.recordings.open(path)
                self.wait(lambda: bool(shown))
            finally:
                self.lab.recordings.shown.disconnect(shown.append)
        else:
            self.open(kind)
        self.taken.append("open_recording")

    @rule(where=st.floats(0, 1))
    def scrub_the_timeline(self, where: float) -> None:
        timeline = self.focused_timeline()
        if timeline is None or not timeline.readouts()["count"]:
            return
        timeline.select_index(round(where * (timeline.readouts()["count"] - 1)))
        self.taken.append("scrub_the_timeline")

    @rule()
    def click_follow(self) -> None:
        """Tick or untick Follow on the timeline in focus, as a click does."""
        timeline = self.focused_timeline()
        if timeline is None or not timeline.follow.isEnabled():
            return
        timeline.follow.click()
        self.taken.append("click_follow")

    @rule()
    def show_first_nan(self) -> None:
        self.trigger("first_nan", "show_first_nan")

    @rule()
    def back_to_live_view(self) -> None:
        self.trigger("live", "back_to_live_view")

    def trigger(self, action_name: str, taken: str) -> None:
        """Trigger the window's action where it is enabled; the step is named ``taken``."""
        action = self.lab.window.actions[action_name]
        if action.isEnabled():
            action.trigger()
            self.taken.append(taken)

    @rule(where=st.floats(0, 1))
    def switch_page(self, where: float) -> None:
        pages = self.lab.window.pages
        pages.show_page(round(where * (pages.bar.count() - 1)))
        self.taken.append("switch_page")

    def show_the_graph_page(self) -> None:
        """The walkthrough's way to the Graph page."""
        self.lab.window.pages.show_page(self.lab.graph.index)
        self.taken.append("show_the_graph_page")

    def show_the_runs_page(self) -> None:
        """The walkthrough's way to the Runs page (random stories use ``switch_page``)."""
        self.lab.window.pages.show_page(self.lab.page_index("runs"))
        self.taken.append("show_the_runs_page")

    @rule(which=st.floats(0, 1))
    def press_an_add_button(self, which: float) -> None:
        """A page that offers "Add ..." buttons (the Runs page: add a recording, add the
        live run) gets them pressed; a recording asked for is one of the prepared ones."""
        buttons = self.add_buttons()
        if not buttons:
            return
        shown = []
        self.lab.recordings.shown.connect(shown.append)
        before = self.lab.recordings.source
        try:
            buttons[round(which * (len(buttons) - 1))].click()
            if self.lab.recordings.source is not before:  # a recording is being opened
                self.wait(lambda: bool(shown))
        finally:
            self.lab.recordings.shown.disconnect(shown.append)
        self.taken.append("press_an_add_button")

    def runs_page(self):
        """The Runs page when it is in focus, else None."""
        in_focus = self.lab.window.pages.current() == self.lab.page_index("runs")
        return self.lab.runs.overlay if in_focus else None

    @rule(which=st.floats(0, 1))
    def pick_the_runs_quantity(self, which: float) -> None:
        page = self.runs_page()
        if page is None:
            return
        page.quantity.setCurrentIndex(round(which * (page.quantity.count() - 1)))
        self.taken.append("pick_the_runs_quantity")

    @rule(which=st.sampled_from(["step", "wall", "relative"]))
    def pick_the_runs_x_axis(self, which: str) -> None:
        page = self.runs_page()
        if page is None:
            return
        page.x_axis.setCurrentIndex(page.x_axis.findData(which))
        self.taken.append("pick_the_runs_x_axis")

    @rule(weight=st.sampled_from([0, 60, 95]))
    def set_the_runs_smoothing(self, weight: int) -> None:
        page = self.runs_page()
        if page is None:
            return
        page.smoothing.setValue(weight)
        self.taken.append("set_the_runs_smoothing")

    def add_buttons(self) -> list[QPushButton]:
        page = self.lab.window.pages.page()
        if page is None or not hasattr(page, "findChildren"):
            return []
        return [
            b
            for b in page.findChildren(QPushButton)
            if b.isVisible() and b.isEnabled() and b.text().startswith("Add")
        ]

    # ---- invariants: the page in focus agrees with its source -----------------------------
    @invariant()
    def no_negative_step_anywhere(self) -> None:
        for text in _texts(self.lab.window.readouts()):
            assert not re.search(r"step -\d|-922337203685477", text), text

    @invariant()
    def the_lab_agrees_with_the_shown_snapshot(self) -> None:
        window = self.lab.window
        if window.pages.current() != 0:
            return
        r = window.readouts()
        shown = self.session.shown
        status = r["status"]
        if shown is None:
            assert status["step"] is None
            return
        assert status["step"] == shown.step
        for key, view in r["views"].items():
            assert (view["step"], view["generation"]) == (shown.step, shown.generation), key
        views = r["views"]
        for key in ("distances", "target", "error", "mask"):
            if key in views:  # each matrix spans the shown run's N x N entries
                assert views[key]["extent"] == [shown.n_points] * 2, key
        if "mask" in views:
            counts = shown.entry_health_counts
            expected = legend_of(shown.entry_health) if counts is None else {
                HEALTH_LABELS[h]: int(counts[h]) if h < len(counts) else 0 for h in Health
            }  # fmt: skip
            assert views["mask"]["legend"] == expected
        if "coord_grads" in views:
            coord = views["coord_grads"]
            if len(shown.coord_grads):
                assert coord["recorded"] and coord["legend"] == legend_of(shown.coord_health)
            else:
                assert not coord["recorded"] and coord["legend"] is None
        if "loss" in views:
            assert len(views["loss"]["earlier_runs"]) <= KEPT  # the last runs, no more
            assert views["loss"]["losses"] == len(shown.loss_history)
            last = float(shown.loss_history[-1]) if len(shown.loss_history) else None
            assert _same_float(views["loss"]["last_loss"], last)
            # The non-finite steps it reports are those of its marks: the shown run's own.
            bad = np.flatnonzero(~np.isfinite(np.asarray(shown.loss_history, np.float64)))
            assert views["loss"]["nonfinite_steps"] == bad[:20].tolist()
        if has_nonfinite_gradients(shown):
            assert status["alarm"], status["texts"]
        if shown.generation == self.session.generation:
            self._live_agrees(r, shown)
        elif shown.generation < 0:
            self._recording_agrees(r, shown)

    def _live_agrees(self, r: dict, shown) -> None:
        config = self.session.settings_now
        source = {"n": shown.n_points, "dim": shown.dim, "method": shown.method}
        self._setup_agrees(r["setup"], {**source, "target": config.target, "net": config.net})
        self._editors_agree(r["setup"], shown, config)
        timeline = r["timeline"]
        if timeline is not None and timeline["count"] and self.lab.recordings.live.active:
            if self.session.viewing_pinned:
                assert timeline["step"] <= shown.step
            else:
                assert timeline["step"] == shown.step, (timeline, shown.step)
        first = self.session.first_nonfinite_grad_step
        if first is not None:
            assert r["status"]["first_nonfinite_grad_step"] == first
            assert r["status"]["alarm"]

    def _editors_agree(self, setup: dict, shown, config) -> None:
        """The network editor shows the form's network, and the gradients it draws are the
        shown step's own, parameter by parameter, only where that network is the run's;
        drawn points are the run's target points, and the canvas holds them."""
        form = self.lab.form
        editor = form.network_editor().readouts()
        if setup["net"] is not None:
            assert NetworkSpec.parse(editor["text"]) == NetworkSpec.parse(setup["net"])
        drawn = [p["weight"] for p in editor["gradients"]] + [
            p["bias"] for p in editor["gradients"] if p["bias"] is not None
        ]
        same_net = config.net is not None and setup["net"] == config.net
        if same_net and shown.param_health:
            health = dict(shown.param_health)
            assert {p["name"] for p in drawn} == set(health)
            for p in drawn:
                assert p["health"] == HEALTH_LABELS[Health(health[p["name"]])], p
            self.compared.add("network gradients")
            self._layer_window_agrees(shown, config)
        elif not same_net:
            assert drawn == []  # never another network's gradients
            view = self.lab.lab.network_gradients.layer_view
            assert view is None or not view.isVisible() or view.matrix is None
        if is_drawn(config.target):
            points = np.array(parse_drawn(config.target))
            assert np.allclose(shown.target_coords, points, rtol=1e-6, atol=1e-6)
            canvas = form.point_gallery().gallery.readouts()["drawing"]
            if setup["target"] == config.target and canvas is not None:
                assert np.array_equal(np.array(canvas["points"]), points)
            self.compared.add("drawn points")

    def _layer_window_agrees(self, shown, config) -> None:
        """The open layer window holds the shown step's own weights and gradients of its
        layer, exactly, and its worst health code is the diagram's (a whole layer kept)."""
        view = self.lab.lab.network_gradients.layer_view
        if view is None or not view.isVisible() or view.layer is None:
            return
        layers = NetworkSpec.parse(config.net).layers
        linears = [k for k, layer in enumerate(layers) if isinstance(layer, Linear)]
        if view.layer >= len(linears):
            assert view.matrix is None
            return
        index = linears[view.layer]
        kept = {p.name: p for p in shown.param_values}
        weight, bias = kept[f"{index}.weight"], kept.get(f"{index}.bias")
        matrix = view.matrix
        assert matrix is not None, view.readouts()  # the diagram draws this step's gradients
        columns = matrix.weight_columns
        assert np.array_equal(matrix.weights[:, :columns], weight.values.astype(np.float64))
        assert np.array_equal(matrix.grads[:, :columns], weight.grads, equal_nan=True)
        if bias is not None:
            assert np.array_equal(matrix.grads[:, -1], bias.grads, equal_nan=True)
        if not matrix.elided:
            health = dict(shown.param_health)
            names = [weight.name] + ([bias.name] if bias is not None else [])
            assert int(matrix.health.max()) == max(health[n] for n in names)
        self.compared.add("layer window")

    @staticmethod
    def _setup_agrees(setup: dict, source: dict) -> None:
        """The setup panel shows each of the source's settings, or names it among those it
        says differ from the run shown (the next run's), and names no other."""
        for name, value in source.items():
            named = name in setup["differs_from_shown"]
            assert (setup[name] != value) == named, (name, setup[name], value, setup)

    def _recording_agrees(self, r: dict, shown) -> None:
        data = self.lab.recordings.recorded.data
        entry = self.prepared[str(data.path)]
        inspect, fit = entry["inspect"], entry["fit"]
        timeline = r["timeline"]
        assert timeline is not None and timeline["step"] + 1 == shown.step  # step k: k+1 done
        first = inspect["first_nonfinite"]
        first_step = None if first is None else first["step"]
        assert r["status"]["first_nonfinite_grad_step"] == first_step
        assert r["status"]["alarm"] == (first is not None)
        assert fit["first_nonfinite_grad_step"] == first_step
        # The setup panel shows the settings the recording was made with.
        config = data.meta["config"]
        self._setup_agrees(
            r["setup"], {"target": config["target"], "n": config["n"], "method": fit["method"]}
        )
        coord = r["views"].get("coord_grads")
        if coord is not None and coord["recorded"] and "coords" in data.tensors:
            # Free coordinates are the recorded tensor "coords": its recorded statistics
            # (another path through the recording) count the same non-finite gradients.
            t, col = data.tensors.index("coords"), data.column_of_step(shown.step - 1)
            _finite, _zero, nan, pinf, ninf = (int(c) for c in data.counts[t, col])
            legend = coord["legend"]
            assert (legend["NaN"], legend["+Inf"], legend["-Inf"]) == (nan, pinf, ninf)
        losses = r["views"].get("loss")
        if losses is not None and losses["losses"]:
            assert math.isclose(float(shown.loss_history[0]), fit["initial_loss"], rel_tol=1e-6)

    @invariant()
    def the_model_health_page_agrees_with_its_recording(self) -> None:
        recordings = self.lab.recordings
        if self.lab.window.pages.current() != recordings.page_index:
            return
        r = self.lab.window.readouts()
        data = recordings.page.data
        if data is None:
            assert r["path"] is None
            return
        inspect = self.prepared[str(data.path)]["inspect"]
        per_rank = next(p for p in inspect["per_rank"] if p["rank"] == data.rank)
        first = per_rank["first_nonfinite"]
        assert r["first_nonfinite_step"] == (None if first is None else first["step"])
        self.check_origin(r, first or {})
        short = inspect["ranks_ending_early"]  # said on the same line as damage
        assert bool(r["damage"]) == bool(inspect["damaged"] or short)
        whole = not inspect["damaged"] and not short
        assert inspect["complete"] == (whole and per_rank["complete"])
        timeline = r["timeline"]
        assert timeline["count"] == data.n_steps
        if not inspect["damaged"]:
            assert data.n_steps == per_rank["steps"]
        # The loss plot marks the non-finite losses the Reader reads, at their steps.
        scalars = self.prepared[str(data.path)]["scalars"].get(data.rank, {})
        if "loss" in scalars:
            loss_steps, losses = scalars["loss"]
            bad = set(loss_steps[~np.isfinite(losses)].tolist())
            marked = [str(int(s)) for s in data.steps if int(s) in bad]
            assert r["loss"]["nonfinite_steps"] == marked
            self.compared.add("loss marks")
        if timeline["count"]:
            step = str(int(data.steps[timeline["index"]]))
            assert timeline["step"] == int(step)
            # The cursor of the map and of the loss stand on the selected step's column.
            assert r["health"]["cursor_step"] == step
            assert r["loss"]["cursor_step"] == step

    def check_origin(self, r: dict, first: dict) -> None:
        """Where the first non-finite value began, as the page says it (the button, the
        origin panel, the button's tooltip), against ``inspect --json``: the origin, or why
        the recording names none."""
        origin, unknown, button = (
            first.get("origin"),
            first.get("origin_unknown"),
            r["first_nonfinite"],
        )
        if origin:
            assert r["origin"] is not None and r["origin"]["cause"] == origin["cause"]
            assert f"began in the {origin['phase']}" in button
            self.compared.add("origin")
        else:
            assert r["origin"] is None and "began in the" not in button
        assert button.endswith(" · where it began is not known") == bool(unknown)
        assert r["first_nonfinite_why"] == (unknown or "")
        if unknown:
            self.compared.add("origin unknown")

    @invariant()
    def the_runs_page_agrees_with_its_sources(self) -> None:
        """Every run listed on the Runs page reports what its source holds: a recording's
        chosen scalar as the Reader reads it (and ``inspect --json``'s first non-finite
        step falls among its non-finite points' steps or later), the live run's loss as the
        lab's loss history. The page redraws a few times a second: wait for it to catch up,
        then name what still disagrees."""
        page = self.runs_page()
        if page is None:
            return
        with contextlib.suppress(Exception):  # the disagreements say what went wrong
            self.wait(lambda: not self.runs_disagreements(page), timeout=5_000)
        assert self.runs_disagreements(page) == []

    def runs_disagreements(self, page) -> list[str]:
        r = page.readouts()
        wrong = []
        drawn = dict(zip(page.visible_runs(), range(len(page.visible_runs())), strict=True))
        arrays = page.arrays()
        for run in r["runs"]:
            assert (run["scalar"], run["x_axis"], run["smoothing"]) == (
                r["scalar"], r["x_axis"], r["smoothing"],
            )  # fmt: skip
            if run["source"] is None:  # not read yet: nothing drawn
                if run["points"]:
                    wrong.append(f"{run['name']}: points before its source was read")
                continue
            expected = self.expected_points(run)
            if expected is None:
                continue
            self.compared.add(run["source"])
            steps, values = expected
            if run["x_axis"] != "step":  # over time: only the points with wall times
                if run["points"] > len(steps):
                    wrong.append(f"{run['name']}: {run['points']} points > {len(steps)}")
                continue
            last = float(values[-1]) if len(values) else None
            got = (run["points"], run["last_step"], run["last_value"], run["nonfinite"])
            want = (
                len(steps),
                int(steps[-1]) if len(steps) else None,
                None if last is None or math.isnan(last) else last,
                int(np.count_nonzero(~np.isfinite(values))),
            )
            if got != want:
                wrong.append(f"{run['name']}: (points, last step, last value, non-finite) "
                             f"{got} != {want}")  # fmt: skip
            key = next((k for k, v in page.runs.items() if v.label == run["name"]), None)
            if key in drawn:  # the exported points are the source's, step for step
                i = drawn[key]
                if not (
                    np.array_equal(arrays[f"run{i}.steps"], steps)
                    and np.array_equal(arrays[f"run{i}.values"], values, equal_nan=True)
                ):
                    wrong.append(f"{run['name']}: drawn points differ from the source's")
        return wrong

    def expected_points(self, run: dict):
        """((K,) steps, (K,) values) the run's source holds of the chosen quantity: the
        lab's loss history for the current live run, the Reader's scalar for a recording;
        None where this test has no independent reference (an ended live run, a gradient
        norm)."""
        scalar = run["scalar"]
        if run["source"] == "live":
            latest = self.session.latest
            found = re.match(r"live run (\d+) ", run["name"])
            if latest is None or found is None or int(found.group(1)) != latest.generation:
                return None
            if scalar != "loss":
                return None
            losses = np.asarray(latest.loss_history, np.float64)
            return np.arange(len(losses)), losses
        entry = self.prepared.get(run["path"])
        if entry is None or scalar not in entry["scalars"].get(run["rank"], {}):
            return None
        steps, values = entry["scalars"][run["rank"]][scalar]
        inspect = entry["inspect"]
        per_rank = next(p for p in inspect["per_rank"] if p["rank"] == run["rank"])
        # Like with like: the scalar's own last logged step, within what inspect recorded.
        assert (
            not len(steps)
            or per_rank["last_step"] is None
            or (int(steps[-1]) <= per_rank["last_step"] or inspect["damaged"])
        ), (run, per_rank)
        return steps, values

    @invariant()
    def the_graph_page_agrees_with_its_recording(self) -> None:
        """The Graph page over a recording colours each node as ``inspect RECORDING --graph
        --step K --json`` reports its health at the step shown, and marks nothing before the
        recording's first non-finite step. It lays out off the GUI thread: wait for the
        drawing of the recording's step, then name what disagrees."""
        graph = self.lab.graph
        if self.lab.window.pages.current() != graph.index or graph.page.data is None:
            return
        with contextlib.suppress(Exception):  # the disagreements say what went wrong
            self.wait(lambda: not self.graph_disagreements(graph.page), timeout=5_000)
        assert self.graph_disagreements(graph.page) == []
        self.compared.add("graph")

    def graph_disagreements(self, page) -> list[str]:
        r, data = page.readouts(), page.data
        if r["source"] is None or r["step"] is None:
            return ["nothing drawn yet"]
        entry = self.prepared[str(data.path)]
        cli = self.graph_at(entry, str(data.path), r["step"])
        wrong = []
        if r["source"] != cli["source"]:
            wrong.append(f"source {r['source']} != {cli['source']}")
        # A drawing leaves out the parameters no edge touches (their module carries them).
        touched = {end for edge in cli["edges"] for end in edge}
        drawn = {
            n["id"]
            for n in cli["nodes"]
            if not cli["edges"] or n["kind"] != "parameter" or n["id"] in touched
        }
        if r["node_count"] != len(drawn) or set(r["nodes"]) != drawn:
            wrong.append(f"nodes drawn {sorted(r['nodes'])} != inspect's {sorted(drawn)}")
        missing = {int(s) for a, b in damaged_steps(entry["inspect"]) for s in range(a, b + 1)}
        for node in cli["nodes"]:
            shown = r["nodes"].get(node["id"])
            if shown is None or node["health"] is None:
                continue
            expected = "lost" if r["step"] in missing else node["health"]["worst"]
            if shown["health"] != expected:
                wrong.append(f"{node['id']}: {shown['health']} != {expected} at step {r['step']}")
        first = entry["inspect"]["first_nonfinite"]
        if first is None or r["step"] < first["step"]:
            marked = [k for k, v in r["nodes"].items() if v["origin"] or v["spread"]]
            if marked:
                wrong.append(f"marked before the first non-finite step: {marked}")
        elif first.get("origin") and first["origin"].get("module"):
            self.compared.add("graph origin")  # from its step on, the origin is marked
            if not any(v["origin"] for v in r["nodes"].values()):
                wrong.append(f"origin {first['origin']} not marked at step {r['step']}")
        return wrong

    @staticmethod
    def graph_at(entry: dict, path: str, step: int) -> dict:
        """``inspect PATH --graph --step STEP --json`` in this process, once per step."""
        cache = entry.setdefault("graphs", {})
        if step not in cache:
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                assert cli_main(["inspect", path, "--graph", "--step", str(step), "--json"]) == 0
            cache[step] = json.loads(out.getvalue().splitlines()[-1])
        return cache[step]

    @invariant()
    def another_page_reports_its_title(self) -> None:
        r = self.lab.window.readouts()
        pages = self.lab.window.pages
        assert r["page"] == pages.bar.tabText(pages.current())

    def check(self) -> None:
        """Every invariant, as hypothesis checks them after each rule."""
        self.no_negative_step_anywhere()
        self.the_lab_agrees_with_the_shown_snapshot()
        self.the_model_health_page_agrees_with_its_recording()
        self.the_runs_page_agrees_with_its_sources()
        self.the_graph_page_agrees_with_its_recording()
        self.another_page_reports_its_title()


#: One story through every rule and source, in the order a walkthrough takes them: (rule,
#: keywords). Random stories rarely reach the later sources within a few examples.
WALKTHROUGH = (
    ("start", {}),
    ("click_follow", {}),  # unticked: the run holds on the step shown
    ("click_follow", {}),  # ticked: the newest step
    ("step", {}),
    ("scrub_the_timeline", {"where": 0.0}),
    ("start", {}),  # resumed from the newest step, shown at once
    ("pause", {}),
    ("step", {}),
    ("scrub_the_timeline", {"where": 0.5}),
    ("edit_the_network", {"edit": "network"}),  # a network makes the coordinates
    ("edit_the_network", {"edit": "add_layer"}),
    ("start", {}),
    ("edit_the_network", {"edit": "wider"}),  # while it runs: restarted, running
    ("edit_the_network", {"edit": "activation"}),
    ("step", {}),
    ("open_a_layer", {"which": 1.0}),
    ("pick_a_point_set", {"which": 1.0}),  # "drawn", from the set shown
    ("draw_a_point", {"x": 1.5, "y": -1.5}),
    ("step", {}),
    ("pick_a_point_set", {"which": 0.0}),  # the first generator, at the drawing's N and D
    ("edit_the_network", {"edit": "free"}),
    ("change_n_or_method", {"n": 16, "method": "naive"}),
    ("start", {}),
    ("pause", {}),
    ("show_first_nan", {}),
    ("back_to_live_view", {}),
    ("open_recording", {"kind": "lab-naive"}),
    ("scrub_the_timeline", {"where": 0.0}),
    ("open_recording", {"kind": "lab-safe"}),
    ("scrub_the_timeline", {"where": 1.0}),
    ("start", {}),
    ("open_recording", {"kind": "watch"}),
    ("scrub_the_timeline", {"where": 0.3}),
    ("open_recording", {"kind": "damaged"}),
    ("scrub_the_timeline", {"where": 0.6}),
    ("open_recording", {"kind": "watch-unknown"}),
    ("switch_page", {"where": 1.0}),
    ("press_an_add_button", {"which": 1.0}),
    ("open_recording", {"kind": "watch"}),
    ("show_the_graph_page", {}),
    ("scrub_the_timeline", {"where": 0.0}),
    ("scrub_the_timeline", {"where": 1.0}),
    ("show_the_runs_page", {}),
    ("press_an_add_button", {"which": 0.0}),
    ("press_an_add_button", {"which": 1.0}),
    ("set_the_runs_smoothing", {"weight": 60}),
    ("pick_the_runs_x_axis", {"which": "relative"}),
    ("pick_the_runs_x_axis", {"which": "step"}),
    ("pick_the_runs_quantity", {"which": 1.0}),
    ("pick_the_runs_quantity", {"which": 0.0}),
    ("switch_page", {"where": 0.0}),
    ("reset", {}),
)


def _prepare(qtbot, lab, prepared) -> None:
    AgreementMachine.lab, AgreementMachine.qtbot = lab, qtbot
    AgreementMachine.prepared = prepared
    lab.recordings.choose_path = lambda: next(
        p for p, e in prepared.items() if e["kind"] == "lab" and "safe" in p
    )


def _walk(machine: AgreementMachine) -> list[str]:
    """Take the walkthrough's rules, checking every invariant after each; the rules that
    acted."""
    machine.fresh_lab()
    machine.check()
    for name, keywords in WALKTHROUGH:
        getattr(machine, name)(**keywords)
        machine.check()
    return machine.taken


def _run(qtbot, lab, prepared, examples: int, steps: int) -> None:
    _prepare(qtbot, lab, prepared)
    run_state_machine_as_test(
        AgreementMachine,
        settings=settings(
            max_examples=examples,
            stateful_step_count=steps,
            deadline=None,
            database=None,
            derandomize=examples <= 5,  # the default run: the same stories every time
            verbosity=Verbosity.verbose
            if os.environ.get("GRADVIZ_AGREEMENT_VERBOSE")
            else Verbosity.normal,
            suppress_health_check=list(HealthCheck),
        ),
    )


def test_every_readout_agrees_with_the_source_in_focus(
    qtbot,
    make_lab,  # noqa: F811 - fixture
    prepared,
):
    lab = make_lab(small("safe", **LIVE))
    _prepare(qtbot, lab, prepared)
    machine = AgreementMachine()
    taken = _walk(machine)
    assert len(taken) >= len(WALKTHROUGH) - 2, taken  # the story reached its sources
    assert {"open_recording", "scrub_the_timeline", "show_first_nan", "click_follow"} <= set(
        taken
    ), taken
    required = {"live", "fit", "graph", "graph origin", "loss marks", "origin", "origin unknown",
                "network gradients", "drawn points", "layer window"}  # fmt: skip
    assert required <= machine.compared, machine.compared
    _run(qtbot, lab, prepared, examples=2, steps=6)


@pytest.mark.bench
def test_every_readout_agrees_over_long_stories(
    qtbot,
    make_lab,  # noqa: F811 - fixture
    prepared,
):
    lab = make_lab(small("safe", **LIVE))
    _run(qtbot, lab, prepared, examples=int(os.environ.get("GRADVIZ_AGREEMENT_EXAMPLES", 40)),
         steps=25)  # fmt: skip
