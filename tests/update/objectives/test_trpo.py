"""The TRPO objective: conjugate gradient, Fisher-vector product, line search, the learner."""

from __future__ import annotations

import pytest
import torch
from gymnasium import spaces

from harl.buffers.rollout import AgentBatch
from harl.compose import build_stages
from harl.config.loading import structure_pipeline
from harl.errors import ConfigError
from harl.policy.on_policy import Actor, PolicyConfig
from harl.update.common import masked_mean
from harl.update.objectives.trpo import (
    TRPOConfig,
    TRPOLearner,
    approx_categorical_kl,
    conjugate_gradient,
    fisher_vector_product,
    flat_grad,
    flat_params,
    line_search,
    set_flat_params,
)
from tests.fakes import counting, matrix

SPACES = {"box": spaces.Box(0.0, 1.0, (3,)), "discrete": spaces.Discrete(4)}
ACTORS = ["box", "discrete", "box-gru"]
"""Action space, and "-gru" for a recurrent actor (batches of 8 sequences, episode starts inside)."""


def make_actor(kind: str, seed: int = 0, dtype: torch.dtype = torch.float32) -> Actor:
    torch.manual_seed(seed)
    space, _, gru = kind.partition("-")
    # output_gain 1: a non-trivial starting policy, so the KL's curvature is not tiny
    config = PolicyConfig(hidden_sizes=(8,), output_gain=1.0, recurrent="chunked" if gru else "none")
    return Actor(5, SPACES[space], config).to(dtype)


def make_batch(actor: Actor, n: int = 64, seed: int = 1) -> AgentBatch:
    g = torch.Generator().manual_seed(seed)
    dtype = next(actor.parameters()).dtype
    obs = torch.randn(n, 5, generator=g, dtype=dtype)
    hidden = starts = None
    if actor.hidden_size:
        hidden = torch.randn(8, actor.hidden_size, generator=g, dtype=dtype)
        starts = (torch.rand(n, generator=g) < 0.2).to(dtype)
    with torch.no_grad():
        actions, log_probs, _ = actor.act(obs, None, hidden=hidden, starts=starts)
    return AgentBatch(obs=obs, actions=actions, old_log_probs=log_probs, avail=None,
                      active=torch.ones(n, 1, dtype=dtype),
                      advantages=torch.randn(n, 1, generator=g, dtype=dtype), hidden=hidden, starts=starts)


def kl_to(actor: Actor, batch: AgentBatch, kl=None):  # noqa: ANN001, ANN201
    """A closure: the mean KL (``kl``, default the exact one) from the actor's current policy (frozen now)
    to its policy then."""
    kl = kl or actor.kl

    def dist() -> tuple[torch.Tensor, ...]:
        return actor.distribution(batch.obs, None, batch.hidden, batch.starts)

    with torch.no_grad():
        old = tuple(t.clone() for t in dist())
    return lambda: masked_mean(kl(old, dist()).unsqueeze(-1), batch.active)


def test_conjugate_gradient_solves_a_small_spd_system() -> None:
    """Ten iterations on a 6x6 SPD system leave a residual |Ax - b| below 1e-8."""
    g = torch.Generator().manual_seed(0)
    m = torch.randn(6, 6, generator=g, dtype=torch.float64)
    a = m @ m.T + torch.eye(6, dtype=torch.float64)
    b = torch.randn(6, generator=g, dtype=torch.float64)
    x = conjugate_gradient(lambda v: a @ v, b, iterations=10)
    assert float(torch.linalg.vector_norm(a @ x - b)) < 1e-8
    torch.testing.assert_close(x, torch.linalg.solve(a, b), rtol=1e-8, atol=1e-8)


def test_conjugate_gradient_of_zero_is_zero() -> None:
    """A zero right-hand side (a zero policy gradient) gives the zero direction, not NaN."""
    x = conjugate_gradient(lambda v: 2 * v, torch.zeros(3))
    assert torch.equal(x, torch.zeros(3))


