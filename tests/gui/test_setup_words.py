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

from gradviz.gui.pages.lab.session import RunState

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:pyqtgraph")


def _running(qtbot, make_lab, **changes):
    lab = make_lab(small("safe", n=12, **changes))
    lab.start()
    qtbot.waitUntil(lambda: lab.session.state is RunState.RUNNING, timeout=RUN_TIMEOUT_MS)
    asked: list[str] = []

    def confirm(title: str, question: str) -> bool:
        asked.append(question)
        return False  # keep the run: the panel then says what differs

    lab.confirm = confirm
    return lab, asked


def test_editing_the_network_spec_of_a_run_asks_about_the_network_spec(qtbot, make_lab):
    lab, asked = _running(qtbot, make_lab, net="4-8-3:tanh")
    lab.form.param("net_spec").setValue("4-16-3:tanh")
    assert asked == [
        "Changing the network spec needs a fresh run. Reset now? (No keeps the current run; "
        "the change applies at the next Reset.)"
    ]
    note = lab.window.readouts()["setup"]["next_run_note"]
    assert note == "Next run: network spec differs from the run shown; Reset uses it."


def test_switching_free_coordinates_to_a_network_asks_about_the_coordinate_source(qtbot, make_lab):
    lab, asked = _running(qtbot, make_lab)
    lab.form.param("net_spec").setValue("4-8-3:tanh")  # hidden while free: no change yet
    lab.form.param("net").setValue("network")
    assert asked[-1].startswith("Changing the coordinate source needs a fresh run.")


def test_the_next_run_note_is_grammatical_for_one_setting_and_for_several(qtbot, make_lab):
    lab, _ = _running(qtbot, make_lab)
    lab.form.param("n").setValue(16)
    note = lab.window.readouts()["setup"]["next_run_note"]
    assert note == "Next run: N points differs from the run shown; Reset uses it."
    lab.form.param("method").setValue("naive")
    lab.form.param("seed").setValue(5)
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
