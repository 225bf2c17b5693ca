"""The bundled examples (File > Examples): every file of resources/experiments, read as the
experiment files they are, each with its one line; installed with the package."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from gradviz.core.common.errors import GradvizError
from gradviz.core.settings.examples import bundled_examples, examples_folder, summary
from gradviz.core.settings.experiment import load_experiment

REPO = Path(__file__).resolve().parents[2]
FOLDER = REPO / "resources" / "experiments"


def test_every_bundled_experiment_is_listed_with_its_settings_and_its_line():
    assert Path(str(examples_folder())) == FOLDER  # a checkout reads its own folder
    examples = bundled_examples()
    files = sorted(FOLDER.glob("*.json"))
    assert [e.name for e in examples] == [f.stem for f in files]
    for example, path in zip(examples, files, strict=True):
        config, live = load_experiment(path)  # as File > Open reads it
        assert (example.config, example.live) == (config, live)
        assert example.description == json.loads(path.read_text())["description"]
        assert example.description and "\n" not in example.description


def test_an_example_without_a_description_is_summed_up_from_its_settings(tmp_path):
    (tmp_path / "plain.json").write_text(json.dumps({"fit": {"target": "moons", "dim": 2}}))
    (example,) = bundled_examples(tmp_path)
    assert example.description == summary(example.config)
    assert example.description.startswith("200 points of moons in 2-D, masked method")


def test_a_description_that_is_not_a_text_is_named(tmp_path):
    (tmp_path / "bad.json").write_text(json.dumps({"description": 3, "fit": {}}))
    with pytest.raises(GradvizError, match='"description" must be a text'):
        bundled_examples(tmp_path)


@pytest.mark.slow
def test_a_wheel_installs_the_examples_as_package_data(tmp_path):
    """``pip wheel .`` puts the examples in as gradviz.examples, and importlib.resources
    finds them where the wheel is unpacked (no source checkout beside it)."""
    source = tmp_path / "source"  # a copy: the build leaves build/ and egg-info behind
    skip = shutil.ignore_patterns("__pycache__", "*.egg-info", "build")
    source.mkdir()
    for part in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy(REPO / part, source / part)
    shutil.copytree(REPO / "gradviz", source / "gradviz", ignore=skip)
    shutil.copytree(FOLDER, source / "resources" / "experiments", ignore=skip)
    build = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"]
    done = subprocess.run([*build, "-w", str(tmp_path), str(source)], capture_output=True,
                          text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr
    (wheel,) = tmp_path.glob("gradviz-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        archive.extractall(tmp_path / "site")
    assert {f"gradviz/examples/{f.name}" for f in FOLDER.glob("*.json")} <= names
    script = (
        "import importlib.resources as r, gradviz.core.settings.examples as e;"
        "print(sorted(f.name for f in r.files('gradviz.examples').iterdir()"
        " if f.name.endswith('.json')));"
        "print([x.name for x in e.bundled_examples()]); print(e.examples_folder())"
    )
    env = {"PYTHONPATH": str(tmp_path / "site"), "PATH": "/usr/bin:/bin"}
    shown = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                           env=env, cwd=tmp_path, timeout=300)  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    listed, names_read, folder = shown.stdout.splitlines()
    assert listed == str(sorted(f.name for f in FOLDER.glob("*.json")))
    assert names_read == str(sorted(f.stem for f in FOLDER.glob("*.json")))
    assert folder.startswith(str(tmp_path / "site"))
