"""PySide6's import hook gets the same answer to "does this module mention PySide6?" from
the file's bytes as from inspect.getsource, for every module the app has imported."""

from __future__ import annotations

import inspect
import os
import sys

import gradviz.gui  # noqa: F401 - installs the cheaper check
import gradviz.gui.shell.app  # noqa: F401 - pyqtgraph and the app's modules, as at start-up


def getsource_answer(module) -> bool:
    """PySide6's own check (shibokensupport.feature._mod_uses_pyside)."""
    try:
        return "PySide6" in inspect.getsource(module)
    except (TypeError, OSError, SyntaxError):
        return False
    except RuntimeError:  # torch.classes answers every attribute, __wrapped__ too, by raising
        return False


def test_the_check_reads_bytes_and_agrees_with_getsource_on_every_imported_module(monkeypatch):
    feature = sys.modules["shibokensupport.feature"]
    check = feature._mod_uses_pyside
    modules = [m for m in list(sys.modules.values()) if m is not None]
    expected = {m.__name__: getsource_answer(m) for m in modules}
    assert any(expected.values()) and not all(expected.values())

    def no_getsource(_obj):
        raise AssertionError("the hook read a .py module through inspect")

    monkeypatch.setattr(inspect, "getsource", no_getsource)
    with_file = [m for m in modules if str(getattr(m, "__file__", "")).endswith(".py")]
    with_file = [m for m in with_file if os.path.isfile(m.__file__)]  # not zipped or embedded
    assert len(with_file) > 100
    assert {m.__name__: check(m) for m in with_file} == {
        m.__name__: expected[m.__name__] for m in with_file
    }
