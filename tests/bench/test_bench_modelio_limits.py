"""Every hostile file under a memory limit: `gradviz inspect` in a subprocess capped with
resource.setrlimit (RLIMIT_AS) must exit 2 with one sentence; peak memory and time are
reported beside those of an empty run (a file of zero bytes).

    PYTHONPATH=$PWD python -m pytest -m bench tests/bench/test_bench_modelio_limits.py -s
"""

import pathlib
import subprocess
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).parents[1] / "core"))
import hostile_files as hostile  # noqa: E402

pytestmark = pytest.mark.bench

MEMORY_LIMIT = 3 << 30  # address space: torch's own mappings need ~2 GiB before any file
SECONDS_LIMIT = 10.0

RUNNER = """
import resource, sys, time
resource.setrlimit(resource.RLIMIT_AS, ({limit}, {limit}))
start = time.perf_counter()
from gradviz.cli import main
code = main(["inspect", sys.argv[1]])
# VmHWM: this process's peak resident memory (ru_maxrss would count the forking parent's).
status = open("/proc/self/status").read()
peak = int(status.split("VmHWM:")[1].split()[0]) / 1024
print(f"RESULT {{code}} {{peak:.0f}} {{time.perf_counter() - start:.2f}}", file=sys.stderr)
"""


def measure(path):
    result = subprocess.run(
        [sys.executable, "-c", RUNNER.format(limit=MEMORY_LIMIT), str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = result.stderr.strip().splitlines()
    code, peak, seconds = lines[-1].split()[1:]
    return int(code), float(peak), float(seconds), lines[:-1]


def test_every_hostile_file_is_refused_within_the_limits(tmp_path):
    marker = tmp_path / "marker"
    files = hostile.all_hostile(tmp_path, marker)
    empty = tmp_path / "empty.pt"
    empty.write_bytes(b"")
    code, base_peak, base_seconds, _ = measure(empty)
    print(f"\n{'file':32} {'exit':>4} {'peak MB':>8} {'seconds':>8}  message")
    print(f"{'(empty file)':32} {code:>4} {base_peak:>8.0f} {base_seconds:>8.2f}")
    for name, path in files.items():
        code, peak, seconds, message = measure(path)
        said = message[0].replace(str(path), "FILE").removeprefix("gradviz inspect: error: ")
        print(f"{name:32} {code:>4} {peak:>8.0f} {seconds:>8.2f}  {said[:90]}")
        assert code == 2 and len(message) == 1, (name, message)
        assert seconds < SECONDS_LIMIT, name
        # Refused by what it declares: memory near the empty run's, plus a few copies of the
        # file's own bytes (the file, its pickle entry, a decoded string), never its claims.
        assert peak < base_peak + 4 * path.stat().st_size / 2**20 + 100, name
    assert not marker.exists()
