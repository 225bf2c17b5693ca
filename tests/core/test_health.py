import numpy as np

from gradviz.core.common.health import Health, classify, counts, worst


def test_classify_names_every_category():
    values = np.array([1.5, 0.0, np.nan, np.inf, -np.inf, -2.0])
    assert classify(values).tolist() == [
        Health.FINITE,
        Health.ZERO,
        Health.NAN,
        Health.POS_INF,
        Health.NEG_INF,
        Health.FINITE,
    ]


def test_blocked_entries_are_blocked_unless_more_alarming():
    values = np.array([0.0, 3.0, np.nan])
    blocked = np.array([True, True, True])
    assert classify(values, blocked).tolist() == [Health.BLOCKED, Health.BLOCKED, Health.NAN]


def test_codes_are_ordered_by_alarm_so_block_max_keeps_the_worst():
    order = [Health.FINITE, Health.ZERO, Health.BLOCKED, Health.NEG_INF, Health.POS_INF, Health.NAN]
    assert sorted(order) == order
    assert worst(np.array([0, 5, 2], dtype=np.uint8)) is Health.NAN
    assert worst(np.array([], dtype=np.uint8)) is Health.FINITE


def test_counts_tally_each_category():
    codes = classify(np.array([[np.nan, 1.0], [0.0, np.nan]]))
    tally = counts(codes)
    assert tally[Health.NAN] == 2 and tally[Health.ZERO] == 1 and tally[Health.FINITE] == 1
    assert sum(tally.values()) == 4
