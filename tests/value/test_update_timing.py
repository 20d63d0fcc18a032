"""When the value family's gradient steps and epsilons come (issue 47): EPyMARL's loop by default.

EPyMARL's ``run_sequential`` plays a batch of episodes (``runner.run()``), inserts it, and takes
one gradient step if the buffer can sample; its action selector reads epsilon at ``t_env``,
which only moves when a batch ends.  ``[updater] timing = "per_iteration"`` and ``[collector]
epsilon_timing = "per_step"`` are harl's earlier behaviour, kept by name.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
import torch

import harl
import harl.collect.episodes as episodes_module
import tests.value.fake_envs  # noqa: F401 - registers the "guess" env kind
from harl.collect.episodes import epsilon_at
from harl.returns.episode_td import EpisodeTD, EpisodeTDConfig

GUESS = Path(__file__).parent / "guess_qmix.toml"
LENGTH = 4
"""The guess env's episodes: 4 steps, all envs end together."""


@pytest.fixture
def built() -> Iterator[Any]:
    opened: list[Any] = []

    def make(**values: object) -> Any:
        stages = harl.build(GUESS, [f"{k}={v}" for k, v in values.items()])
        opened.append(stages)
        return stages

    yield make
    for stages in opened:
        stages.close()


def record(stages: Any) -> list[tuple[str, int, int]]:
    """Every episode stored and every gradient step, in order, as (what, env steps, episodes stored)."""
    events: list[tuple[str, int, int]] = []
    buffer, objective, collector = stages.buffer, stages.updater.objective, stages.collector
    insert, update = buffer.insert, objective.update

    def inserting(episode: Any) -> None:
        insert(episode)
        events.append(("episode", collector.env_steps, buffer.episodes_added))

    def stepping(batch: Any) -> dict[str, float]:
        events.append(("step", collector.env_steps, buffer.episodes_added))
        return update(batch)

    buffer.insert, objective.update = inserting, stepping
    return events


def epymarl_steps(n_envs: int, batch_size: int, batches: int) -> list[tuple[int, int]]:
    """(t_env, episodes in the buffer) at each ``learner.train`` of EPyMARL's loop, ``batch_size_run =
    n_envs`` episodes of LENGTH steps per ``runner.run()``."""
    return [(k * n_envs * LENGTH, k * n_envs) for k in range(1, batches + 1) if k * n_envs >= batch_size]


def test_by_default_a_step_follows_each_episode_inside_collection(built: Any) -> None:
    """One env (EPyMARL's episode runner): 3 episodes per iteration, batch 2; the steps are taken as
    the episodes end, before the next action, and the update reports them at the iteration's end."""
    stages = built(**{"collector.n_envs": 1, "collector.rollout_length": 3 * LENGTH, "buffer.batch_size": 2})
    assert stages.collector.hook is stages.updater
    events = record(stages)
    stages.collector.collect(stages.buffer)
    assert [e[0] for e in events] == ["episode", "episode", "step", "episode", "step"]
    assert stages.updater.update(stages.buffer, 0.0).updates == 2
    assert len(events) == 5                     # nothing more at the iteration's end
    stages.collector.collect(stages.buffer)
    assert stages.updater.update(stages.buffer, 0.0).updates == 3
    steps = [(t, n) for what, t, n in events if what == "step"]
    assert steps == epymarl_steps(1, 2, 6)


@pytest.mark.parametrize("n_envs", [2, 4])
def test_epymarls_parallel_runner_is_one_step_per_batch(built: Any, n_envs: int) -> None:
    """``batch_size_run = B`` is ``n_envs = B`` with ``updates_per_episode = 1 / B``: one step after
    each batch of B episodes once the buffer can sample, the first after the batch that fills it."""
    stages = built(**{"collector.n_envs": n_envs, "collector.rollout_length": 5 * LENGTH, "buffer.batch_size": 6,
                      "updater.updates_per_episode": 1 / n_envs})
    events = record(stages)
    for _ in range(2):
        stages.collector.collect(stages.buffer)
        stages.updater.update(stages.buffer, 0.0)
    assert [(t, n) for what, t, n in events if what == "step"] == epymarl_steps(n_envs, 6, 10)


