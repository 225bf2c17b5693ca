"""The setup form, generated from the settings table with a pyqtgraph ParameterTree.

Each field of ``FitConfig`` (and of ``LiveSettings``, the app's own display settings) becomes
one parameter: its title, tooltip, limits, choices and group come from the field's
``setting(...)`` in gradviz.core.settings.config (read through gradviz.core.settings.table), its
type picks the editor. A few settings get a companion parameter: one that accepts files offers
"file" and a file picker, and the network spec (``editor="network"``) is edited as text and
validated as the user types (``NetworkSpec.parse`` imports no torch, so this works before torch
is ready). Whether a change needs a fresh run is ``needs_reset(name)``."""

from __future__ import annotations

import contextlib
import os
from typing import Any

import pyqtgraph.parametertree as ptree
import shiboken6
from pyqtgraph import SpinBox
from PySide6.QtCore import QSize, Signal
from PySide6.QtWidgets import QLabel, QTreeWidget, QVBoxLayout, QWidget

from gradviz.core.common.errors import GradvizError
from gradviz.core.nets.networks import NetworkSpec
from gradviz.core.settings.config import FitConfig, LiveSettings
from gradviz.core.settings.drawn import is_drawn, parse_drawn
from gradviz.core.settings.table import (
    FILE_PREFIX,
    Setting,
    groups_of,
    needs_reset,
    settings_of,
)
from gradviz.gui.widgets.form_editors import FormEditors
from gradviz.gui.widgets.form_points import read_point_file
from gradviz.gui.widgets.tree_widgets import embedded

__all__ = ["DEFAULT_EXPERIMENT", "LiveSettings", "SetupForm", "needs_reset"]

#: The experiment the app opens with: FitConfig's defaults, the CLI's and experiment files'.
DEFAULT_EXPERIMENT = FitConfig()

FILE_CHOICE = "file…"
DRAWN_CHOICE = "drawn"  # points drawn by hand (a point setting with a gallery)
FREE, NETWORK = "free coordinates", "network"
_KIND = {int: "int", float: "float", bool: "bool", str: "str"}


