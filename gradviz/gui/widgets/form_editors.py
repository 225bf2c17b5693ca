"""The setup form's editors beside its parameter tree: the network editor of each network
setting and the point-set gallery of each point setting, and how they follow the form.

A change in the form may change other settings: a point file or drawn points decide N and
D (shown read-only while they do), and a network's output width follows D. ``follow(names)`` makes
those changes after the user changed ``names`` and returns the settings it changed too, so
the form says ``changed`` for each; ``shown()`` brings every editor up to date after the form
was filled (an experiment, a recording) without a change signal.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtWidgets import QWidget

from gradviz.core.common.errors import GradvizError
from gradviz.core.settings.drawn import is_drawn, parse_drawn
from gradviz.core.settings.table import settings_of
from gradviz.gui.widgets.form_network import FormNetwork
from gradviz.gui.widgets.form_points import (
    SET_BY_DRAWING,
    SET_BY_FILE,
    FormPoints,
    file_of,
    read_point_file,
)


class FormEditors:
    """The editors of a SetupForm (see the module docstring).

    ``form`` gives ``param(name)``, ``point_spec(name)`` (a point setting as the run takes
    it; GradvizError where not valid), ``quietly()`` (a context in which the form says no
    ``changed``) and ``config_class``, whose settings table names the editors.
    ``network_value``, ``file_value`` and ``drawn_value`` are the choices that pick a
    network, a point file and drawn points.
    """

    def __init__(self, form: Any, network_value: str, file_value: str, drawn_value: str):
        self.form = form
        self.network_value = network_value
        self.drawn_value = drawn_value
        self.rows = {row.name: row for row in settings_of(form.config_class)}
        editors = {name: row.info.editor for name, row in self.rows.items()}
        self.networks = {n: self._network(n) for n, e in editors.items() if e == "network"}
        self.points = {n: self._points(n, file_value) for n, e in editors.items() if e == "points"}

    def _network(self, name: str) -> FormNetwork:
        spec = lambda: self.form.param(f"{name}_spec")  # noqa: E731
        return FormNetwork(
            spec, lambda: int(self.form.param("dim").value()), lambda t: spec().setValue(t)
        )

    def _points(self, name: str, file_value: str) -> FormPoints:
        param = self.form.param

        def use_file(path: str) -> None:
            param(f"{name}_file").setValue(path)
            param(name).setValue(file_value)

        def use_drawn(spec: str) -> None:
            # One change for the form: the drawn points quietly, then the choice (which
            # says it); or, already drawing, the points alone.
            if param(name).value() == self.drawn_value:
                param(f"{name}_drawn").setValue(spec)
                return
            with self.form.quietly():
                param(f"{name}_drawn").setValue(spec)
            param(name).setValue(self.drawn_value)

        return FormPoints(
            lambda key: param(key).value(),
            lambda: self.form.point_spec(name),
            lambda generator: param(name).setValue(generator),
            use_file,
            use_drawn,
        )

    def widgets(self) -> dict[str, QWidget]:
        """The tree rows of the editors, by parameter name."""
        return {f"{n}_diagram": net.editor for n, net in self.networks.items()} | {
            f"{n}_gallery": points.gallery for n, points in self.points.items()
        }

    # ---- following the form -------------------------------------------------------------------
    def shown(self) -> None:
        """After the form was filled: N and D of a point file, every editor redrawn."""
        self.follow_point_files()
        for points in self.points.values():
            points.refresh()
        for name, network in self.networks.items():
            network.show_text(str(self.form.param(f"{name}_spec").value()))

    def follow(self, names: set[str]) -> set[str]:
        """After the user changed ``names``: the settings that follow them, changed too."""
        changed = self.follow_point_files()
        changed |= self.networks_follow_dim(names | changed)
        redraw = {"n", "dim", "seed", *self.points}
        redraw |= {f"{p}_{kind}" for p in self.points for kind in ("file", "drawn")}
        if (names | changed) & redraw:
            for points in self.points.values():
                points.schedule()
        return changed

    def typing(self, name: str, text: str) -> None:
        """The spec of network setting ``name`` as being typed."""
        self.networks[name].show_text(text)

    def follow_point_files(self) -> set[str]:
        """N and D as the first point file or drawn set among the settings (they decide
        them), shown read-only while they do; the names changed."""
        shape, source = None, ""
        for name in (name for name, row in self.rows.items() if row.info.accepts_file):
            try:
                spec = self.form.point_spec(name)
                path = file_of(spec)
                if path is not None:
                    shape, source = read_point_file(path).shape, SET_BY_FILE.format(path=path)
                    break
                if is_drawn(spec):
                    points = parse_drawn(spec)
                    shape, source = (len(points), len(points[0])), SET_BY_DRAWING
                    break
            except GradvizError:
                continue  # the problem line names it
        changed = set()
        for name, value in zip(("n", "dim"), shape or (None, None), strict=True):
            param = self.form.param(name)
            tip = source if shape else self.rows[name].info.tooltip
            param.setOpts(readonly=shape is not None, tip=tip)
            if value is not None and param.value() != value:
                with self.form.quietly():
                    param.setValue(value)
                changed.add(name)
        return changed

    def networks_follow_dim(self, names: set[str]) -> set[str]:
        """After a change of D (or a switch to a network), each network's last width becomes
        D where its spec is valid; the names of the specs rewritten. Each spec changed is
        drawn anew."""
        rewritten = set()
        for name, network in self.networks.items():
            spec_param = self.form.param(f"{name}_spec")
            chosen = self.form.param(name).value() == self.network_value
            if chosen and names & {"dim", name}:
                text = network.following_dim(str(spec_param.value()))
                if text is not None:
                    with self.form.quietly():
                        spec_param.setValue(text)
                    rewritten.add(spec_param.name())
            if names & {spec_param.name(), name} or rewritten:
                network.show_text(str(spec_param.value()))
        return rewritten

    def show_network_gradients(self, snapshot: Any, run_net: str | None) -> None:
        for network in self.networks.values():
            network.show_gradients(snapshot, run_net)
