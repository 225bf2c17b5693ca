"""How long another thread stands still while torch is imported on a background thread.

Run in a fresh interpreter (``python -m gradviz.bench.import_stall plain|gradviz``): the
main thread wakes every millisecond, as an idle GUI thread does for its events, while a
background thread imports torch, plainly or through ``core.torch_import.import_torch``.
Prints one JSON object: the import's wall time, the longest stall of the main thread and
the sum of its stalls over 100 ms.
"""

from __future__ import annotations

import json
import sys
import threading
import time


def measure(how: str) -> dict:
    done = threading.Event()
    took: list[float] = []

    def load() -> None:
        t0 = time.perf_counter()
        if how == "gradviz":
            from gradviz.core.common.torch_import import import_torch

            import_torch()
        else:
            import torch  # noqa: F401
        took.append(time.perf_counter() - t0)
        done.set()

    stalls = []
    thread = threading.Thread(target=load)
    last = time.perf_counter()
    thread.start()
    while not done.is_set():
        time.sleep(0.001)
        now = time.perf_counter()
        stalls.append(now - last)
        last = now
    thread.join()
    return {
        "import_s": took[0],
        "longest_stall_s": max(stalls),
        "stalls_over_100ms_s": sum(s for s in stalls if s > 0.1),
    }


if __name__ == "__main__":
    print(json.dumps(measure(sys.argv[1])))