def test_per_iteration_queues_the_steps_to_the_iterations_end(built: Any) -> None:
    """harl's earlier timing, by name: no step inside collection; the episodes received since the
    buffer first held batch_size earn theirs at the update."""
    stages = built(**{"collector.n_envs": 1, "collector.rollout_length": 3 * LENGTH, "buffer.batch_size": 2,
                      "updater.update_timing": "per_iteration"})
    assert stages.collector.hook is None
    events = record(stages)
    stages.collector.collect(stages.buffer)
    assert [e[0] for e in events] == ["episode"] * 3
    assert stages.updater.update(stages.buffer, 0.0).updates == 2
    assert [e[0] for e in events] == ["episode"] * 3 + ["step"] * 2
    assert {t for what, t, _ in events if what == "step"} == {3 * LENGTH}


def epsilons_used(stages: Any, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The epsilon each vector step explored with."""
    seen: list[Any] = []
    real = episodes_module.epsilon_greedy

    def spy(q: torch.Tensor, masks: torch.Tensor, epsilon: Any, generator: Any) -> torch.Tensor:
        seen.append(epsilon.clone() if torch.is_tensor(epsilon) else epsilon)
        return real(q, masks, epsilon, generator)

    monkeypatch.setattr(episodes_module, "epsilon_greedy", spy)
    return seen


def test_epsilon_is_held_for_an_episode_at_its_starts_value(built: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """2 envs, 4-step episodes, anneal over 40 env steps: every step of an episode explores with
    the schedule's value at the env step the episode began (0, 8, 16, ...), as EPyMARL's t_env."""
    stages = built(**{"collector.rollout_length": 3 * LENGTH, "collector.epsilon_anneal_steps": 40})
    seen = epsilons_used(stages, monkeypatch)
    stages.collector.collect(stages.buffer)
    assert len(seen) == 3 * LENGTH
    for k, epsilon in enumerate(seen):
        start = 2 * LENGTH * (k // LENGTH)       # env steps when this step's episode began
        assert epsilon.shape == (2, 1)
        assert epsilon.flatten().tolist() == [epsilon_at(start, 1.0, 0.05, 40)] * 2
    assert seen[LENGTH - 1].flatten().tolist() == [1.0, 1.0]  # the first episode's last step: still 1.0


def test_per_step_epsilon_reads_the_schedule_at_every_step(built: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    stages = built(**{"collector.rollout_length": 2 * LENGTH, "collector.epsilon_anneal_steps": 40,
                      "collector.epsilon_timing": "per_step"})
    seen = epsilons_used(stages, monkeypatch)
    stages.collector.collect(stages.buffer)
    assert seen == [epsilon_at(2 * k, 1.0, 0.05, 40) for k in range(2 * LENGTH)]


def test_the_per_episode_epsilon_follows_each_envs_own_episode(built: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Envs whose episodes begin at different env steps hold different epsilons: env 1's episode is
    begun again (as a resume does) two vector steps after env 0's."""
    stages = built(**{"collector.rollout_length": 2, "collector.epsilon_anneal_steps": 40})
    collector = stages.collector
    seen = epsilons_used(stages, monkeypatch)
    collector.collect(stages.buffer)                  # env steps 0..3: both episodes began at 0
    collector._episode_start[1] = collector.env_steps  # env 1 as if its episode began now (env step 4)
    collector.collect(stages.buffer)
    assert seen[-1].flatten().tolist() == [1.0, epsilon_at(4, 1.0, 0.05, 40)]


def test_a_collection_that_fails_after_a_step_leaves_the_iteration_as_it_began(built: Any) -> None:
    """A failure (or a second Ctrl-C) inside collection, after in-collection gradient steps: the
    networks, optimiser and counters go back to the iteration's start, so an exit checkpoint holds
    a whole iteration."""
    stages = built(**{"collector.n_envs": 1, "collector.rollout_length": 3 * LENGTH, "buffer.batch_size": 2})
    collector, updater = stages.collector, stages.updater
    collector.collect(stages.buffer)
    updater.update(stages.buffer, 0.0)
    before = {k: v.clone() for k, v in stages.policy.state_dict().items()}
    mixer = {k: v.clone() for k, v in stages.critic.state_dict().items()}
    counters = (updater.updates, updater.credit, updater.seen, updater.generator.get_state().clone())
    real, calls = collector.observe, []

    def failing(*args: Any) -> Any:
        calls.append(1)
        if len(calls) == 2 * LENGTH + 1:          # after two episodes, hence two steps
            raise KeyboardInterrupt
        return real(*args)

    collector.observe = failing
    with pytest.raises(KeyboardInterrupt):
        collector.collect(stages.buffer)
    assert updater.updates == counters[0]
    assert (updater.credit, updater.seen) == counters[1:3]
    assert torch.equal(updater.generator.get_state(), counters[3])
    assert all(torch.equal(v, before[k]) for k, v in stages.policy.state_dict().items())
    assert all(torch.equal(v, mixer[k]) for k, v in stages.critic.state_dict().items())
    collector.observe = real
    collector.collect(stages.buffer)
    assert updater.update(stages.buffer, 0.0).updates == 3   # the next iteration counts its own steps only


def test_a_time_limit_can_be_terminal_as_epymarls_gymma() -> None:
    """A 2-step episode cut by its time limit: bootstrap (default) adds gamma Q' at its last step;
    truncation = "terminal" does not (EPyMARL's gymma, JaxMARL)."""
    rewards, terminated = torch.tensor([[1.0, 2.0, 0.0]]), torch.zeros(1, 3, dtype=torch.bool)
    filled, next_q = torch.tensor([[True, True, False]]), torch.full((1, 3, 1), 10.0)
    for mode in ("one_step", "n_step", "lambda"):
        boot = EpisodeTD(EpisodeTDConfig(gamma=0.5, mode=mode)).targets(rewards, terminated, filled, next_q)
        cut = EpisodeTD(EpisodeTDConfig(gamma=0.5, mode=mode, truncation="terminal")).targets(
            rewards, terminated, filled, next_q)
        assert boot[0, 1, 0] == 2.0 + 0.5 * 10.0
        assert cut[0, 1, 0] == 2.0 and cut[0, 2, 0] == 0.0
    one = EpisodeTD(EpisodeTDConfig(gamma=0.5, truncation="terminal")).targets(rewards, terminated, filled, next_q)
    assert one[0, 0, 0] == 1.0 + 0.5 * 10.0       # only the last step stops bootstrapping


def test_per_iteration_epsilon_is_read_once_per_collect(built: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """JaxMARL's QLearning reads epsilon once per rollout: every step of a collect explores with the
    schedule's value at the collect's first env step."""
    stages = built(**{"collector.rollout_length": 3, "collector.epsilon_anneal_steps": 40,
                      "collector.epsilon_timing": "per_iteration"})
    seen = epsilons_used(stages, monkeypatch)
    for _ in range(2):
        stages.collector.collect(stages.buffer)
    assert seen == [1.0] * 3 + [epsilon_at(6, 1.0, 0.05, 40)] * 3


def test_reward_scale_and_radam_as_jaxmarls_qlearning(built: Any) -> None:
    """``reward_scale`` multiplies the team reward before the targets (JaxMARL's REW_SCALE);
    ``optimizer = "radam"`` is optax.radam's torch twin."""
    stages = built(**{"collector.rollout_length": 2 * LENGTH, "returns.reward_norm": "false",
                      "updater.objective.reward_scale": 10.0, "updater.objective.optimizer": "radam"})
    objective = stages.updater.objective
    assert isinstance(objective.optimizer, torch.optim.RAdam)
    stages.collector.collect(stages.buffer)
    batch = stages.buffer.gather(torch.arange(stages.buffer.size))
    _, scaled = objective.loss(batch)
    objective.config = attrs.evolve(objective.config, reward_scale=1.0)
    _, plain = objective.loss(attrs.evolve(batch, rewards=batch.rewards * 10.0))
    assert scaled == plain
