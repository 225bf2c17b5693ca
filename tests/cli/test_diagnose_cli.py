"""``gradviz diagnose SCRIPT``: runs a training script with the tracer armed per logged
step, names where its first NaN started (exit 0 either way), exit 2 for a bad script."""

import json
import textwrap
from pathlib import Path

import pytest
from cli_runner import run_cli as run_gradviz

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _in_the_repository(monkeypatch):
    """The example is named relative to the repository, as a user in a checkout runs it."""
    monkeypatch.chdir(ROOT)


EXAMPLE = "resources/examples/classic_nan_distances.py"


def script(tmp_path, body: str) -> str:
    path = tmp_path / "train.py"
    path.write_text(textwrap.dedent(body))
    return str(path)


def test_the_classic_naive_distances_start_in_sqrt_backward_at_step_0(tmp_path):
    result = run_gradviz("diagnose", "--json", EXAMPLE, str(tmp_path / "run"))
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["found"] and summary["step"] == 0
    origin = summary["origin"]
    assert (origin["phase"], origin["op"], origin["node"]) == (
        "backward",
        "aten.div.Tensor",
        "SqrtBackward0",
    )
    with open(ROOT / EXAMPLE, encoding="utf-8") as f:
        sqrt_line = next(n for n, text in enumerate(f, 1) if "torch.sqrt(sq)" in text)
    assert origin["source"] == f"{EXAMPLE}:{sqrt_line}"
    assert origin["cause_code"] == "sqrt_at_zero" and origin["indices"][0] == [0, 0]
    assert "SqrtBackward0" in result.stdout and "sqrt at 0" in result.stdout


TRAIN = """
    import sys
    import torch
    import gradviz

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(2, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    bad_step = int(sys.argv[2])
    with gradviz.watch(model, sys.argv[1], every=5) as rec:
        for step in range(8):
            x = torch.randn(16, 2)
            if step == bad_step:
                x[3, 0] = 0.0
            opt.zero_grad()
            out = model(x / x[:, :1].abs().clamp(max=1.0).detach())  # scale
            loss = out.square().mean()
            loss.backward()
            rec.log(loss=loss)
            opt.step()
    print("finished")
"""


def test_the_first_bad_logged_step_is_named_with_its_module_and_line(tmp_path):
    path = script(tmp_path, TRAIN)
    result = run_gradviz("diagnose", "--json", path, str(tmp_path / "run"), "5")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["step"] == 5 and summary["steps_traced"] == 6
    origin = summary["origin"]
    assert (origin["phase"], origin["op"], origin["module"]) == ("forward", "aten.div.Tensor", "")
    assert origin["source"].endswith("train.py:16") and origin["cause_code"] == "division_by_zero"
    assert origin["indices"] == [[3, 0], [3, 1]]  # row 3 divided by 0
    assert "finished" not in result.stdout  # the script stops at the first non-finite step


def test_a_script_that_stays_finite_is_a_result_too(tmp_path):
    path = script(tmp_path, TRAIN)
    result = run_gradviz("diagnose", "--json", path, str(tmp_path / "run"), "-1")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["found"] is False and summary["origin"] is None
    assert summary["steps_traced"] == 8 and "finished" in result.stdout


def test_a_script_without_a_recorder_is_traced_as_a_whole(tmp_path):
    path = script(tmp_path, "import torch\ny = torch.log(torch.zeros(2))\n")
    result = run_gradviz("diagnose", "--json", path)
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["origin"]["cause_code"] == "log_of_zero"
    assert summary["origin"]["source"].endswith("train.py:2") and summary["step"] is None


def test_missing_broken_and_failing_scripts_are_one_sentence_and_exit_2(tmp_path):
    missing = run_gradviz("diagnose", str(tmp_path / "nothere.py"))
    assert missing.returncode == 2 and "There is no script" in missing.stderr
    broken = run_gradviz("diagnose", script(tmp_path, "def f(:\n"))
    assert (
        broken.returncode == 2 and "line 1" in broken.stderr and "does not compile" in broken.stderr
    )
    failing = run_gradviz("diagnose", script(tmp_path, "import torch\n\nraise KeyError('lr')\n"))
    assert failing.returncode == 2
    assert "stopped with KeyError at line 3" in failing.stderr
    assert len(failing.stderr.strip().splitlines()) == 1


