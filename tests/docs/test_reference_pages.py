"""The reference pages are made from the code: every command and option of the CLI, every
setting and every public name of the library is on them, and nothing there names something
the code does not have."""

from __future__ import annotations

import argparse
import importlib
import re

import pytest

pytest.importorskip("mkdocs")

from hook_modules import load_hook  # noqa: E402

reference = load_hook("reference")


def test_every_command_and_option_of_the_parser_is_on_the_cli_page():
    from gradviz.cli import build_parser

    page = reference.cli_page()
    commands = reference.commands(build_parser())
    assert set(commands) >= {"gui", "fit", "jacobian", "inspect", "bench", "diagnose"}
    for name, (_, parser) in commands.items():
        assert f"\n## gradviz {name}\n" in page
        section = page.split(f"\n## gradviz {name}\n", 1)[1].split("\n## ", 1)[0]
        for action in parser._actions:
            for flag in action.option_strings:
                assert flag in section, f"{flag} of gradviz {name}"


def test_every_setting_is_on_the_settings_page_with_its_flag_default_and_choices():
    from gradviz.core.settings.config import APP_SETTINGS, FitConfig
    from gradviz.core.settings.table import settings_of

    page = reference.settings_page()
    assert len(APP_SETTINGS) >= 2
    for cls in APP_SETTINGS:
        assert f"`{cls.__name__}`" in page
        for row in settings_of(cls):
            line = next(x for x in page.splitlines() if x.startswith(f"| `{row.name}` |"))
            assert row.title in line
            if cls is FitConfig:
                assert f"`{row.flag}`" in line
            for choice in row.info.choices or ():
                assert f"`{choice}`" in line
    assert '| `method` | method | `"masked"` |' in page  # the default as an experiment file has it


def test_every_public_name_is_rendered_from_the_module_that_defines_it():
    import gradviz

    page = reference.api_page()
    directives = re.findall(r"^::: (\S+)$", page, flags=re.M)
    names = {target.rsplit(".", 1)[1] for target in directives}
    for name in gradviz.__all__:
        if name != "__version__":
            assert name in names, name
    for target in directives:  # each one resolves: a stale path would fail the build
        module, _, attr = target.rpartition(".")
        try:
            importlib.import_module(target)
        except ImportError:
            assert hasattr(importlib.import_module(module), attr), target


def test_the_help_is_wrapped_at_the_width_the_pages_use(monkeypatch):
    monkeypatch.setenv("COLUMNS", "40")
    page = reference.cli_page()
    widths = [len(line) for line in page.splitlines() if line.startswith("  --")]
    assert max(widths) > 40 and max(widths) <= reference.HELP_WIDTH
    assert isinstance(reference.commands(argparse.ArgumentParser()), dict)
