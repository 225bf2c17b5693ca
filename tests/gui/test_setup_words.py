"""What the setup panel and its questions say: the setting that was changed, in grammatical
sentences, and never that a run will use a value the panel has just rejected."""
# The shared fixtures are imported by name, which pyflakes reads as a redefinition:
# ruff: noqa: F811

from __future__ import annotations

import pytest
from fixtures_app import (  # noqa: F401 - fixtures
    RUN_TIMEOUT_MS,
    isolated_settings,
    make_lab,
    small,
)

from gradviz.gui.run.session import RunState

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:pyqtgraph")


def _running(qtbot, make_lab, **changes):
    lab = make_lab(small("safe", n=12, **changes))
    lab.start()
    qtbot.waitUntil(lambda: lab.session.state is RunState.RUNNING, timeout=RUN_TIMEOUT_MS)
    asked: list[str] = []

    def confirm(title: str, question: str) -> bool:
        asked.append(question)
        return False

    lab.confirm = confirm
    return lab, asked


def test_editing_the_network_spec_of_a_run_restarts_it_with_the_spec_and_asks_nothing(
    qtbot, make_lab
):
    lab, asked = _running(qtbot, make_lab, net="4-8-3:tanh")
    lab.form.param("net_spec").setValue("4-16-3:tanh")
    qtbot.waitUntil(
        lambda: (
            lab.session.settings_now is not None and lab.session.settings_now.net == "4-16-3:tanh"
        ),
        timeout=RUN_TIMEOUT_MS,
    )
    assert asked == []
    assert lab.window.readouts()["setup"]["next_run_note"] == ""


def test_the_note_names_the_network_spec_and_the_coordinate_source(qtbot, make_lab):
    lab = make_lab(small("safe", n=12, net="4-8-3:tanh"))
    shown = lab.form.config()
    lab.form.show_differences(["net"], shown=shown.with_changes(net="4-16-3:tanh"))
    note = lab.window.readouts()["setup"]["next_run_note"]
    assert note == "Next run: network spec differs from the run shown; Reset uses it."
    lab.form.show_differences(["net"], shown=shown.with_changes(net=None))
    note = lab.window.readouts()["setup"]["next_run_note"]
    assert note == "Next run: coordinate source differs from the run shown; Reset uses it."


def test_the_next_run_note_is_grammatical_for_one_setting_and_for_several(qtbot, make_lab):
    lab = make_lab(small("safe", n=12))
    lab.form.show_differences(["n"])
    note = lab.window.readouts()["setup"]["next_run_note"]
    assert note == "Next run: N points differs from the run shown; Reset uses it."
    lab.form.show_differences(["n", "method", "seed"])
    note = lab.window.readouts()["setup"]["next_run_note"]
    assert note == "Next run: N points, method and seed differ from the run shown; Reset uses them."


def test_a_rejected_value_is_not_said_to_be_used_by_start_or_reset(qtbot, make_lab):
    lab = make_lab(small("safe", n=12))  # ready: Start or Reset would apply the form
    lab.form.param("n").setValue(0)
    setup = lab.window.readouts()["setup"]
    assert (
        setup["problem"] == "The N points (n) must be a whole number between 2 and 100,000, got 0."
    )
    assert setup["next_run_note"] == (
        "Next run: N points differs from the run shown; Start or Reset uses it once the "
        "problem above is fixed."
    )
    lab.form.param("n").setValue(20)  # valid again: no condition left
    assert lab.window.readouts()["setup"]["next_run_note"] in (
        "",  # applied at once (the form describes the run shown again)
        "Next run: N points differs from the run shown; Start or Reset uses it.",
    )
