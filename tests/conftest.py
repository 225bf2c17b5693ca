"""Test-wide settings: offscreen Qt, one torch thread (stable, fast on small machines)."""

import os

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
# Tests must never read or write the user's real preferences.
os.environ.setdefault("GRADVIZ_SETTINGS_SCOPE", "test")


def _extended_config_class():
    """FitConfig with one more setting, declared as a contributor would add it."""
    import dataclasses

    from gradviz.core.settings.config import FitConfig
    from gradviz.core.settings.table import setting

    momentum = setting(
        0.9, title="momentum", tooltip="Momentum of SGD.", group="Optimiser", limits=(0.0, 1.0)
    )
    return dataclasses.make_dataclass(
        "ExtendedConfig", [("momentum", float, momentum)], bases=(FitConfig,), frozen=True
    )


@pytest.fixture(scope="session")
def extended_config():
    """A settings dataclass with a field FitConfig lacks: the form, the CLI options and file
    validation must all pick it up from its metadata alone."""
    return _extended_config_class()


@pytest.fixture
def show_widget(qtbot):
    """``show_widget(widget, width, height, after=None)``: the widget shown (offscreen) at that
    size and exposed; after the test, ``widget.shutdown()`` and then ``after(widget)`` (a
    check that it stopped)."""
    shown = []

    def show(widget, width: int, height: int, after=None):
        qtbot.addWidget(widget)
        widget.resize(width, height)
        widget.show()
        qtbot.waitExposed(widget)
        shown.append((widget, after))
        return widget

    yield show
    for widget, after in shown:
        widget.shutdown()
        if after is not None:
            after(widget)


def pytest_unconfigure(config):
    """Each test process ends without its last garbage collections over everything torch,
    Qt and the tests made (seconds per worker): as the ``gradviz`` command ends
    (``gradviz.cli.program``)."""
    import gc

    gc.freeze()