OWN_OPTIONS = """
    import argparse, json, sys
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--lr", type=float, default=1.0)
    parser.add_argument("rest", nargs="*")
    seen = parser.parse_args()
    print("script argv " + json.dumps(sys.argv[1:]))
    print("script options " + json.dumps(vars(seen)))
"""


def _script_line(stdout: str, prefix: str):
    line = next(line for line in stdout.splitlines() if line.startswith(prefix))
    return json.loads(line[len(prefix) :])


def test_options_after_the_script_are_the_scripts_own_also_its_json(tmp_path):
    path = script(tmp_path, OWN_OPTIONS)
    both = run_gradviz("diagnose", "--json", path, "--json", "--lr", "0.1")
    assert both.returncode == 0, both.stderr
    assert _script_line(both.stdout, "script argv ") == ["--json", "--lr", "0.1"]
    assert _script_line(both.stdout, "script options ")["json"] is True
    assert json.loads(both.stdout.strip().splitlines()[-1])["found"] is False  # gradviz's own
    # The script's --json only: gradviz prints no JSON of its own.
    only = run_gradviz("diagnose", path, "--json")
    assert _script_line(only.stdout, "script options ") == {"json": True, "lr": 1.0, "rest": []}
    assert not only.stdout.strip().splitlines()[-1].startswith("{")
    # A "--" after the script is the script's too (as under `python train.py -- --json`).
    dashes = run_gradviz("diagnose", path, "--", "--json")
    assert _script_line(dashes.stdout, "script argv ") == ["--", "--json"]
    assert _script_line(dashes.stdout, "script options ")["rest"] == ["--json"]
    # -h after the script is the script's help, not gradviz's.
    helped = run_gradviz("diagnose", path, "-h")
    assert "usage: train.py" in helped.stdout and "gradviz diagnose" not in helped.stdout


def test_the_help_says_whose_options_are_whose_with_an_example():
    shown = run_gradviz("diagnose", "--help")
    assert shown.returncode == 0
    text = " ".join(shown.stdout.split())
    assert (
        "Options before SCRIPT.py are gradviz's; everything after it belongs to the script" in text
    )
    assert "gradviz diagnose --json train.py --json --lr 0.1" in text


OVERFLOWING_STEP = """
    import sys
    import torch
    import gradviz

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(3, 1, bias=False), torch.nn.Linear(1, 1, bias=False)
    )
    # Adam with beta1 = 0 moves each weight of the first layer by lr a step: its fourth
    # step (step 3) passes float32's largest value while every forward stays finite.
    groups = [{"params": model[0].parameters(), "lr": 1e38}, {"params": model[1].parameters()}]
    opt = torch.optim.Adam(groups, lr=1e-3, betas=(0.0, 0.999))
    log_first = sys.argv[2] == "log-then-step"
    with gradviz.watch(model, sys.argv[1], every=1) as rec:
        for step in range(6):
            opt.zero_grad()
            loss = model(torch.full((2, 3), 1e-3)).mean()
            loss.backward()
            if log_first:
                rec.log(loss=loss)
            opt.step()  # the step
            if not log_first:
                rec.log(loss=loss)
"""


@pytest.mark.parametrize("order", ["log-then-step", "step-then-log"])
def test_an_optimizers_overflow_is_numbered_the_step_of_its_step_call(tmp_path, order):
    path = script(tmp_path, OVERFLOWING_STEP)
    result = run_gradviz("diagnose", "--json", path, str(tmp_path / "run"), order)
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    origin = summary["origin"]
    assert (origin["phase"], origin["op"], origin["tensor"]) == (
        "optimizer",
        "aten.addcdiv_.default",
        "0.weight",
    )
    assert origin["source"].endswith("train.py:22") and origin["cause_code"] == "optimizer_overflow"
    assert summary["step"] == 3