class SetupForm(QWidget):
    """Setup panel: edit a FitConfig and LiveSettings. ``changed`` names the field.

    The form shows every setting of ``type(config)`` (FitConfig, or a dataclass extending
    it) and of LiveSettings, grouped and labelled as the settings table says.
    """

    changed = Signal(str)

    def __init__(self, config: FitConfig = DEFAULT_EXPERIMENT, parent: QWidget | None = None):
        super().__init__(parent)
        self._config_class = type(config)
        groups = groups_of((self._config_class, LiveSettings))
        self._rows = {row.name: row for rows in groups.values() for row in rows}
        self._updating = False
        # The network editors and point galleries: rows of the tree, under their settings.
        self.editors = FormEditors(self, NETWORK, FILE_CHOICE, DRAWN_CHOICE)
        widgets = self.editors.widgets()
        self.root = ptree.Parameter.create(
            name="setup",
            type="group",
            children=[
                {"name": title, "type": "group", "children": _params_for_rows(rows, widgets)}
                for title, rows in groups.items()
            ],
        )
        self.tree = ptree.ParameterTree(showHeader=False)
        self.tree.setParameters(self.root, showTop=False)
        _forget_root_item_with(self.tree)
        self._give_spin_editors_room()
        self.problem = QLabel("")
        self.problem.setWordWrap(True)
        self.problem.setStyleSheet("color: #c0392b;")
        self.problem.hide()
        # What the form holds beside the run shown, where the two differ (set by the lab,
        # which knows the source in focus): the next run's settings, said as such.
        self.next_run = QLabel("")
        self.next_run.setWordWrap(True)
        self.next_run.setStyleSheet("color: #8a6d00;")
        self.next_run.hide()
        self._differs: list[str] = []
        self.setMinimumWidth(300)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.tree)
        layout.addWidget(self.problem)
        layout.addWidget(self.next_run)
        self.set_config(config)
        self.root.sigTreeStateChanged.connect(self._on_tree_changed)
        for name in self._names_with("network"):
            self.param(f"{name}_spec").sigValueChanging.connect(self._on_net_spec_typing)

    def point_gallery(self, name: str = "target"):
        """The FormPoints of point setting ``name``: its gallery, file and save actions."""
        return self.editors.points[name]

    def network_editor(self, name: str = "net"):
        """The NetworkEditor of network setting ``name`` (its diagram in the tree)."""
        return self.editors.networks[name].editor

    def show_network_gradients(self, snapshot, run_net: str | None) -> None:
        """Draw the gradients of ``snapshot``, the picture on screen, on each network editor
        that shows its run's network (``run_net``: that run's spec, None for free
        coordinates); the others say why they show none."""
        self.editors.show_network_gradients(snapshot, run_net)

    def point_spec(self, name: str) -> str:
        """Point setting ``name`` as the run takes it (GradvizError where not valid yet)."""
        return _point_source(self, self._rows[name])

    @contextlib.contextmanager
    def quietly(self):
        """Change parameters without saying ``changed`` (the caller says what changed)."""
        updating, self._updating = self._updating, True
        try:
            yield
        finally:
            self._updating = updating

    def _give_spin_editors_room(self) -> None:
        """Rows as tall as a number editor: pyqtgraph squeezes spin boxes to the font's
        height and rows to 90% of their editor, which cuts the digits being typed."""
        for group in self.root.children():
            for child in group.children():
                for item in child.items:
                    editor = getattr(item, "widget", None)
                    if isinstance(editor, SpinBox):
                        _show_unset_in_words(item, self._rows.get(child.name()))
                        editor.setOpts(compactHeight=False)
                        natural = editor.minimumSizeHint().height()  # its sizeHint says 0
                        editor.setMaximumHeight(max(natural, editor.maximumHeight()))
                        hint = item.sizeHint(1)
                        item.setSizeHint(1, QSize(hint.width(), max(hint.height(), natural)))

    def param(self, name: str) -> ptree.Parameter:
        for group in self.root.children():
            for child in group.children():
                if child.name() == name:
                    return child
        raise KeyError(name)

    @property
    def config_class(self) -> type[FitConfig]:
        """The settings class the form edits (FitConfig, or a dataclass extending it)."""
        return self._config_class

    def needs_reset(self, name: str) -> bool:
        """Whether changing setting ``name`` (as ``changed`` names it) needs a fresh run."""
        return needs_reset(name, (self._config_class, LiveSettings))

    def title(self, name: str) -> str:
        """The form's label of setting ``name``."""
        return self._rows[name].title

    def change_title(self, name: str, before: FitConfig | None = None) -> str:
        """The words for a change of setting ``name`` from ``before`` to what the form
        shows: its label, or the label of the editor that made it where a setting has two
        (a network's spec edited, the network kept: "network spec", not its coordinate
        source)."""
        row = self._rows[name]
        kept = before is not None and getattr(before, name) is not None
        if row.info.editor == "network" and kept and self.param(name).value() == NETWORK:
            return "network spec"
        return row.title

    # ---- values --------------------------------------------------------------------------
    def set_config(self, config: FitConfig, live: LiveSettings | None = None) -> None:
        """Show ``config`` (and ``live``) in the form without emitting ``changed``."""
        self._updating = True
        try:
            for row in settings_of(self._config_class):
                self._show(row, getattr(config, row.name))
            for row in settings_of(LiveSettings) if live is not None else ():
                self._show(row, getattr(live, row.name))
            self.editors.shown()
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
        values = {row.name: self._read(row) for row in settings_of(self._config_class)}
        return self._config_class(**values).validated()

    def readouts(self) -> dict[str, Any]:
        """The settings as the form shows them (a value that does not validate included),
        the problem line, and the settings it says differ from the run shown (with the
        sentence that says so)."""
        return {
            **self.values(),
            "problem": self.problem_text,
            "differs_from_shown": list(self._differs),
            "next_run_note": self.next_run.text(),
        }

    def values(self) -> dict[str, Any]:
        """Each setting of the run as the form shows it (as typed where not valid yet)."""
        values = {}
        for row in settings_of(self._config_class):
            try:
                values[row.name] = self._read(row)
            except (GradvizError, ValueError, TypeError):
                values[row.name] = self.param(row.name).value()  # as typed, not valid yet
        return values

    def differences(self, config: FitConfig) -> list[str]:
        """The names of the settings whose shown value is not ``config``'s, in form order."""
        return [name for name, value in self.values().items() if value != getattr(config, name)]

    def show_differences(
        self, names: list[str], applied_by: str = "Reset", shown: FitConfig | None = None
    ) -> None:
        """Say under the form that the settings ``names`` differ from the run shown beside
        it (``shown``: its settings, where known), so what it holds reads as the next
        run's, and which button (``applied_by``) starts a run with them; while a value is
        not valid, that it takes a fix first (hidden when ``names`` is empty)."""
        self._differs = list(names)
        if not names:
            self.next_run.hide()
            self.next_run.setText("")
            return
        titles = [self.change_title(name, shown) for name in names]
        self.next_run.setText(_next_run_sentence(titles, applied_by, bool(self.problem_text)))
        self.next_run.show()

    def live_settings(self) -> LiveSettings:
        values = {row.name: self._read(row) for row in settings_of(LiveSettings)}
        return LiveSettings(**values)

    def set_devices(self, devices: list[tuple[str, str]]) -> None:
        """Offer ``auto`` and the devices that exist, as (name, label) pairs."""
        limits = {"auto": "auto"} | {label: name for name, label in devices}
        self._updating = True
        try:
            for name in self._names_with("device"):
                current = self.param(name).value()
                self.param(name).setLimits(limits)
                if current in limits.values():
                    self.param(name).setValue(current)
        finally:
            self._updating = False

    def _show(self, row: Setting, value: Any) -> None:
        param = self.param(row.name)
        if row.info.editor == "network":
            param.setValue(NETWORK if value else FREE)
            if value:
                self.param(f"{row.name}_spec").setValue(value)
        elif row.info.accepts_file and is_drawn(value) and row.info.editor == "points":
            self.param(f"{row.name}_drawn").setValue(value)
            param.setValue(DRAWN_CHOICE)
        elif row.info.accepts_file:
            is_file = value.startswith(FILE_PREFIX)
            param.setValue(FILE_CHOICE if is_file else value)
            self.param(f"{row.name}_file").setValue(value[len(FILE_PREFIX) :] if is_file else "")
        else:
            param.setValue(0 if value is None else value)  # an optional number's 0 is unset

    def _read(self, row: Setting) -> Any:
        if row.info.editor == "network":
            return self._net_spec_text(row.name)
        if row.info.accepts_file:
            return _point_source(self, row)
        value = row.kind(self.param(row.name).value())
        return None if row.optional and not value else value

    def _net_spec_text(self, name: str, text: str | None = None) -> str | None:
        if self.param(name).value() != NETWORK:
            return None
        text = (self.param(f"{name}_spec").value() if text is None else text).strip()
        spec = NetworkSpec.parse(text)
        dim = int(self.param("dim").value())
        if spec.out_dim != dim:
            raise GradvizError(
                f"The network's last width is {spec.out_dim}, but the points have D = {dim}; "
                f"make them equal (e.g. {spec.in_dim}-64-{dim}:tanh)."
            )
        return text

    def _names_with(self, editor: str) -> list[str]:
        return [name for name, row in self._rows.items() if row.info.editor == editor]

    # ---- reactions -----------------------------------------------------------------------
    def _on_tree_changed(self, _root, changes) -> None:
        if self._updating:
            return
        names = {p.name() for p, change, _ in changes if change == "value"}
        if not names:
            return
        names |= self.editors.follow(names)
        self._sync_visibility()
        self._validate()
        for name in sorted(names):
            field = name.removesuffix("_file").removesuffix("_spec").removesuffix("_drawn")
            self.changed.emit(field)

    def _on_net_spec_typing(self, param, text: str) -> None:
        name = param.name().removesuffix("_spec")
        self.editors.typing(name, text)
        self._validate(typed=(name, text))

    def _sync_visibility(self) -> None:
        for name, row in self._rows.items():
            if row.info.accepts_file:
                self.param(f"{name}_file").setOpts(visible=self.param(name).value() == FILE_CHOICE)
            if row.info.editor == "network":
                chosen = self.param(name).value() == NETWORK
                self.param(f"{name}_spec").setOpts(visible=chosen)
                self.param(f"{name}_diagram").setOpts(visible=chosen)
            elif row.info.choices is not None:
                self.param(name).setOpts(tip=_choice_tip(row, self.param(name).value()))

    def _validate(self, typed: tuple[str, str] | None = None) -> bool:
        """Show the first problem under the tree; True when the form is valid. ``typed`` is
        (network setting, text being typed) while its spec is edited."""
        try:
            if typed is not None:
                self._net_spec_text(*typed)
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


