"""Jacobian speed targets of issue 3, measured by gradviz.bench.jacobians (pytest -m bench)."""

from __future__ import annotations

import pytest

from gradviz.bench import jacobians as bench


@pytest.fixture(scope="module")
def report() -> dict:
    return bench.run(repeats=3, quick=False, emit=print)


@pytest.mark.bench
def test_auto_is_at_least_200x_the_loop_at_b1024_in_steady_state(report):
    steady = report["steady_vs_loop"]
    assert steady["batch"] == 1024
    assert min(steady["small"], steady["wide"]) >= 200, steady


@pytest.mark.bench
def test_auto_first_call_in_a_fresh_process_is_at_least_100x_the_loop(report):
    first = report["first_call"]
    assert min(first["small"]["vs_loop"], first["wide"]["vs_loop"]) >= 100, first


@pytest.mark.bench
def test_auto_is_within_2x_of_the_forward_plus_m_backward_floor_at_b16384(report):
    floor = report["floor"]
    assert floor["batch"] == 16384
    assert floor["factor"] <= 2.0, floor


@pytest.mark.bench
def test_every_method_is_reported_at_every_batch_for_both_nets(report):
    seen = {(r["net"], r["batch"], r["method"]) for r in report["results"]}
    assert seen == {
        (net, batch, method)
        for net in bench.NETS.values()
        for batch in bench.BATCHES
        for method in bench.METHODS
    }
    assert all(r["seconds"] > 0 for r in report["results"])
