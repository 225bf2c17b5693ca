"""The setup form, generated from the config dataclasses with a pyqtgraph ParameterTree.

Each field of ``FitConfig`` (and of ``LiveSettings``, the app's own display settings)
becomes one parameter; the field's type picks the editor, and the name tables in
``gradviz.core.config`` give the choices and their one-line tooltips. A few fields get a
companion parameter: a point-set field offers "file" and a file picker, and the network
spec is edited as text and validated as the user types (``NetworkSpec.parse`` imports no
torch, so this works before torch is ready).
"""

from __future__ import annotations

import dataclasses
import os
import typing
from dataclasses import dataclass, fields
from typing import Any

import pyqtgraph.parametertree as ptree
from PySide6.QtCore import Signal
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from gradviz.core.config import (
    DISTANCE_METHODS,
    DTYPES,
    MAX_POINTS,
    OPTIMIZERS,
    POINT_GENERATORS,
    FitConfig,
)
from gradviz.core.errors import GradvizError
from gradviz.core.networks import NetworkSpec


@dataclass(frozen=True)
class LiveSettings:
    """How the app shows a run (not part of the run itself)."""

    frame_rate: float = 30.0  # frames drawn per second while running; ~2 = max speed


#: The experiment the app opens with: the point of the app at a glance.
DEFAULT_EXPERIMENT = FitConfig(
    target="helix", n=200, dim=3, init="random", method="masked", lr=0.01, steps=2000
)

FILE_CHOICE = "file…"
FREE, NETWORK = "free coordinates", "network"
#: Settings whose change invalidates the run's state (the app asks to reset).
RESET_FIELDS = frozenset(
    {
        "target",
        "n",
        "dim",
        "init",
        "method",
        "net",
        "seed",
        "dtype",
        "device",
        "optimizer",
        "threads",
    }
)

# Titles, groups and hints for the generated parameters; field types come from the dataclass.
_GROUPS: dict[str, tuple[str, ...]] = {
    "Target points": ("target", "n", "dim", "seed"),
    "Coordinates": ("init", "net"),
    "Distance method": ("method",),
    "Optimiser": ("optimizer", "lr", "steps", "stop_on_nan"),
    "Compute": ("device", "dtype", "threads"),
    "Display": ("frame_rate",),
}
_TITLES = {
    "target": "target set",
    "n": "N points",
    "dim": "D dimensions",
    "seed": "seed",
    "init": "initial coords",
    "net": "coordinate source",
    "method": "method",
    "optimizer": "optimiser",
    "lr": "learning rate",
    "steps": "steps",
    "stop_on_nan": "stop on NaN",
    "device": "device",
    "dtype": "dtype",
    "threads": "torch threads",
    "frame_rate": "frame rate (/s)",
}
_TIPS = {
    "target": "Point set to recover from its distance matrix: a generator or a CSV/NPY file.",
    "n": "Number of points (a file sets it).",
    "dim": "Dimension of the points (a file sets it).",
    "seed": "Seed of the generators, the initial coordinates and the network weights.",
    "init": "Where the fitted coordinates start: seeded random normal, a generator, or a file.",
    "net": "Fit the coordinates directly, or produce them with a small network.",
    "lr": "Step size; a change takes effect at the next step.",
    "steps": "Optimiser steps of a run.",
    "stop_on_nan": "Stop before an optimiser step whose gradient has a NaN or Inf.",
    "device": "Where the run computes (devices that exist on this machine).",
    "dtype": "Floating-point precision of the run.",
    "threads": "torch CPU threads (0 = torch's default).",
    "frame_rate": "How often the views redraw while running; ~2/s runs at nearly full speed.",
}
_LIMITS: dict[str, tuple[float, float]] = {
    "n": (2, MAX_POINTS),
    "dim": (1, 64),
    "seed": (0, 2**31 - 1),
    "lr": (1e-8, 100.0),
    "steps": (0, 10**9),
    "threads": (0, 256),
    "frame_rate": (0.5, 60.0),
}