# ---- generation ------------------------------------------------------------------------------
def _point_source(form: SetupForm, row: Setting) -> str:
    """The point-set setting ``row`` as ``form`` shows it (a generator, ``drawn:...`` or
    ``file:PATH``), checked; GradvizError naming the setting where it cannot be used."""
    choice = form.param(row.name).value()
    if choice == DRAWN_CHOICE:
        spec = str(form.param(f"{row.name}_drawn").value())
        try:
            parse_drawn(spec)
        except GradvizError as exc:
            raise GradvizError(f"The {row.title}: {exc}") from None
        return spec
    if choice != FILE_CHOICE:
        return choice
    path = str(form.param(f"{row.name}_file").value() or "").strip()
    if not path:
        raise GradvizError(f"Choose a CSV or NPY file for the {row.title}.")
    if not os.path.isfile(path):
        raise GradvizError(f"The file {path!r} for the {row.title} does not exist.")
    try:
        read_point_file(path)  # read once per version of the file
    except GradvizError as exc:
        raise GradvizError(f"The {row.title}: {exc}") from None
    return f"{FILE_PREFIX}{path}"


def _next_run_sentence(titles: list[str], applied_by: str, waits_for_fix: bool) -> str:
    """ "Next run: A, B and C differ from the run shown; Reset uses them." (one: "differs",
    "it"; ``waits_for_fix``: a value is not valid yet)."""
    one = len(titles) == 1
    listed = titles[0] if one else ", ".join(titles[:-1]) + " and " + titles[-1]
    verb, them = ("differs", "it") if one else ("differ", "them")
    when = " once the problem above is fixed" if waits_for_fix else ""
    return f"Next run: {listed} {verb} from the run shown; {applied_by} uses {them}{when}."


