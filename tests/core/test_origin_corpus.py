"""The origin corpus (``origin_cases``): small training scripts with a known first non-finite
value, each run through ``gradviz diagnose`` (the tracer, as it runs) and through
``watch(origin=True)`` (the module-level origin: the bad step replayed under the tracer, or
the module boundaries alone), and a property over cases composed from parts: every answer is
right, or says "not known" and why. A wrong answer is worse than "not known"."""

from __future__ import annotations

import contextlib
import io
import json
import os
import tempfile

import origin_cases as C
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gradviz.cli import main
from gradviz.core.record import origin_notes
from gradviz.core.record.reader import Reader

CASE_FILE = os.path.relpath(C.HERE) if not os.path.relpath(C.HERE).startswith("..") else C.HERE


def diagnosed(folder: str, call: str) -> dict:
    """``gradviz diagnose --json`` of a script that runs ``origin_cases.<call>`` (its first
    argument: the recording's folder): the summary it prints."""
    script = os.path.join(folder, "train.py")
    with open(script, "w", encoding="utf-8") as f:
        f.write(f"import sys\nimport origin_cases\norigin_cases.{call}\n")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["diagnose", "--json", script, os.path.join(folder, "traced")]) == 0
    return json.loads(out.getvalue().strip().splitlines()[-1])


def watched(folder: str, run) -> dict | None:
    """The recording's first non-finite step after ``run(path)`` (None: none)."""
    path = os.path.join(folder, "watched")
    run(path)
    return Reader(path).first_nonfinite()


def source_of(marker: str) -> str:
    return f"{CASE_FILE}:{C.line_of(marker)}"


def assert_traced(summary: dict, known: C.Known) -> None:
    """The tracer's answer is the known origin: phase, module, operation, line, step, and a
    cause among the known ones (or "not known", with its reason)."""
    origin = summary["origin"]
    assert origin is not None, "no origin found"
    assert origin["phase"] in known.phases and origin["module"] == known.module
    assert summary["step"] == known.step and origin["how"] == "observed"
    if known.op is not None:
        assert origin["op"] == known.op
    if known.marker is not None:
        assert origin["source"] == source_of(known.marker)
    if known.tensor is not None:
        assert origin["tensor"] == known.tensor
    if known.spread is not None:
        assert origin["spread_code"] == known.spread
    said_not_known = origin["cause_code"] == "unknown" and "not known" in origin["cause"].lower()
    assert origin["cause_code"] in known.causes or said_not_known, origin["cause"]


def assert_watched(first: dict | None, known: C.Known) -> str:
    """The watch's answer is the known origin (phase, module, step; the operation and line
    where it replayed the step under the tracer), or it says the origin is not known and
    why; returns which ("right" or "not known")."""
    assert first is not None, "no non-finite gradient recorded"
    origin = first.get("origin")
    if origin is None:
        assert first.get("origin_unknown"), "no origin, and no reason why"
        return "not known"
    assert origin["phase"] in known.phases and origin["module"] == known.module, origin
    assert origin["step"] == known.step
    if known.tensor:
        assert origin.get("tensor") == known.tensor
    assert origin["how"] in ("replayed", "module_boundaries")
    if origin["how"] == "replayed" and origin["phase"] == known.phases[0]:
        if known.op is not None:
            assert origin["op"] == known.op
        if known.marker is not None:
            assert origin["source"] == source_of(known.marker)
    else:
        assert origin["op"] is None  # the module boundaries do not see the operation
    return "right"


@pytest.fixture
def folder(tmp_path) -> str:
    return str(tmp_path)


@pytest.mark.parametrize("name", list(C.CASES))
def test_diagnose_names_each_cases_origin(name, folder):
    summary = diagnosed(folder, f"CASES[{name!r}].train(sys.argv[1])")
    assert summary["found"]
    assert_traced(summary, C.CASES[name].traced)


@pytest.mark.parametrize("name", list(C.CASES))
def test_the_watch_names_each_cases_origin(name, folder):
    # The loops log before the optimizer's step: a bad step after the first is run again,
    # under the tracer too; one at step 0 is noted, then run again the same way.
    case = C.CASES[name]
    assert assert_watched(watched(folder, case.train), case.watched) == "right"