class SetupForm(QWidget):
    """Setup panel: edit a FitConfig and LiveSettings. ``changed`` names the field."""

    changed = Signal(str)

    def __init__(self, config: FitConfig = DEFAULT_EXPERIMENT, parent: QWidget | None = None):
        super().__init__(parent)
        self._fields = {f.name: f for f in fields(FitConfig)}
        self._fields.update({f.name: f for f in fields(LiveSettings)})
        self._hints = typing.get_type_hints(FitConfig) | typing.get_type_hints(LiveSettings)
        self._updating = False
        self.root = ptree.Parameter.create(
            name="setup", type="group", children=[self._group(t, n) for t, n in _GROUPS.items()]
        )
        self.tree = ptree.ParameterTree(showHeader=False)
        self.tree.setParameters(self.root, showTop=False)
        self.problem = QLabel("")
        self.problem.setWordWrap(True)
        self.problem.setStyleSheet("color: #c0392b;")
        self.problem.hide()
        self.setMinimumWidth(300)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.tree)
        layout.addWidget(self.problem)
        self.set_config(config)
        self.root.sigTreeStateChanged.connect(self._on_tree_changed)
        self.param("net_spec").sigValueChanging.connect(self._on_net_spec_typing)

    # ---- generation --------------------------------------------------------------------
    def _group(self, title: str, names: tuple[str, ...]) -> dict[str, Any]:
        children: list[dict[str, Any]] = []
        for name in names:
            children += self._params_for(name)
        return {"name": title, "type": "group", "children": children}

    def _params_for(self, name: str) -> list[dict[str, Any]]:
        base = {"name": name, "title": _TITLES.get(name, name), "tip": _TIPS.get(name, "")}
        default = self._fields[name].default
        if default is not dataclasses.MISSING and default is not None:
            base["value"] = default
        hint = self._hints[name]
        if name in ("target", "init"):
            choices = ([] if name == "target" else ["random"]) + list(POINT_GENERATORS)
            return [
                {**base, "type": "list", "limits": choices + [FILE_CHOICE]},
                {
                    "name": f"{name}_file",
                    "title": "  file (CSV/NPY)",
                    "type": "file",
                    "value": "",
                    "visible": False,
                    "nameFilter": "Point sets (*.csv *.npy)",
                    "tip": "A CSV or NPY file of shape (N, D).",
                },
            ]
        if name == "net":
            return [
                {**base, "type": "list", "limits": [FREE, NETWORK]},
                {
                    "name": "net_spec",
                    "title": "  network spec",
                    "type": "str",
                    "value": "8-64-3:tanh",
                    "visible": False,
                    "tip": "Widths joined by '-' and an activation, e.g. 8-64-3:tanh; the last "
                    "width must equal D.",
                },
            ]
        if name == "method":
            return [
                {
                    **base,
                    "type": "list",
                    "limits": list(DISTANCE_METHODS),
                    "tip": DISTANCE_METHODS[DEFAULT_EXPERIMENT.method],
                }
            ]
        if name == "optimizer":
            tip = "; ".join(OPTIMIZERS.values())
            return [{**base, "type": "list", "limits": list(OPTIMIZERS), "tip": tip}]
        if name == "dtype":
            return [{**base, "type": "list", "limits": list(DTYPES)}]
        if name == "device":
            return [{**base, "type": "list", "limits": ["auto"]}]
        kind = _KIND[_strip_optional(hint)]
        param = {**base, "type": kind}
        if name in _LIMITS:
            param["limits"] = _LIMITS[name]
        if kind == "float":
            param.update(dec=True, step=1, minStep=1e-8, decimals=4, siPrefix=False)
        return [param]

    def param(self, name: str) -> ptree.Parameter:
        for group in self.root.children():
            for child in group.children():
                if child.name() == name:
                    return child
        raise KeyError(name)

    # ---- values --------------------------------------------------------------------------
    def set_config(self, config: FitConfig, live: LiveSettings | None = None) -> None:
        """Show ``config`` (and ``live``) in the form without emitting ``changed``."""
        self._updating = True
        try:
            for name in self._hints:
                if name in ("target", "init", "net", "threads") or name not in _TITLES:
                    continue
                if name == "frame_rate":
                    if live is not None:
                        self.param(name).setValue(live.frame_rate)
                    continue
                self.param(name).setValue(getattr(config, name))
            self.param("threads").setValue(config.threads or 0)
            for name in ("target", "init"):
                value = getattr(config, name)
                is_file = value.startswith("file:")
                self.param(name).setValue(FILE_CHOICE if is_file else value)
                self.param(f"{name}_file").setValue(value[5:] if is_file else "")
            self.param("net").setValue(NETWORK if config.net else FREE)
            if config.net:
                self.param("net_spec").setValue(config.net)
            self._sync_visibility()
            # "Back to default" (the arrow beside a changed value) returns to this experiment.
            for group in self.root.children():
                for child in group.children():
                    child.setDefault(child.value())
                    child.setToDefault()  # marks the value unmodified (greys the arrow)
                    for item in child.items:
                        if hasattr(item, "updateDefaultBtn"):
                            item.updateDefaultBtn()
        finally:
            self._updating = False
        self._validate()

    def config(self) -> FitConfig:
        """The FitConfig the form shows; GradvizError names the first bad setting."""
        values: dict[str, Any] = {}
        for name in (f.name for f in fields(FitConfig)):
            if name in ("target", "init"):
                values[name] = self._point_source(name)
            elif name == "net":
                values[name] = self._net_spec_text()
            elif name == "threads":
                values[name] = int(self.param(name).value()) or None
            else:
                values[name] = _strip_optional(self._hints[name])(self.param(name).value())
        return FitConfig(**values).validated()

    def live_settings(self) -> LiveSettings:
        return LiveSettings(frame_rate=float(self.param("frame_rate").value()))

    def set_devices(self, devices: list[tuple[str, str]]) -> None:
        """Offer ``auto`` and the devices that exist, as (name, label) pairs."""
        current = self.param("device").value()
        limits = {"auto": "auto"} | {label: name for name, label in devices}
        self._updating = True
        try:
            self.param("device").setLimits(limits)
            if current in limits.values():
                self.param("device").setValue(current)
        finally:
            self._updating = False

    def _point_source(self, name: str) -> str:
        choice = self.param(name).value()
        if choice != FILE_CHOICE:
            return choice
        path = str(self.param(f"{name}_file").value() or "").strip()
        if not path:
            raise GradvizError(f"Choose a CSV or NPY file for the {_TITLES[name]}.")
        if not os.path.isfile(path):
            raise GradvizError(f"The file {path!r} for the {_TITLES[name]} does not exist.")
        return f"file:{path}"

    def _net_spec_text(self, text: str | None = None) -> str | None:
        if self.param("net").value() != NETWORK:
            return None
        text = (self.param("net_spec").value() if text is None else text).strip()
        spec = NetworkSpec.parse(text)
        dim = int(self.param("dim").value())
        if spec.out_dim != dim:
            raise GradvizError(
                f"The network's last width is {spec.out_dim}, but the points have D = {dim}; "
                f"make them equal (e.g. {spec.in_dim}-64-{dim}:tanh)."
            )
        return text

    # ---- reactions -----------------------------------------------------------------------
    def _on_tree_changed(self, _root, changes) -> None:
        if self._updating:
            return
        names = {p.name() for p, change, _ in changes if change == "value"}
        if not names:
            return
        self._sync_visibility()
        self._validate()
        for name in sorted(names):
            field = name.removesuffix("_file").removesuffix("_spec")
            self.changed.emit(field)

    def _on_net_spec_typing(self, _param, text: str) -> None:
        self._validate(net_text=text)

    def _sync_visibility(self) -> None:
        for name in ("target", "init"):
            self.param(f"{name}_file").setOpts(visible=self.param(name).value() == FILE_CHOICE)
        self.param("net_spec").setOpts(visible=self.param("net").value() == NETWORK)
        self.param("method").setOpts(tip=DISTANCE_METHODS[self.param("method").value()])

    def _validate(self, net_text: str | None = None) -> bool:
        """Show the first problem under the tree; True when the form is valid."""
        try:
            self._net_spec_text(net_text)
            self.config()
        except GradvizError as exc:
            self.problem.setText(str(exc))
            self.problem.show()
            return False
        self.problem.hide()
        self.problem.setText("")
        return True

    @property
    def problem_text(self) -> str:
        return self.problem.text()


_KIND = {int: "int", float: "float", bool: "bool", str: "str"}


def _strip_optional(hint: Any) -> type:
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    return args[0] if args else hint