def _forget_root_item_with(tree: ptree.ParameterTree) -> None:
    """Mark the tree's invisible root item deleted when the tree is.

    pyqtgraph's TreeWidget keeps a Python wrapper of that item, which Qt made and deletes
    with the tree without telling Python. The stale wrapper stays registered at the freed
    address, and a Qt object made there later came back to Python as a QTreeWidgetItem
    (and crashed the app once in a while).
    """
    root = QTreeWidget.invisibleRootItem(tree)
    tree.destroyed.connect(lambda *_: shiboken6.invalidate(root))


def _show_unset_in_words(item: Any, row: Setting | None) -> None:
    """The row of an optional number (``item``, its editor a SpinBox) shows its unset word
    for 0 ("auto"), editing or not: "torch threads 0" read as a count of zero threads, where
    the run chose 1 or 2 itself."""
    if row is None or not row.optional:
        return
    editor, number_text = item.widget, item.widget.formatText
    editor.formatText = lambda: row.info.unset_word if editor.value() == 0 else number_text()
    editor.updateText()
    item.updateDisplayLabel()  # the text shown while the row is not being edited


def _params_for_rows(rows: list[Setting], widgets: dict[str, QWidget]) -> list[dict[str, Any]]:
    return [param for row in rows for param in _params_for(row, widgets)]


def _params_for(row: Setting, widgets: dict[str, QWidget]) -> list[dict[str, Any]]:
    """The parameter(s) that edit one setting: its own and, for some editors, a companion."""
    info = row.info
    param: dict[str, Any] = {"name": row.name, "title": info.title, "tip": info.tooltip}
    if row.default is not None:
        param["value"] = row.default
    if info.editor == "network":
        spec = {
            "name": f"{row.name}_spec",
            "title": "  network spec",
            "type": "str",
            "value": "8-64-3:tanh",
            "visible": False,
            "tip": "Widths joined by '-' and an activation after every hidden layer, e.g. "
            "8-64-3:tanh, or one after each hidden width, e.g. 8-32:relu-32:tanh-3; the last "
            "width must equal D. The diagram under it edits the same network by clicks.",
        }
        diagram = embedded(f"{row.name}_diagram", widgets[f"{row.name}_diagram"], False)
        return [{**param, "type": "list", "limits": [FREE, NETWORK]}, spec, diagram]
    if info.editor == "device":
        return [{**param, "type": "list", "limits": ["auto"]}]
    if info.choices is not None:
        limits = list(info.choices) + ([FILE_CHOICE] if info.accepts_file else [])
        limits += [DRAWN_CHOICE] if info.editor == "points" else []
        param.update(type="list", limits=limits, tip=_choice_tip(row, row.default))
        params = [param, _file_param(row)] if info.accepts_file else [param]
        if info.editor == "points":
            # The drawn points as the run takes them (drawn:x,y ...), edited on the canvas.
            params.append({"name": f"{row.name}_drawn", "type": "str", "value": "",
                           "visible": False})  # fmt: skip
            params.append(embedded(f"{row.name}_gallery", widgets[f"{row.name}_gallery"]))
        return params
    param["type"] = _KIND[row.kind]
    if info.limits is not None:
        low, high = info.limits
        if row.optional:  # an optional number's 0 is unset (shown in words)
            low, param["value"] = 0, 0
            param["tip"] += f" 0: {row.info.unset}." if row.info.unset else " 0 leaves it unset."
        elif row.kind is int and low > 0:
            # The editor lets 0 through to the check, which says what is allowed under the
            # form (a spin box would silently turn a typed 0 into its minimum).
            low = 0
        param["limits"] = (low, high)
    if row.kind is float:
        step = info.limits[0] if info.limits else 1e-8
        param.update(dec=True, step=1, minStep=step, decimals=4, siPrefix=False)
    return [param]


def _file_param(row: Setting) -> dict[str, Any]:
    return {
        "name": f"{row.name}_file",
        "title": "  file (CSV/NPY)",
        "type": "file",
        "value": "",
        "visible": False,
        "nameFilter": "Point sets (*.csv *.npy)",
        "tip": "A CSV or NPY file of shape (N, D).",
    }


def _choice_tip(row: Setting, value: Any) -> str:
    """The setting's tooltip and the chosen value's one-line explanation."""
    explanation = (row.info.choices or {}).get(value, "")
    return f"{row.info.tooltip}\n{value}: {explanation}" if explanation else row.info.tooltip
