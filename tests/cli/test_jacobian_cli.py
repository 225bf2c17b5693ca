"""`gradviz jacobian`: JSON summary, J written to .npy, --full, model files, bad input."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from gradviz.cli import main
from gradviz.commands import jacobian as command
from gradviz.core.explorer.batches import MAX_BATCH, InputSettings, random_batch
from gradviz.core.explorer.jobs import ExplorerJob, run_job
from gradviz.core.nets import jacobians as jm
from gradviz.core.nets.networks import NetworkSpec, save_network


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["jacobian", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _summary(out: str) -> dict:
    return json.loads(out.strip().splitlines()[-1])


def test_json_summary_is_the_last_line_with_the_method_that_ran(capsys):
    code, out, _ = _run(capsys, "--net", "2-20-20-4", "--batch", "32", "--json")
    assert code == 0
    summary = _summary(out)
    assert summary["batch"] == 32 and summary["in_dim"] == 2 and summary["out_dim"] == 4
    assert summary["method"] == "batchsum" and summary["reason"]
    assert summary["constant_across_batch"] is True
    assert 0 < summary["seconds"] < 60
    assert "max_off_block" not in summary


def test_sigmoid_net_is_not_constant_and_explicit_methods_are_reported(capsys):
    code, out, _ = _run(
        capsys, "--net", "2-20-20-4:sigmoid", "--batch", "8", "--method", "loop", "--json"
    )
    assert code == 0
    summary = _summary(out)
    assert summary["method"] == "loop" and summary["constant_across_batch"] is False


def test_activation_flag_applies_to_a_spec_without_one(capsys):
    _, out, _ = _run(
        capsys, "--net", "2-20-20-4", "--activation", "sigmoid", "--batch", "8", "--json"
    )
    assert _summary(out)["constant_across_batch"] is False


def test_out_writes_float32_jacobians_matching_the_loop_reference(capsys, tmp_path):
    target = tmp_path / "J.npy"
    code, _, _ = _run(
        capsys, "--net", "2-20-20-4:tanh", "--batch", "5", "--seed", "3", "--out", str(target)
    )
    assert code == 0
    saved = np.load(target, allow_pickle=False)
    assert saved.shape == (5, 4, 2) and saved.dtype == np.float32

    model = NetworkSpec.parse("2-20-20-4:tanh").build(seed=3)
    x = torch.as_tensor(random_batch(5, 2, seed=3), dtype=torch.float32)
    reference = jm.compute_jacobians(model, x, "loop").jacobians.numpy()
    np.testing.assert_allclose(saved, reference, rtol=1e-6, atol=1e-7)


def test_full_reports_exact_zero_off_block_for_a_per_sample_net(capsys):
    code, out, _ = _run(capsys, "--net", "2-20-20-4:sigmoid", "--batch", "16", "--full", "--json")
    assert code == 0
    assert _summary(out)["max_off_block"] == 0.0


def test_full_with_more_than_256_samples_is_refused(capsys):
    code, out, err = _run(capsys, "--net", "2-20-20-4", "--batch", "257", "--full", "--json")
    assert code == 2 and out == ""
    assert "B <= 256" in err and len(err.strip().splitlines()) == 1


def test_inputs_from_csv_and_npy_files(capsys, tmp_path):
    rows = np.array([[0.5, -1.0], [2.0, 0.25], [0.0, 0.0]])
    np.savetxt(tmp_path / "x.csv", rows, delimiter=",")
    np.save(tmp_path / "x.npy", rows.astype(np.float32))
    for name in ("x.csv", "x.npy"):
        code, out, _ = _run(
            capsys,
            "--net",
            "2-8-3:tanh",
            "--inputs",
            f"file:{tmp_path / name}",
            "--dtype",
            "float64",
            "--json",
        )
        assert code == 0
        assert _summary(out)["batch"] == 3 and _summary(out)["out_dim"] == 3


def test_a_single_input_row_is_a_batch_of_one(capsys, tmp_path):
    (tmp_path / "one.csv").write_text("0.5,-1.0\n")
    code, out, _ = _run(
        capsys, "--net", "2-8-3:tanh", "--inputs", f"file:{tmp_path / 'one.csv'}", "--json"
    )
    assert code == 0 and _summary(out)["batch"] == 1


def test_model_file_is_read_with_its_own_weights(capsys, tmp_path):
    spec = NetworkSpec.parse("3-12-2:softplus")
    model = spec.build(seed=9, dtype=torch.float64)
    path = tmp_path / "net.safetensors"
    save_network(path, spec, model)
    target = tmp_path / "J.npy"
    code, out, _ = _run(
        capsys,
        "--model",
        str(path),
        "--batch",
        "4",
        "--dtype",
        "float64",
        "--out",
        str(target),
        "--json",
    )
    assert code == 0 and _summary(out)["in_dim"] == 3
    x = torch.as_tensor(random_batch(4, 3, seed=0))
    expected = jm.compute_jacobians(model, x, "loop").jacobians.numpy().astype(np.float32)
    np.testing.assert_array_equal(np.load(target), expected)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--net", "2-20-4", "--batch", "0"], "batch size must be between 1 and 100,000, not 0"),
        (["--net", "2-20-4:swish", "--batch", "3"], "Unknown activation 'swish'"),
        (["--net", "2-x-4", "--batch", "3"], "'x'"),
        (["--net", "2-20-4", "--inputs", "x.csv"], "file:PATH"),
    ],
)
def test_bad_arguments_exit_2_with_one_sentence(capsys, argv, message):
    code, out, err = _run(capsys, *argv)
    assert code == 2 and out == ""
    assert message in err and len(err.strip().splitlines()) == 1


def test_bad_input_files_exit_2_with_one_sentence(capsys, tmp_path):
    (tmp_path / "wide.csv").write_text("1,2,3\n4,5,6\n")
    (tmp_path / "words.csv").write_text("1,2\nthree,4\n")
    (tmp_path / "empty.csv").write_text("")
    np.save(tmp_path / "objects.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    cases = {
        "wide.csv": "3 columns but the model takes 2 inputs",
        "words.csv": "line 2, field 1 is 'three', not a number",
        "empty.csv": "holds no points",
        "objects.npy": "holds Python objects",
        "absent.csv": "does not exist",
    }
    for name, message in cases.items():
        code, out, err = _run(capsys, "--net", "2-20-4", "--inputs", f"file:{tmp_path / name}")
        assert code == 2 and out == "", name
        assert message in err and len(err.strip().splitlines()) == 1, err


def test_unknown_activation_flag_is_a_usage_error():
    with pytest.raises(SystemExit) as info:
        main(["jacobian", "--net", "2-4", "--batch", "2", "--activation", "swish"])
    assert info.value.code == 2


def test_command_full_limit_agrees_with_the_core():
    assert command.MAX_FULL_BATCH == jm.MAX_FULL_BATCH


def test_the_cli_and_the_explorer_use_the_same_batch_for_the_same_seed(capsys, tmp_path):
    spec = "2-20-20-4:tanh"
    for seed in (0, 7):
        target = tmp_path / f"J{seed}.npy"
        argv = ["--net", spec, "--batch", "6", "--seed", str(seed), "--out", str(target)]
        assert _run(capsys, *argv)[0] == 0
        job = ExplorerJob(
            label="net", in_dim=2, out_dim=4, spec_text=spec, net_seed=seed,
            inputs=InputSettings(kind="random", batch=6, seed=seed, side=2),
        )  # fmt: skip
        explored = run_job(job)
        np.testing.assert_array_equal(explored.inputs, random_batch(6, 2, seed).astype(np.float32))
        np.testing.assert_array_equal(np.load(target), explored.jacobians)
    # tanh Jacobians depend on the inputs, so equal J above means equal batches.
    assert not np.array_equal(np.load(tmp_path / "J0.npy"), np.load(tmp_path / "J7.npy"))


def test_a_batch_beyond_the_explorer_limit_is_refused_by_the_cli_too(capsys):
    code, out, err = _run(capsys, "--net", "2-4", "--batch", str(MAX_BATCH + 1))
    assert code == 2 and out == "" and f"between 1 and {MAX_BATCH:,}" in err