@pytest.mark.parametrize("kind", ACTORS)
def test_fisher_vector_product_matches_finite_differences(kind: str) -> None:
    """(F + 0.1 I) v, computed as J^T M J v, equals the central difference of the KL gradient along v, plus 0.1 v."""
    actor = make_actor(kind, dtype=torch.float64)
    batch = make_batch(actor)
    params = list(actor.parameters())
    kl = kl_to(actor, batch)
    v = torch.randn(flat_params(params).numel(), generator=torch.Generator().manual_seed(2),
                    dtype=torch.float64)
    with torch.no_grad():
        old = actor(batch.obs, None, batch.hidden, batch.starts)
    fvp = fisher_vector_product(actor, (batch.obs, None, batch.hidden, batch.starts),
                                lambda new: masked_mean(actor.kl(old, new).unsqueeze(-1), batch.active),
                                v, damping=0.1)
    start, eps = flat_params(params), 1e-5
    set_flat_params(params, start + eps * v)
    plus = flat_grad(kl(), params)
    set_flat_params(params, start - eps * v)
    minus = flat_grad(kl(), params)
    set_flat_params(params, start)
    torch.testing.assert_close(fvp, (plus - minus) / (2 * eps) + 0.1 * v, rtol=1e-5, atol=1e-6)


def test_line_search_rejects_a_step_past_the_kl_bound_and_restores_exactly() -> None:
    """A step whose every fraction exceeds the KL bound is refused; the parameters are bit-identical after."""
    actor = make_actor("discrete")
    batch = make_batch(actor)
    params = list(actor.parameters())
    before = [p.detach().clone() for p in params]
    start = flat_params(params)
    step = 50.0 * torch.randn(start.numel(), generator=torch.Generator().manual_seed(3))
    # a surrogate that every fraction of this step improves, so only the KL can refuse it
    gain = lambda: (flat_params(params) - start) @ step  # noqa: E731
    kl = kl_to(actor, batch)
    result = line_search(params, step, float(step @ step), gain, kl, kl_threshold=0.01, steps=10,
                         backtrack_coef=0.8, accept_ratio=0.5)
    assert not result.accepted and result.fraction == 0.0
    set_flat_params(params, start + 0.8**9 * step)  # the smallest fraction tried
    assert kl().item() > 0.01
    set_flat_params(params, start)
    assert all(torch.equal(p, q) for p, q in zip(before, actor.parameters()))
    result = line_search(params, 1e-4 * step, 1e-8 * float(step @ step), gain, kl, kl_threshold=0.01)
    assert result.accepted and result.fraction == 1.0  # the same direction, small enough: taken whole


def test_line_search_backtracks_until_the_gain_is_real() -> None:
    """On w - w^2 from w = 0, fractions 1 and 0.8 lose, 0.64 gains too little, 0.512 is accepted."""
    w = torch.nn.Parameter(torch.zeros(1))
    surrogate = lambda: w.sum() - w.sum() ** 2  # noqa: E731  peak at w = 0.5
    # full step 1.5, linear gain 1.5: at w = 1.5, 1.2, 0.96 the gains are -0.75, -0.24, 0.0384,
    # and 0.0384 < 0.1 * 0.64 * 1.5 = 0.096 (too little of the predicted gain)
    result = line_search([w], torch.tensor([1.5]), 1.5, surrogate, lambda: torch.tensor(0.0),
                         kl_threshold=0.01, steps=10, backtrack_coef=0.8, accept_ratio=0.1)
    # 0.512 -> w = 0.768: gain 0.768 - 0.5898 = 0.1782 > 0.1 * 0.512 * 1.5 = 0.0768: accepted
    assert result.accepted
    assert result.fraction == pytest.approx(0.8**3)
    assert result.improvement == pytest.approx(0.768 - 0.768**2)
    assert w.item() == pytest.approx(0.768)


@pytest.mark.parametrize("kind", ACTORS)
def test_learner_improves_the_surrogate_inside_the_trust_region(kind: str) -> None:
    """One TRPO step raises factor * r * A and keeps the mean KL under kl_threshold."""
    actor = make_actor(kind)
    batch = make_batch(actor, n=64)
    factor = torch.full((64, 1), 0.5)
    learner = TRPOLearner(actor, TRPOConfig(kl_threshold=0.01), torch.Generator())
    kl = kl_to(actor, batch, learner.kl)
    stats = learner.update(batch, factor)
    assert 0 < stats.step_fraction <= 1
    assert 0 < kl().item() < 0.01
    assert stats.kl == pytest.approx(kl().item())
    ratio = learner.ratio(batch)
    assert float(masked_mean(factor * ratio * batch.advantages, batch.active)) > float(
        masked_mean(factor * batch.advantages, batch.active))
    assert stats.factor == 0.5