@pytest.mark.parametrize("name", list(C.CASES))
def test_the_module_boundaries_alone_are_right_or_say_not_known(name, folder, monkeypatch):
    # Nothing is run again: the notes of every module's output and the gradient reaching
    # it decide, as far as they can.
    monkeypatch.setattr(origin_notes, "REPLAY", False)
    case = C.CASES[name]
    first = watched(folder, case.train)
    verdict = assert_watched(first, case.watched)
    if verdict == "right":
        assert first["origin"]["how"] == "module_boundaries"


def test_an_optimizers_write_is_the_optimizers_at_the_step_of_its_step_call(folder):
    first = watched(folder, C.lr_overflow)
    assert first["step"] == 4  # the first non-finite gradient: step 4's forward met +Inf
    origin = first["origin"]
    assert (origin["phase"], origin["step"], origin["tensor"]) == ("optimizer", 3, "0.weight")
    assert "step() of step 3" in origin["cause"]


def test_a_parameter_written_again_after_the_forward_is_not_blamed_on_either(folder):
    # Stepped before it is logged, step 4's own step() wrote 0.weight again after the
    # forward that met +Inf: the notes cannot tell what it held then, and say so.
    first = watched(folder, lambda path: C.lr_overflow(path, log_first=False))
    assert first["step"] == 4 and "origin" not in first
    assert first["origin_unknown"].startswith("parameter 0.weight is not finite now, but it")


def test_a_parents_own_code_is_named_with_its_line_and_not_its_next_child(folder):
    first = watched(folder, C.parent_code)
    origin = first["origin"]
    assert (origin["phase"], origin["module"], origin["how"]) == ("forward", "0", "replayed")
    assert origin["source"] == source_of("parent_code") and "0.b" not in origin["cause"]


def test_a_parents_own_code_is_named_by_the_module_boundaries_alone(folder):
    # Logged after the optimizer's step: the step cannot be run again, the notes decide.
    first = watched(folder, lambda path: C.parent_code(path, log_first=False))
    origin = first["origin"]
    assert (origin["phase"], origin["module"], origin["how"]) == (
        "forward",
        "0",
        "module_boundaries",
    )
    assert "own code of module '0'" in origin["cause"] and "module '0.b'" in origin["cause"]


def test_inspect_says_how_the_origin_was_found(folder, capsys):
    C.parent_code(os.path.join(folder, "run"))
    assert main(["inspect", os.path.join(folder, "run")]) == 0
    out = capsys.readouterr().out
    assert "  how it was found: the step was run again under the tracer" in out
    assert main(["inspect", "--json", os.path.join(folder, "run")]) == 0
    origin = json.loads(capsys.readouterr().out)["first_nonfinite"]["origin"]
    assert origin["how"] == "replayed" and origin["source"] == source_of("parent_code")


@settings(max_examples=24, deadline=None, database=None, derandomize=True)
@given(
    kind=st.sampled_from(sorted(C.FAULTS)),
    place=st.sampled_from(C.PLACES),
    depth=st.integers(0, 2),
    at=st.integers(0, 2),
    log_first=st.booleans(),
    replay=st.booleans(),
)
def test_on_any_composed_case_each_answer_is_right_or_not_known(
    kind, place, depth, at, log_first, replay
):
    # ``replay`` False: the module boundaries alone decide, even where the step could run
    # again (a loop that logs first).
    known = C.composed_known(kind, place, depth, at)
    with tempfile.TemporaryDirectory() as folder:
        call = f"composed(sys.argv[1], {kind!r}, {place!r}, {depth}, {at}, {log_first})"
        assert_traced(diagnosed(folder, call), known)
        before, origin_notes.REPLAY = origin_notes.REPLAY, replay
        try:
            first = watched(folder, lambda p: C.composed(p, kind, place, depth, at, log_first))
        finally:
            origin_notes.REPLAY = before
        assert_watched(first, known)
