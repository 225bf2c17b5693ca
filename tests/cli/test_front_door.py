import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_gradviz(*args):
    return subprocess.run(
        [sys.executable, "-m", "gradviz", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )


def test_help_lists_every_subcommand():
    result = run_gradviz("--help")
    assert result.returncode == 0
    for name in ("gui", "fit", "jacobian", "inspect", "bench", "diagnose"):
        assert name in result.stdout


def test_unknown_option_exits_2_without_traceback():
    result = run_gradviz("fit", "--method", "magic")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "magic" in result.stderr


def test_options_without_a_command_are_the_guis(capsys):
    """``gradviz --window-size ...`` is ``gradviz gui --window-size ...`` (argparse took the
    size for an unknown command)."""
    from cli_runner import run_cli

    result = run_cli("--window-size", "big")
    assert result.returncode == 2
    assert "--window-size must look like 1024x700" in result.stderr
    assert "invalid choice" not in result.stderr


def test_a_file_without_a_command_is_opened_by_the_gui(tmp_path):
    """``gradviz RUN`` is ``gradviz gui RUN``; a word that is neither stays a usage error."""
    from cli_runner import run_cli

    missing = run_cli(str(tmp_path / "nothere"))
    assert missing.returncode == 2 and "invalid choice" in missing.stderr
    run = tmp_path / "run"
    run.mkdir()
    opened = run_cli(str(run))  # the gui judges it, before any window opens
    assert opened.returncode == 2 and opened.stderr.startswith("gradviz gui: error: ")
    assert "is not a gradviz recording" in opened.stderr


def test_the_command_ends_without_the_last_collections_but_not_around_a_users_script(
    tmp_path, monkeypatch
):
    """Every entry point runs ``program``: after the command, what is alive is frozen, so
    the interpreter's collections at exit (over a second with torch loaded) skip it; a
    script run by ``diagnose`` keeps the exit a plain ``python script.py`` has."""
    from importlib.metadata import entry_points

    from gradviz import cli

    scripts = {e.name: e.value for e in entry_points(group="console_scripts")}
    assert scripts["gradviz"] == "gradviz.cli:program"
    for launcher in (ROOT / "main.py", ROOT / "gradviz" / "__main__.py"):
        assert "SystemExit(program())" in launcher.read_text()

    frozen = []
    monkeypatch.setattr(cli.gc, "freeze", lambda: frozen.append(True))
    assert cli.program(["inspect", str(tmp_path / "nothing")]) == 2
    assert frozen == [True]
    script = tmp_path / "train.py"
    script.write_text("print('trained')\n")
    cli.program(["diagnose", str(script)])
    assert frozen == [True]