class TestHARLCategoricalKL:
    """HARL's trpo_util.kl_approx(q=old, p=new) = exp(p - q) - 1 - (p - q) on the normalised logits,
    summed over actions, in both the Fisher product and the line search."""

    OLD = torch.log(torch.tensor([[0.5, 0.3, 0.2]]))
    NEW = torch.log(torch.tensor([[0.4, 0.4, 0.2]]))

    def test_hand_example(self) -> None:
        """d = [ln 0.8, ln(4/3), 0]: (0.8 - 1 + 0.2231436) + (1.3333333 - 1 - 0.2876821) + 0 = 0.0687949,
        against the exact KL 0.5 ln 1.25 + 0.3 ln 0.75 = 0.0252672."""
        approx = approx_categorical_kl((self.OLD,), (self.NEW,))
        assert approx.item() == pytest.approx(0.0687949, abs=1e-6)
        exact = make_actor("discrete").kl((self.OLD,), (self.NEW,))
        assert exact.item() == pytest.approx(0.0252672, abs=1e-6)

    @pytest.mark.parametrize(("mode", "expected"), [("approx", [0.75, -0.35, -0.4]), ("exact", [0.25, -0.15, -0.1])])
    def test_fisher_product_on_the_logits(self, mode: str, expected: list[float]) -> None:
        """With the logits as the parameters, F e_1 is the KL's Hessian's first column at p = (0.5, 0.3, 0.2).
        approx: sum_a (e_a - p)(e_a - p)^T = I - p 1^T - 1 p^T + 3 p p^T, column 1 =
        [1 - 0.5 - 0.5 + 0.75, -0.3 - 0.5 + 0.45, -0.2 - 0.5 + 0.3] = [0.75, -0.35, -0.4];
        exact: diag(p) - p p^T, column 1 = [0.5 - 0.25, -0.15, -0.1]."""
        logits = torch.nn.Parameter(self.OLD.clone())
        model = torch.nn.Module()
        model.z = logits
        model.forward = lambda: (model.z,)  # type: ignore[method-assign]
        kl = approx_categorical_kl if mode == "approx" else make_actor("discrete").kl
        old = (self.OLD.clone(),)
        fv = fisher_vector_product(model, (), lambda new: kl(old, new).mean(), torch.tensor([1.0, 0.0, 0.0]))
        torch.testing.assert_close(fv, torch.tensor(expected), atol=1e-5, rtol=0)

    def test_learner_uses_it_by_default(self) -> None:
        """categorical_kl = "approx" (default) on a Discrete actor; "exact" and Box actors keep the exact KL."""
        actor = make_actor("discrete")
        assert TRPOLearner(actor, TRPOConfig(), torch.Generator()).kl is approx_categorical_kl
        assert TRPOLearner(actor, TRPOConfig(categorical_kl="exact"), torch.Generator()).kl == actor.kl
        box = make_actor("box")
        assert TRPOLearner(box, TRPOConfig(), torch.Generator()).kl == box.kl


def test_multidiscrete_actions_are_refused() -> None:
    """A team with a MultiDiscrete agent cannot use trpo: the error names the key and the way out."""
    assert counting.CountingConfig  # registers the "counting" env kind
    data = {"env": {"kind": "counting"}, "collector": {"n_envs": 2, "rollout_length": 3},
            "updater": {"objective": {"kind": "trpo"}}, "evaluator": {"episodes": 1, "n_envs": 1}}
    with pytest.raises(ConfigError) as info:
        build_stages(structure_pipeline(data, "counting"))
    assert str(info.value) == (
        'updater.objective.kind: "trpo" handles Box and Discrete actions, but an agent has '
        "MultiDiscrete([2, 3]) actions (HARL's HATRPO refuses them too); use \"ppo\" or \"a2c\" "
        "for this team"
    )


def test_updater_without_an_optimizer_decays_and_checkpoints() -> None:
    """The updater skips TRPO's missing optimiser for the lr schedule and stores None in its state."""
    assert matrix.MatrixGameConfig  # registers the "matrix" env kind
    data = {"env": {"kind": "matrix"}, "collector": {"n_envs": 16, "rollout_length": 1},
            "updater": {"lr_decay": "linear", "objective": {"kind": "trpo"}},
            "policy": {"hidden_sizes": [8]}, "evaluator": {"episodes": 1, "n_envs": 1}}
    stages = build_stages(structure_pipeline(data, "matrix-game"))
    try:
        stages.collector.collect(stages.buffer)
        stages.returns.compute(stages.buffer)
        stats = stages.updater.update(stages.buffer, 0.5)
        assert stats.lr_scale == 0.5
        assert {"agent0_kl", "agent1_step_fraction"} <= set(stats.row())
        state = stages.updater.state_dict()
        assert state["actor_optimizers"] == [None, None]
        stages.updater.load_state_dict(state)
    finally:
        stages.close()
