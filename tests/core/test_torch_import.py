"""Importing torch with its libraries loaded outside the GIL (``core.torch_import``).

Each case runs in a fresh interpreter: torch can be imported only once per process."""

import json
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="no dlopen on Windows")


def _run(code: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True, text=True, timeout=300, check=True,
    )  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_torchs_libraries_are_loaded_by_a_gil_free_dlopen_before_torch_loads_them():
    found = _run(
        """
        import ctypes, json, os, sys
        import gradviz.core.common.torch_import as ti

        calls = []
        real = ti._dlopen_function()

        def recording(path, mode):
            calls.append(os.path.basename(os.fsdecode(path)))
            return real(path, mode)

        # The ctypes function object itself releases the GIL; this records what it opens.
        ti._dlopen_function = lambda: recording
        torch = ti.import_torch()
        print(json.dumps({
            "calls": calls,
            "works": float(torch.ones(3).sum()),
            "cdll_restored": ctypes.CDLL.__name__ == "CDLL" and ctypes.CDLL.__module__ == "ctypes",
            "finder_left": [f for f in map(str, sys.meta_path) if "Libtorch" in f],
        }))
        """
    )
    calls = found["calls"]
    assert "libtorch.so" in calls, calls  # the big one, before torch._C is imported
    # torch opens its global dependencies first (RTLD_GLOBAL); the preloads keep its order.
    assert calls.index("libtorch_global_deps.so") < calls.index("libtorch.so"), calls
    assert found["works"] == 3.0
    assert found["cdll_restored"] and found["finder_left"] == []


@pytest.mark.slow  # a second torch import in a fresh interpreter, for a fallback branch
def test_without_a_dlopen_torch_is_imported_as_usual():
    found = _run(
        """
        import json, sys
        import gradviz.core.common.torch_import as ti

        ti._dlopen_function = lambda: None
        torch = ti.import_torch()
        finders = [type(f).__name__ for f in sys.meta_path]
        print(json.dumps({"works": float(torch.ones(2).sum()), "finders": finders}))
        """
    )
    assert found["works"] == 2.0
    assert "_LibtorchFirst" not in found["finders"]
