"""The setup form is generated from the settings table (titles, tooltips, limits, groups)."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from gradviz.core.settings.config import FitConfig, LiveSettings
from gradviz.core.settings.table import groups_of, settings_of
from gradviz.gui.widgets.settings_form import SetupForm

ROWS = settings_of(FitConfig) + settings_of(LiveSettings)


def _group_of(form: SetupForm, name: str) -> str:
    return next(g.name() for g in form.root.children() if name in [c.name() for c in g.children()])


@pytest.mark.parametrize("row", ROWS, ids=lambda row: row.name)
def test_every_setting_has_an_editor_with_its_title_tooltip_and_group(qtbot, row):
    form = SetupForm()
    qtbot.addWidget(form)
    param = form.param(row.name)
    assert param.title() == row.title
    assert param.opts["tip"].startswith(row.info.tooltip)
    assert _group_of(form, row.name) == row.info.group
    if row.info.choices is not None:
        assert set(row.info.choices) <= set(param.opts["limits"])


@pytest.mark.parametrize(
    "row", [row for row in ROWS if row.info.limits and not row.optional], ids=lambda r: r.name
)
def test_number_editors_keep_values_within_the_limits(qtbot, row):
    form = SetupForm()
    qtbot.addWidget(form)
    low, high = row.info.limits
    form.param(row.name).setValue(high * 2 + 1)
    assert form.param(row.name).value() == high
    form.param(row.name).setValue(low - 1)
    if row.kind is int and low > 0:
        # Refused with the limits in words, not silently changed to the minimum.
        assert form.param(row.name).value() == low - 1
        assert "between" in form.problem_text
    else:
        assert form.param(row.name).value() == low


def test_groups_appear_in_the_order_of_the_table(qtbot):
    form = SetupForm()
    qtbot.addWidget(form)
    assert [g.name() for g in form.root.children()] == list(groups_of((FitConfig, LiveSettings)))


def test_a_new_setting_appears_in_the_form_and_reaches_the_config(qtbot, extended_config):
    form = SetupForm(extended_config(momentum=0.5))
    qtbot.addWidget(form)
    param = form.param("momentum")
    assert param.title() == "momentum" and param.value() == 0.5
    assert _group_of(form, "momentum") == "Optimiser"
    with qtbot.waitSignal(form.changed) as changed:
        param.setValue(0.7)
    assert changed.args == ["momentum"]
    config = form.config()
    assert isinstance(config, extended_config) and config.momentum == 0.7
    param.setValue(3.0)
    assert form.config().momentum == 1.0  # the table's limit
    assert form.needs_reset("momentum") and not form.needs_reset("lr")


def test_unset_threads_show_as_zero_and_read_back_as_unset(qtbot):
    form = SetupForm(FitConfig(threads=None))
    qtbot.addWidget(form)
    assert form.param("threads").value() == 0 and form.config().threads is None
    form.param("threads").setValue(3)
    assert form.config().threads == 3


def _item_of(form, name: str):
    """The tree row of number setting ``name`` (its ``widget`` the editor, its
    ``displayLabel`` the text shown while it is not being edited)."""
    from pyqtgraph import SpinBox

    (item,) = [i for i in form.param(name).items if isinstance(i.widget, SpinBox)]
    return item


def test_unset_threads_read_auto_in_the_editor_not_a_count_of_zero(qtbot):
    form = SetupForm(FitConfig(threads=None))
    qtbot.addWidget(form)
    form.show()
    item = _item_of(form, "threads")
    editor = item.widget
    assert item.displayLabel.text() == "auto" and editor.lineEdit().text() == "auto"
    assert form.config().threads is None
    editor.setFocus()
    qtbot.keyClick(editor, Qt.Key.Key_Up)  # one step up from unset: 1 thread
    assert editor.lineEdit().text() == "1"
    qtbot.waitUntil(lambda: form.config().threads == 1)  # the editor reports after a pause
    editor.lineEdit().selectAll()
    qtbot.keyClicks(editor.lineEdit(), "2")
    qtbot.keyClick(editor.lineEdit(), Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: form.config().threads == 2)
    qtbot.keyClick(editor, Qt.Key.Key_Down)
    qtbot.keyClick(editor, Qt.Key.Key_Down)  # back to 0: unset, in words
    assert editor.lineEdit().text() == "auto"
    qtbot.waitUntil(lambda: form.config().threads is None)
    assert item.displayLabel.text() == "auto"


def test_number_editors_are_tall_enough_for_their_digits(qtbot):
    from pyqtgraph import SpinBox

    form = SetupForm()
    qtbot.addWidget(form)
    form.show()
    qtbot.waitExposed(form)
    editors = 0
    for group in form.root.children():
        for child in group.children():
            for item in child.items:
                editor = getattr(item, "widget", None)
                if not isinstance(editor, SpinBox):
                    continue
                editors += 1
                # The editor may be as tall as a spin box needs, and so is its row.
                natural = editor.minimumSizeHint().height()
                assert editor.maximumHeight() >= natural, child.name()
                assert form.tree.visualItemRect(item).height() >= natural, child.name()
    assert editors >= 5  # N, D, seed, learning rate, steps, ...
