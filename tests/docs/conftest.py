"""The docs' tests run CLI commands in-process with tests/cli/cli_runner.py."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))
