"""The parity rule every side-by-side script applies (benchmarks/parity_marks.py), on values worked by hand."""
import pytest

from benchmarks.parity_marks import at_tenths, chance_of_parity, compare, markdown

CURVE = [(3, -9.0), (120, -8.0), (180, -7.0), (260, -6.0), (1000, -1.0)]


def test_marks_take_the_first_value_of_each_tenth_and_three_ways_to_read_zero():
    assert at_tenths(CURVE, 1000, zero="skip") == {100: -8.0, 200: -6.0, 1000: -1.0}
    assert at_tenths(CURVE, 1000, zero="window") == {0: -9.0, 100: -8.0, 200: -6.0, 1000: -1.0}
    late = [(50, -5.0), (150, -4.0)]  # evaluated first at 50: "first" takes it for 0, "window" too (in [0, 100))
    assert at_tenths(late, 1000, zero="first")[0] == -5.0
    assert at_tenths([(130, -4.0)], 1000, zero="first") == {0: -4.0, 100: -4.0}
    assert 0 not in at_tenths([(130, -4.0)], 1000, zero="window")


def test_verdict_is_the_difference_of_means_against_the_larger_population_std():
    base = [{100: 1.0, 200: 0.0}, {100: 3.0, 200: 2.0}]   # means 2, 1; population stds 1, 1
    ours = [{100: 4.0, 200: 1.5}, {100: 4.0, 200: 2.5}]   # means 4, 2; stds 0, 0.5
    rows = compare(base, ours, 1000, ("ref", "harl"))
    assert [(r["steps"], r["ref_mean"], r["harl_mean"], r["diff"], r["larger_std"], r["parity"]) for r in rows] == [
        (100, 2.0, 4.0, 2.0, 1.0, "no"), (200, 1.0, 2.0, 1.0, 1.0, "yes")]
    assert compare([{100: 1.0}], ours, 1000)[0]["parity"] == "n/a (1 seed)"
    assert markdown(rows, ("ref", "harl"), ("Ref", "harl"), digits=1)[2] == "| 100 | 2.0 ± 1.0 (2) | 4.0 ± 0.0 (2) | +2.0 | 1.0 | no |"


def test_the_rule_passes_two_identical_learners_seven_marks_in_ten_with_three_seeds():
    """Why "at each mark" cannot be asked of 3 seeds: the same learner on both sides passes a mark
    with probability ~0.71 (3 draws a side, population std), ~0.97 with 10 seeds a side."""
    assert chance_of_parity(3, 3, draws=100_000) == pytest.approx(0.708, abs=0.01)
    assert chance_of_parity(10, 10, draws=100_000) == pytest.approx(0.969, abs=0.01)
