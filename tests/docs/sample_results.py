"""A small results file in the schema `gradviz bench --out` writes (schema 1), written by hand
for the tests of the Performance page; the real files come from `gradviz bench`."""

from __future__ import annotations

import copy


def sample_results(**changes) -> dict:
    """One results file's contents; keyword arguments replace top-level keys."""
    data = {
        "schema": 1,
        "command": "gradviz bench --suite jacobians --quick --out docs/bench/sample.json",
        "date": "2026-12-01T10:00:00+00:00",
        "gradviz": "0.1.0",
        "torch": "2.13.0+cpu",
        "python": "3.11.7",
        "machine": {"cpu": "Sample CPU 9000", "cores": 2, "platform": "Linux-6.1-x86_64"},
        "load": {"before": [0.5, 0.75, 1.0], "after": [1.25, 1.0, 1.0]},
        "repeats": 3,
        "quick": True,
        "suites": {
            "jacobians": {
                "threads": 1,
                "tables": [
                    {
                        "title": "ms per Jacobian of a batch",
                        "columns": ["net", "B", "auto", "loop"],
                        "rows": [
                            ["2-20-20-4:tanh", 1024, 0.8312345, 506.4321],
                            ["64-256-256-10:tanh", 16384, 510.25, None],
                        ],
                        "notes": ["loop timed on its first samples and scaled"],
                    }
                ],
            },
            "memory": {"skipped": "not enough free memory", "tables": []},
        },
    }
    data = copy.deepcopy(data)
    data.update(changes)
    return data
