"""What gradviz says about files it cannot open: one line, in its own words, whatever torch
logs and whatever the file's name holds."""

import zipfile

import pytest
import torch

from gradviz.cli import main


def one_line(capfd, *argv):
    """Run the CLI: exit 2 and exactly one line on stderr (file descriptors, so that what
    torch's loggers write to the terminal is seen too)."""
    code = main([str(a) for a in argv])
    out, err = capfd.readouterr()
    assert code == 2 and out == "", (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1, err[:2000]
    return lines[0]


def net():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.Tanh(), torch.nn.Linear(3, 1))


def test_torchs_export_log_is_kept_out_of_the_terminal(capfd, tmp_path):
    """A state_dict whose archive looks like a .pt2 (a models/*.json entry): torch.export
    logs a 15-line traceback before raising; gradviz says the cause once."""
    path = tmp_path / "weights.pt2"
    torch.save(net().state_dict(), path)
    with zipfile.ZipFile(path, "a") as archive:
        archive.writestr("weights/models/model.json", "{}")
    message = one_line(capfd, "jacobian", "--model", path, "--trust", "--batch", "2")
    assert "could not be loaded as a .pt2 program" in message
    assert "archive_format" in message and "warnings above" not in message


def test_a_legacy_whole_module_file_is_described_not_called_damaged(capfd, tmp_path):
    path = tmp_path / "legacy.pt"
    torch.save(net(), path, _use_new_zipfile_serialization=False)
    for argv in (["inspect", path], ["jacobian", "--model", path, "--batch", "2"]):
        message = one_line(capfd, *argv)
        assert "legacy (non-zip) format" in message and "damaged" not in message
        assert "'torch.nn.modules.container.Sequential'" in message
        assert "torch.save(model.state_dict(), path)" in message


def test_a_legacy_state_dict_still_opens(tmp_path):
    from gradviz.core.modelio import load_model

    path = tmp_path / "legacy_weights.pt"
    torch.save(net().state_dict(), path, _use_new_zipfile_serialization=False)
    assert load_model(path, activation="tanh").info.runnable


@pytest.mark.parametrize("command", ["inspect", "jacobian"])
def test_file_names_are_escaped_in_messages(capfd, tmp_path, command):
    path = tmp_path / "two\nlines.pt"
    path.write_bytes(b"not a model")
    argv = [command, path] if command == "inspect" else [command, "--model", path, "--batch", "2"]
    message = one_line(capfd, *argv)
    assert "two\\nlines.pt" in message and "is not a model file gradviz knows" in message


def test_inspect_escapes_names_in_its_summary(capfd, tmp_path):
    path = tmp_path / "a\nb.pt"
    torch.save({"0.weight": torch.zeros(3, 2), "odd\nname.weight": torch.zeros(1, 3)}, path)
    assert main(["inspect", str(path)]) == 0
    out, _ = capfd.readouterr()
    assert out.splitlines()[0].endswith("a\\nb.pt: state_dict, " + f"{path.stat().st_size:,} bytes")
    assert any(line.strip().startswith("odd\\nname: linear") for line in out.splitlines())
