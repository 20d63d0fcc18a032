"""Issue 38: two Ctrl-C at any gap lose at most the running iteration, and the resumed run is the
uninterrupted one, row for row (wall-clock columns aside) and bit for bit in its final state.

The first Ctrl-C lands at the start of iteration 4 (which evaluates); the second at a chosen
point of that iteration: inside collection (early, late), inside the returns, inside the update
(its first optimiser step, a later one: half-updated networks) or inside the evaluation.  In
collection it stops at once (the checkpoint: iteration 3, the collector's episode starts of
its end); once the rollout is collected it is held until the iteration's row is written (the
checkpoint: iteration 4).
Signals are sent from inside the process at those points, so each gap is hit exactly; the
fault battery (``benchmarks/faults.py --faults int2,term2``) sends them by the clock.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from harl.cli import main
from harl.collect.on_policy import OnPolicyCollector
from harl.envs.vector.inline import InlineVectorEnv
from harl.evaluator import Evaluator
from harl.returns.gae import GAE
from harl.rundir import signals
from harl.rundir.checkpoint import latest_checkpoint, load_checkpoint

pytest.importorskip("mpe2", reason="these runs use MPE (pip install harl[mpe])")

from tests.test_determinism import HAPPO, rows, same_final_state, settings  # noqa: E402

INLINE = ["--set", 'collector.backend="inline"']


@pytest.fixture(autouse=True)
def clean_signals() -> Iterator[None]:
    signals.reset()
    yield
    signals.reset()


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The uninterrupted run (5 iterations, inline envs)."""
    run_dir = tmp_path_factory.mktemp("reference") / "run"
    signals.reset()
    assert main(["train", str(HAPPO), *settings(**{"checkpoint.every_iterations": 50}), *INLINE,
                 "--run-dir", str(run_dir)]) == 0
    return run_dir


def press() -> None:
    os.kill(os.getpid(), signal.SIGINT)


def counting(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str, armed: Callable[[], bool], at: int) -> None:
    """``owner.name`` presses Ctrl-C on its ``at``-th call once ``armed()`` (then calls through)."""
    original = getattr(owner, name)
    calls = [0]

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if armed():
            calls[0] += 1
            if calls[0] == at:
                press()
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, wrapper)


@pytest.mark.parametrize(("where", "at", "saved"), [
    pytest.param("collection, first step", 1, 3, marks=pytest.mark.slow), ("collection, step 37 of 50", 37, 3),
    pytest.param("returns", 1, 4, marks=pytest.mark.slow),
    pytest.param("update, first optimiser step", 1, 4, marks=pytest.mark.slow), ("update, optimiser step 9", 9, 4),
    pytest.param("evaluation", 1, 4, marks=pytest.mark.slow),
])
def test_second_ctrl_c_at_any_gap_resumes_exactly(where: str, at: int, saved: int, tmp_path: Path,
                                                  reference: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    collect = OnPolicyCollector.collect
    collects = [0]

    def collect_pressing(self: OnPolicyCollector, buffer: Any) -> Any:
        collects[0] += 1
        if collects[0] == 4:
            press()  # the first Ctrl-C: stop after this iteration
        return collect(self, buffer)

    monkeypatch.setattr(OnPolicyCollector, "collect", collect_pressing)
    armed = lambda: collects[0] == 4  # noqa: E731 - during iteration 4 only
    hook = where.split(",")[0]
    if hook == "collection":
        counting(monkeypatch, InlineVectorEnv, "step", lambda: armed() and not evaluating[0], at)
    elif hook == "returns":
        counting(monkeypatch, GAE, "compute", armed, at)
    elif hook == "update":
        counting(monkeypatch, torch.optim.Adam, "step", armed, at)
    evaluating = [False]
    evaluate = Evaluator.evaluate

    def evaluate_marked(self: Evaluator) -> Any:
        evaluating[0] = True
        try:
            if hook == "evaluation" and armed():
                press()
            return evaluate(self)
        finally:
            evaluating[0] = False

    monkeypatch.setattr(Evaluator, "evaluate", evaluate_marked)
    stopped = tmp_path / "stopped"
    assert main(["train", str(HAPPO), *settings(**{"checkpoint.every_iterations": 50}), *INLINE,
                 "--run-dir", str(stopped)]) == 130
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert load_checkpoint(latest_checkpoint(stopped))["counters"]["iteration"] == saved, err
    if saved == 4:
        assert "Ctrl-C: stopping as soon as the networks' update and this iteration's row are done" in err
    monkeypatch.undo()
    signals.reset()
    assert main(["train", "--resume", str(stopped)]) == 0
    assert rows(stopped) == rows(reference)
    assert same_final_state(stopped, reference)


def test_hold_and_release() -> None:
    """Held: a second signal prints once and waits; ``release`` then raises KeyboardInterrupt; a third only
    prints (the exit is never cut short).  Without a held signal ``release`` does nothing."""
    said: list[str] = []
    with pytest.raises(KeyboardInterrupt), signals.GracefulStop(said.append) as stop:
        signals.hold_stops()
        signals.release_stops()  # nothing held: nothing happens
        signals.hold_stops()
        press()
        press()
        press()
        assert stop.requested and len(said) == 2
        assert said[1].startswith("Ctrl-C: stopping as soon as the networks' update")
        signals.release_stops()
    with signals.GracefulStop(said.append) as stop:
        stop.shutting_down()
        press()
    assert said[-1].startswith("Ctrl-C: already stopping")
