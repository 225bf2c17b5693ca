"""Speed targets of the NaN tracer (run with: pytest -m bench tests/bench/test_bench_origin.py)."""

import pytest

from gradviz.bench import origin


@pytest.mark.bench
def test_tracing_and_watching_origins_stay_within_their_targets():
    lines = []
    result = origin.run(repeats=3, quick=False, emit=lines.append)
    assert result["target"]["met"], "\n".join(lines)
