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
