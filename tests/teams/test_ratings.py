"""harl.teams.ratings: openskill's Plackett-Luce ratings of the learner and its snapshots."""

from __future__ import annotations

import json
import sys

import pytest

from harl.errors import MissingExtraError

pytest.importorskip("openskill", reason='ratings need openskill: pip install "harl[teams]"')

from harl.teams.ratings import Ratings  # noqa: E402 - after the skip


def test_the_winner_goes_up_and_the_loser_down() -> None:
    ratings = Ratings()
    prior_mu, prior_sigma = ratings.mu("learner"), ratings.sigma("learner")
    ratings.game("learner", "snapshot_0", 1.0)
    assert ratings.mu("learner") > prior_mu > ratings.mu("snapshot_0")
    assert ratings.sigma("learner") < prior_sigma  # a game is evidence
    after_win = ratings.mu("learner")
    ratings.game("learner", "snapshot_0", 0.0)  # now a loss: the learner comes back down
    assert ratings.mu("learner") < after_win
    assert ratings.games("learner") == 2 and ratings.names() == ["learner", "snapshot_0"]


def test_a_loss_for_a_is_a_win_for_b() -> None:
    one, other = Ratings(), Ratings()
    one.game("a", "b", 0.0)
    other.game("b", "a", 1.0)
    for name in ("a", "b"):
        assert one.mu(name) == pytest.approx(other.mu(name))
        assert one.sigma(name) == pytest.approx(other.sigma(name))


def test_a_draw_leaves_equal_ratings_equal() -> None:
    ratings = Ratings()
    ratings.game("a", "b", 0.5)
    assert ratings.mu("a") == pytest.approx(ratings.mu("b"))
    assert ratings.sigma("a") == pytest.approx(ratings.sigma("b"))
    assert ratings.mu("a") == pytest.approx(Ratings().mu("new"))  # an even match moves no mean


def test_a_draw_with_a_stronger_player_helps_the_weaker() -> None:
    ratings = Ratings()
    ratings.game("strong", "weak", 1.0)
    before = ratings.mu("weak")
    ratings.game("weak", "strong", 0.5)
    assert ratings.mu("weak") > before


def test_ordinal_is_the_conservative_skill() -> None:
    ratings = Ratings()
    ratings.game("a", "b", 1.0)
    assert ratings.ordinal("a") == pytest.approx(ratings.mu("a") - 3 * ratings.sigma("a"))


def test_bad_games_are_refused() -> None:
    ratings = Ratings()
    with pytest.raises(ValueError, match="outcome 0.7: expected 1"):
        ratings.game("a", "b", 0.7)
    with pytest.raises(ValueError, match="cannot play itself"):
        ratings.game("a", "a", 1.0)


def test_a_row_names_its_columns_and_forget_drops_a_player() -> None:
    ratings = Ratings()
    ratings.game("learner", "snapshot_3", 1.0)
    assert list(ratings.row("rating")) == ["rating_learner", "rating_learner_sigma",
                                           "rating_snapshot_3", "rating_snapshot_3_sigma"]
    row = ratings.row("rating", names=["learner"])
    assert row == {"rating_learner": ratings.mu("learner"), "rating_learner_sigma": ratings.sigma("learner")}
    ratings.forget("snapshot_3")
    assert ratings.names() == ["learner"]


def test_state_round_trips_through_plain_numbers() -> None:
    ratings = Ratings()
    for a, b, outcome in (("learner", "s0", 1.0), ("learner", "s1", 0.5), ("s1", "s0", 0.0)):
        ratings.game(a, b, outcome)
    state = json.loads(json.dumps(ratings.state_dict()))  # nothing but plain numbers and names
    resumed = Ratings()
    resumed.load_state_dict(state)
    assert resumed.state_dict() == ratings.state_dict()
    for r in (ratings, resumed):
        r.game("learner", "s1", 0.0)
    assert resumed.state_dict() == ratings.state_dict()  # a resumed run rates as an uninterrupted one


def test_without_openskill_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "openskill.models", None)  # import now raises ImportError
    with pytest.raises(MissingExtraError, match=r'pip install "harl\[teams\]"'):
        Ratings()
