import sys

import pytest

from gradviz.core.common.errors import GradvizError
from gradviz.core.settings.config import FitConfig


def test_defaults_are_the_apps_teaching_experiment():
    c = FitConfig()
    assert (c.target, c.n, c.dim, c.init, c.method, c.optimizer, c.lr, c.steps) == (
        "helix",
        200,
        3,
        "random",
        "masked",
        "adam",
        0.01,
        2000,
    )


@pytest.mark.parametrize(
    "change, words",
    [
        ({"method": "magic"}, "Unknown method"),
        ({"n": 0}, "between 2 and"),
        ({"n": 1}, "between 2 and"),
        ({"lr": -1.0}, "learning rate"),
        ({"target": "blob"}, "Unknown target"),
        ({"dtype": "float16"}, "Unknown dtype"),
    ],
)
def test_bad_settings_are_named_in_the_message(change, words):
    with pytest.raises(GradvizError, match=words):
        FitConfig(**change).validated()


def test_files_are_accepted_as_target_and_init():
    FitConfig(target="file:points.csv", init="file:init.npy").validated()


def test_experiment_dict_round_trips_and_rejects_unknown_keys():
    c = FitConfig(method="naive", n=50)
    assert FitConfig.from_dict(c.to_dict()) == c
    with pytest.raises(GradvizError, match="Unknown setting"):
        FitConfig.from_dict({"methd": "naive"})


def test_config_module_imports_neither_torch_nor_qt():
    import subprocess

    code = (
        "import sys, gradviz.core.settings.config, gradviz.core.nets.networks;"
        "import gradviz.core.common.health;"
        "bad = [m for m in ('torch', 'PySide6') if m in sys.modules];"
        "print(','.join(bad)); sys.exit(1 if bad else 0)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    "data, words",
    [
        ({"n": "abc"}, "'n' must be a whole number"),
        ({"lr": None}, "'lr' must be a number"),
        ({"stop_on_nan": "yes"}, "'stop_on_nan' must be true or false"),
        ({"steps": True}, "'steps' must be a whole number"),
        ({"method": 3}, "'method' must be a text"),
    ],
)
def test_experiment_values_of_the_wrong_type_are_named(data, words):
    with pytest.raises(GradvizError, match=words):
        FitConfig.from_dict(data)


def test_experiment_values_of_the_right_type_load():
    config = FitConfig.from_dict({"lr": 1, "threads": None, "net": "8-64-3:tanh", "n": 50})
    assert config.lr == 1.0 and isinstance(config.lr, float)
    assert config.threads is None and config.net == "8-64-3:tanh" and config.n == 50
