"""Callbacks: True stops, False/None go on, anything else is a TypeError naming the hook."""

from __future__ import annotations

from typing import Any

import pytest

from harl.callbacks import Callbacks


class Watcher:
    def __init__(self, answer: Any) -> None:
        self.answer = answer

    def on_evaluation(self, stats: Any) -> Any:
        return self.answer


def test_true_stops_and_false_or_none_go_on() -> None:
    assert Callbacks([lambda row: None, lambda row: True]).on_iteration({}) is True
    assert Callbacks([lambda row: False, lambda row: None]).on_iteration({}) is False
    assert Callbacks([Watcher(True)]).on_evaluation(None) is True


def test_a_truthy_non_bool_is_refused_with_the_callback_and_hook_named() -> None:
    """``return "stop"`` would otherwise be silently ignored and the run would go on."""
    def stopper(row: Any) -> str:
        return "stop"

    with pytest.raises(TypeError, match=r"callback tests.test_callbacks.test_a_truthy_non_bool_is_refused_with_the_"
                                        r"callback_and_hook_named.<locals>.stopper: its on_iteration hook returned "
                                        r"'stop' \(str\); a hook returns True to stop the run, or False / None"):
        Callbacks([stopper]).on_iteration({})
    with pytest.raises(TypeError, match=r"callback tests.test_callbacks.Watcher: its on_evaluation hook returned 1 \(int\)"):
        Callbacks([Watcher(1)]).on_evaluation(None)
