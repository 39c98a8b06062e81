"""``launchtrace.folds``: what a plain, a repeated, an expanded folded and a whole folded record stand for."""

from __future__ import annotations

import dataclasses

from launchtrace.folds import fold_share, is_folded, launches, record_total
from launchtrace.model import Fold, LaunchRecord, Site

PLAIN = LaunchRecord("launch", "m.k", (4,), None, (), (), Site("a.py", 1, "f"), start_ns=100, end_ns=130)
FOLD = Fold("00ff", count=5, period=2, position=1, start_ns=0, end_ns=1000, mean_ns=40)


def test_plain_and_repeated_records() -> None:
    assert (launches(PLAIN), is_folded(PLAIN), record_total(PLAIN)) == (1, False, (30, 1, 0))
    repeated = dataclasses.replace(PLAIN, repeat=4)  # a baseline's representative, or expand=False
    assert (launches(repeated), record_total(repeated)) == (4, (120, 4, 4))
    assert launches(dataclasses.replace(PLAIN, repeat=0)) == 1


def test_folded_records_bring_the_recorded_mean() -> None:
    copy = dataclasses.replace(PLAIN, fold=FOLD)  # one expanded copy of position 1
    assert is_folded(copy) and fold_share(copy) == (1, 40, False) and record_total(copy) == (40, 1, 1)
    whole = dataclasses.replace(PLAIN, fold=FOLD, repeat=5)  # the whole position
    assert fold_share(whole) == (5, 40, True) and record_total(whole) == (200, 5, 5)
    no_mean = dataclasses.replace(PLAIN, fold=dataclasses.replace(FOLD, mean_ns=0))
    assert record_total(no_mean) == (30, 1, 1)  # the laid-out duration when no mean was recorded
