"""harl.warm_calls: a compiled graph's guards are skipped only for kinds of call it has already run."""

from __future__ import annotations

import pytest
import torch

from harl.warm_calls import _SKIP, WarmCalls, call_kind

needs_stance = pytest.mark.skipif(not _SKIP, reason="torch.compiler.set_stance(skip_guard_eval_unsafe) needs torch >= 2.6")


def doubled(x: torch.Tensor) -> torch.Tensor:
    return x * 2


def test_call_kind_tells_apart_what_the_guards_would():
    a = torch.ones(3)
    assert call_kind((a,)) == call_kind((torch.zeros(3),))
    assert call_kind((a,)) != call_kind((torch.ones(4),))
    assert call_kind((a,)) != call_kind((a.double(),))
    assert call_kind((a,)) != call_kind((a.requires_grad_(False).clone().requires_grad_(True),))
    assert call_kind(([a, a],)) != call_kind(([a],))
    with torch.no_grad():
        quiet = call_kind((a,))
    assert quiet != call_kind((a,))


@needs_stance
def test_a_seen_kind_runs_with_the_guards_skipped_and_a_new_kind_with_them():
    torch._dynamo.reset()
    warm = WarmCalls(torch.compile(doubled, backend="eager", dynamic=False))
    assert torch.equal(warm(torch.ones(3)), torch.full((3,), 2.0))
    assert warm.warm_calls == 0
    assert torch.equal(warm(torch.full((3,), 4.0)), torch.full((3,), 8.0))
    assert warm.warm_calls == 1
    # A new shape is a new kind: the guards run, the graph is retraced, the answer is right.
    assert torch.equal(warm(torch.ones(2, 2)), torch.full((2, 2), 2.0))
    assert warm.warm_calls == 1
    assert torch.equal(warm(torch.ones(3)), torch.full((3,), 2.0))
    assert torch.equal(warm(torch.ones(2, 2) * 3), torch.full((2, 2), 6.0))
    assert warm.warm_calls == 3


@needs_stance
def test_without_the_kind_a_skipped_guard_would_give_a_wrong_answer():
    """Why the kind is needed: the unsafe stance alone reuses a graph traced for another value."""
    torch._dynamo.reset()
    scale = {"k": 2.0}

    def scaled(x: torch.Tensor) -> torch.Tensor:
        return x * scale["k"]

    fn = torch.compile(scaled, backend="eager", dynamic=False)
    fn(torch.ones(3))
    scale["k"] = 5.0
    with torch.compiler.set_stance("default", skip_guard_eval_unsafe=True):
        stale = fn(torch.ones(3))
    assert torch.equal(stale, torch.full((3,), 2.0))  # the guard on scale["k"] was skipped
    # With the value in the kind, the changed value is a new kind: the guards run and catch it.
    torch._dynamo.reset()
    scale["k"] = 2.0
    warm = WarmCalls(torch.compile(scaled, backend="eager", dynamic=False), kind=lambda args: (scale["k"], call_kind(args)))
    warm(torch.ones(3))
    warm(torch.ones(3))
    scale["k"] = 5.0
    assert torch.equal(warm(torch.ones(3)), torch.full((3,), 5.0))


@needs_stance
def test_harl_guards_keeps_every_guard(monkeypatch):
    monkeypatch.setenv("HARL_GUARDS", "1")
    warm = WarmCalls(torch.compile(doubled, backend="eager", dynamic=False))
    warm(torch.ones(3))
    warm(torch.ones(3))
    assert warm.warm_calls == 0


@needs_stance
def test_a_stance_set_around_the_calls_is_left_as_it_was():
    torch._dynamo.reset()
    warm = WarmCalls(torch.compile(doubled, backend="eager", dynamic=False))
    warm(torch.ones(3))
    warm(torch.ones(3))
    from torch._dynamo.eval_frame import _is_skip_guard_eval_unsafe_stance

    assert not _is_skip_guard_eval_unsafe_stance()
