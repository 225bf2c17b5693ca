"""Files that declare too much, nest too deep or name hostile callables are refused by what
they declare, before torch reads them: exit 2 and one short sentence, nothing run."""

import zipfile

import hostile_files as hostile
import pytest
import torch

from gradviz.cli import main
from gradviz.core.common.errors import GradvizError
from gradviz.core.modelio import inspect_model, load_model
from gradviz.core.modelio.limits import MAX_DESCRIPTION_ENTRY_BYTES, MESSAGE_CHARS


def refused_by_the_cli(capsys, path, *extra):
    """Run `gradviz inspect` and `gradviz jacobian` on ``path``: each exits 2 with one short
    sentence on stderr and nothing on stdout. Returns the inspect message."""
    messages = []
    for argv in (["inspect", str(path)], ["jacobian", "--model", str(path), "--batch", "2"]):
        code = main([*argv, *extra])
        out, err = capsys.readouterr()
        assert code == 2 and out == ""
        lines = err.strip().splitlines()
        assert len(lines) == 1 and len(lines[0]) <= MESSAGE_CHARS + 40, err[:500]
        messages.append(lines[0])
    return messages[0]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("hostile")


def test_zip_bomb_is_refused_by_its_declared_size_without_inflating(capsys, folder):
    path = hostile.zip_bomb(folder)
    assert path.stat().st_size < 8 << 20
    message = refused_by_the_cli(capsys, path)
    assert "declares 1.1 GiB or more" in message and "refused unread" in message


@pytest.mark.parametrize("side", [40_000, 100_000])
def test_stride_zero_expansion_counts_at_full_size(capsys, folder, side):
    path = hostile.stride_zero(folder, side)
    assert path.stat().st_size < 1 << 20
    message = refused_by_the_cli(capsys, path)
    assert "at full size" in message and "stride of 0" in message


def test_small_stride_zero_tensor_is_checked_for_nan_without_expansion(tmp_path):
    path = tmp_path / "expanded_nan.pt"
    weight = torch.full((1,), float("nan")).expand(300, 2)
    torch.save({"0.weight": weight, "0.bias": torch.zeros(300)}, path)
    info = inspect_model(path)
    assert info.nonfinite_weights == ("0.weight",)


@pytest.mark.parametrize(
    ("build", "said"),
    [
        (hostile.storage_too_small, "addresses element 8 of a storage of 2"),
        (hostile.deep_nesting, "nested more than 1,000 levels"),
        (hostile.huge_key, "a string of 8 MiB"),
        (hostile.many_tensors_safetensors, "header claims"),
        (hostile.many_tensors_pt, "declares 12,000 tensors"),
    ],
    ids=["storage too small", "deep nesting", "huge key", "1,000,000 tensors", "12,000 tensors"],
)
def test_files_over_a_declared_limit_are_refused_with_one_sentence(capsys, folder, build, said):
    assert said in refused_by_the_cli(capsys, build(folder))


@pytest.mark.parametrize("build", [hostile.float8_pt, hostile.float8_safetensors])
def test_float8_weights_get_one_sentence_and_no_warning(capsys, folder, build):
    message = refused_by_the_cli(capsys, build(folder))
    assert "cannot check" in message and "float8" in message.lower() or "F8_E4M3" in message


def test_quantized_weights_get_one_sentence(capsys, tmp_path):
    path = tmp_path / "quantized.pt"
    with pytest.warns(UserWarning, match="deprecated"):  # torch's own notice when making one
        q = torch.quantize_per_tensor(torch.rand(3, 2), 0.1, 0, torch.quint8)
    torch.save({"0.weight": q}, path)
    assert "quantized" in refused_by_the_cli(capsys, path)


def test_nested_tensors_get_one_sentence(capsys, tmp_path):
    path = tmp_path / "nested.pt"
    with pytest.warns(UserWarning, match="prototype stage"):  # torch's notice when making one
        nested = torch.nested.nested_tensor([torch.rand(2), torch.rand(3)])
    torch.save({"w": nested}, path)
    assert "nested" in refused_by_the_cli(capsys, path)


@pytest.mark.parametrize("protocol", [2, 4])
@pytest.mark.parametrize("kind", sorted(hostile.HOSTILE_PAYLOADS))
def test_hostile_callable_in_an_unused_key_is_refused_and_never_runs(
    capsys, tmp_path, kind, protocol, monkeypatch
):
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    marker = tmp_path / "marker"
    path = hostile.payload_in_unused_key(tmp_path, kind, marker, protocol)
    message = refused_by_the_cli(capsys, path)
    assert "is hostile" in message and "weights_only" not in message
    assert not marker.exists()


def test_long_names_in_messages_are_cut_with_an_ellipsis(tmp_path):
    path = tmp_path / "long.pt"
    torch.save({"x" * 5000: torch.zeros(3), "0.weight": torch.zeros(3, 2)}, path)
    with pytest.raises(GradvizError) as exc_info:
        load_model(path)
    assert len(str(exc_info.value)) <= MESSAGE_CHARS and "…" in str(exc_info.value)


def test_symlink_loop_is_not_called_missing(tmp_path):
    loop = tmp_path / "loop.pt"
    loop.symlink_to(loop)
    with pytest.raises(GradvizError, match="loop of symbolic links"):
        inspect_model(loop)
    dangling = tmp_path / "dangling.pt"
    dangling.symlink_to(tmp_path / "gone.pt")
    with pytest.raises(GradvizError, match="symbolic link to a file that does not exist"):
        inspect_model(dangling)


