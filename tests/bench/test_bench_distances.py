"""Speed target of the distance methods (run with: pytest -m bench tests/bench)."""

import pytest

from gradviz.bench.distances import BASELINE, TARGET_METHOD, TARGET_RATIO, measure
from gradviz.bench.harness import median_ratio


@pytest.mark.bench
@pytest.mark.parametrize("n", [1000, 3000])
def test_safe_fit_step_is_at_least_3x_masked_on_one_thread(n):
    timings = measure(n, repeats=3, methods=(BASELINE, TARGET_METHOD))
    ratio = median_ratio(timings[TARGET_METHOD], timings[BASELINE])
    assert ratio >= TARGET_RATIO, f"{TARGET_METHOD} is only {ratio:.2f}x {BASELINE} at N = {n}"
