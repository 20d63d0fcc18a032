"""The batched population update is each member's own update (harl.population.update).

Two copies of the same members (same seeds: same networks, same rollouts): one copy updated
member by member by its ``OnPolicyUpdater``, the other by ``population_update`` in batched
calls.  Parameters, Adam states, HA factors, stats and the members' generators must agree
(to float rounding: batched matmuls round differently).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from harl.compose import build_stages
from harl.config.loading import load_spec_and_notes
from harl.population.update import population_update

ROOT = Path(__file__).resolve().parents[2]


def members(pipeline: str, seeds: list[int], overrides: list[str]) -> list:
    out = []
    for seed in seeds:
        spec, _ = load_spec_and_notes(ROOT / "pipelines" / pipeline, [f"run.seed={seed}", *overrides])
        stages = build_stages(spec)
        torch.manual_seed(100 + seed)  # the same rollout for both copies of a member
        stages.collector.collect(stages.buffer)
        stages.returns.compute(stages.buffer)
        out.append(stages)
    return out


CASES = {
    "happo_box": ("happo_mpe_torch_spread.toml", ["collector.n_envs=4", "collector.rollout_length=25",
                                                  "updater.objective.minibatches=2", "critic.minibatches=2"]),
    "mappo_box": ("happo_mpe_torch_spread.toml", ['updater.kind="simultaneous"', "collector.n_envs=4",
                                                  "collector.rollout_length=25"]),
    "happo_discrete": ("happo_mpe_torch_spread.toml", ["env.continuous_actions=false", "collector.n_envs=4",
                                                       "collector.rollout_length=25", "updater.objective.epochs=2"]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_population_update_is_each_members_update(case: str) -> None:
    pipeline, overrides = CASES[case]
    seeds = [1, 2, 3, 4]
    alone, together = members(pipeline, seeds, overrides), members(pipeline, seeds, overrides)
    try:
        expected = [m.updater.update(m.buffer, progress=0.0) for m in alone]
        got = population_update([m.updater for m in together], [m.buffer for m in together], progress=0.0)
        orders = {tuple(e.order) for e in expected}
        if "happo" in case:
            assert len(orders) > 1, "the members' agent orders should differ (their own generators)"
        for a, b, e, g in zip(alone, together, expected, got):
            assert g.order == e.order
            for (name, p), q in zip(a.policy.named_parameters(), b.policy.parameters()):
                torch.testing.assert_close(q, p, rtol=1e-4, atol=2e-5, msg=name)
            for (name, p), q in zip(a.critic.named_parameters(), b.critic.parameters()):
                torch.testing.assert_close(q, p, rtol=1e-4, atol=2e-5, msg=name)
            torch.testing.assert_close(b.critic.normalizer.running_mean, a.critic.normalizer.running_mean)
            sa, sb = a.updater.state_dict(), b.updater.state_dict()
            assert torch.equal(sa["generator"], sb["generator"])  # the same draws, in the same sequence
            for oa, ob in zip(sa["actor_optimizers"], sb["actor_optimizers"]):
                for key, st in oa["state"].items():
                    assert float(ob["state"][key]["step"]) == float(st["step"])
                    torch.testing.assert_close(ob["state"][key]["exp_avg_sq"], st["exp_avg_sq"], rtol=1e-3, atol=1e-9)
            for ea, ga in zip(e.agents, g.agents):
                assert ga.factor == pytest.approx(ea.factor, rel=1e-4)
                assert ga.policy_loss == pytest.approx(ea.policy_loss, rel=1e-3, abs=1e-5)
                assert ga.grad_norm == pytest.approx(ea.grad_norm, rel=1e-3)
            assert g.critic.value_loss == pytest.approx(e.critic.value_loss, rel=1e-4)
    finally:
        for m in (*alone, *together):
            m.close()