def test_torchs_weights_only_advice_is_never_passed_on(tmp_path):
    path = tmp_path / "odd_persistent_id.pkl"
    path.write_bytes(b"\x80\x02X\x01\x00\x00\x00aQ.")  # a persistent id torch refuses
    with pytest.raises(GradvizError) as exc_info:
        inspect_model(path)
    text = str(exc_info.value).replace(str(path), "FILE")
    assert "weights_only" not in text and "persistent_load id must be tuple" in text


@pytest.mark.filterwarnings(r"ignore:`torch\.jit\.(script|save)` is deprecated")
def test_untrusted_torchscript_code_entries_over_the_limit_are_not_read(tmp_path):
    path = tmp_path / "script.pt"
    torch.jit.save(torch.jit.script(torch.nn.Linear(2, 3)), path)
    prefix = zipfile.ZipFile(path).namelist()[0].split("/")[0]
    with zipfile.ZipFile(path, "a") as archive:
        small = "class Small(Module):\n    pass\n"
        archive.writestr(f"{prefix}/code/__torch__/small.py", small)
        big = "class Big(Module):\n" + "#" * (MAX_DESCRIPTION_ENTRY_BYTES + 10)
        archive.writestr(f"{prefix}/code/__torch__/big.py", big)
    info = inspect_model(path)  # untrusted: described from the code/ text
    assert "__torch__.small.Small" in info.classes
    assert not any(name.endswith(".Big") for name in info.classes)


def test_harmless_objects_beside_the_weights_are_not_called_hostile(tmp_path):
    import types

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.Linear(3, 1))
    path = tmp_path / "checkpoint.pt"
    torch.save({"state_dict": net.state_dict(), "args": types.SimpleNamespace(lr=0.1)}, path)
    assert inspect_model(path).runnable


@pytest.mark.parametrize("name", sorted(hostile.UNLISTED_PAYLOADS))
def test_calls_outside_the_allow_list_are_refused_naming_them(capsys, tmp_path, name):
    """Names no deny-list holds (pydoc.pipepager runs a shell command) are still code the
    file would run: refused by name, in one sentence, and never run."""
    marker = tmp_path / "marker"
    path = hostile.unlisted_in_unused_key(tmp_path, name, marker)
    message = refused_by_the_cli(capsys, path)
    assert repr(name) in message and "code the file would run" in message
    assert "damaged" not in message
    assert not marker.exists()


def test_a_class_fetched_from_the_memo_and_called_is_refused(capsys, tmp_path):
    marker = tmp_path / "marker"
    message = refused_by_the_cli(capsys, hostile.memo_fetched_call(tmp_path, marker))
    assert "'zipfile.ZipFile'" in message and "code the file would run" in message
    assert not marker.exists()


def test_checkpoints_of_real_modules_and_plain_data_pass_the_allow_list(tmp_path):
    import argparse

    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(8, 2, 16, batch_first=True)  # keeps F.relu
    path = tmp_path / "encoder.pt"
    torch.save(
        {"model": torch.nn.TransformerEncoder(layer, 1, enable_nested_tensor=False),
         "args": argparse.Namespace(lr=0.1), "epoch": 3},
        path,
    )  # fmt: skip
    info = inspect_model(path)
    assert info.format == "pickled_module" and info.parameters > 0


def test_a_tensor_named_by_many_keys_counts_once_per_key(capsys, tmp_path):
    """torch.save stores a tensor named by 5,000 keys once (the pickle's memo), but 5,000
    layers would be built from it: counted by reference, 20 GiB, refused unread."""
    path = hostile.memo_shared(tmp_path)
    assert path.stat().st_size < 8 << 20
    message = refused_by_the_cli(capsys, path)
    assert "at full size" in message and "once for each name that refers to it" in message


def test_the_network_to_build_is_bounded_before_it_is_built(tmp_path, monkeypatch):
    from gradviz.core.modelio import limits

    path = tmp_path / "weights.pt"
    torch.save({"0.weight": torch.zeros(8, 4), "2.weight": torch.zeros(2, 8)}, path)
    monkeypatch.setattr(limits, "MAX_NETWORK_BYTES", 100)  # 48 parameters: 192 bytes
    info = inspect_model(path, activation="tanh")
    assert not info.runnable
    assert "48 parameters (192 bytes), over gradviz's limit of 100 bytes" in (
        info.not_runnable_reason
    )
    with pytest.raises(GradvizError, match="over gradviz's limit of 100 bytes"):
        load_model(path, activation="tanh")


@pytest.mark.parametrize("build", [hostile.deep_json_header, hostile.deep_spec_metadata])
def test_deeply_nested_json_is_refused_before_parsing(capsys, tmp_path, build):
    message = refused_by_the_cli(capsys, build(tmp_path))
    assert "nested 200,001 levels deep" in message or "nested 200,000 levels deep" in message


def test_a_large_file_is_judged_from_its_parts_without_reading_it_whole(tmp_path):
    import tracemalloc

    path = hostile.large_file(tmp_path, 64 << 20)
    tracemalloc.start()
    try:
        with pytest.raises(GradvizError, match="'io.open'"):
            inspect_model(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20, f"peak {peak / 2**20:.0f} MiB for a 64 MiB file"


@pytest.mark.parametrize("command", ["inspect", "jacobian"])
def test_a_hostile_file_is_refused_before_torch_is_imported(tmp_path, command):
    import subprocess
    import sys

    path = hostile.unlisted_in_unused_key(tmp_path, "io.open", tmp_path / "marker")
    argv = [command, str(path)] if command == "inspect" else [command, "--model", str(path)]
    code = (
        "import sys; from gradviz.cli import main; "
        f"code = main({argv + ['--batch', '2'] if command == 'jacobian' else argv!r}); "
        "print(code, 'torch' in sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.split() == ["2", "False"], result.stderr
