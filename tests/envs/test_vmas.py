"""VMASVectorEnv: one VMAS batch as a VectorEnv, pinned to VMAS's own API."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from harl.collect.off_policy import OffPolicyCollector
from harl.collect.on_policy import OnPolicyCollector
from harl.compose import build_stages
from harl.config.loading import structure_pipeline
from harl.envs.protocol import is_tensor_native
from harl.envs.registry import make_env
from harl.envs.vector import NumpyVectorEnv, as_numpy, make_vector_env
from harl.envs.vmas_env import SCENARIOS, VMASConfig, VMASVectorEnv
from harl.errors import ConfigError, MissingExtraError
from harl.evaluator import Evaluator

vmas = pytest.importorskip("vmas", reason="VMAS tests need harl[vmas]")
torch = pytest.importorskip("torch")


def _reference(config: VMASConfig, n_envs: int, seed: int):
    return vmas.make_env(config.scenario, num_envs=n_envs, device="cpu", max_steps=config.max_episode_steps,
                         continuous_actions=config.continuous_actions, seed=seed, clamp_actions=True,
                         terminated_truncated=True, **config.kwargs)


def _actions(venv: VMASVectorEnv, rng: np.random.Generator) -> list[np.ndarray]:
    out = []
    for space in venv.action_spaces:
        if hasattr(space, "n"):
            out.append(rng.integers(space.n, size=(venv.n_envs, 1)).astype(np.float32))
        else:
            out.append(rng.uniform(space.low, space.high, (venv.n_envs, *space.shape)).astype(np.float32))
    return out


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_spaces_match_vmas(scenario: str) -> None:
    """Per-agent spaces equal VMAS's (as gymnasium spaces); the state concatenates the observations."""
    config = VMASConfig(scenario=scenario)
    venv = make_vector_env(config, n_envs=4, seed=0)
    reference = _reference(config, 4, 0)
    assert isinstance(venv, VMASVectorEnv) and venv.n_envs == 4
    assert venv.n_agents == reference.n_agents
    for ours, theirs in zip(venv.observation_spaces, reference.observation_space.spaces):
        assert ours.shape == theirs.shape and ours.dtype == np.float32
    for ours, theirs in zip(venv.action_spaces, reference.action_space.spaces):
        np.testing.assert_array_equal(ours.low, theirs.low)
        np.testing.assert_array_equal(ours.high, theirs.high)
    assert venv.state_space.shape == (sum(s.shape[0] for s in venv.observation_spaces),)


@pytest.mark.parametrize(("scenario", "continuous"), [(s, True) for s in SCENARIOS] + [("balance", False)])
def test_trajectory_matches_vmas_across_truncation(scenario: str, continuous: bool) -> None:
    """Same seed and actions give VMAS's observations and rewards, through a synchronous time limit."""
    config = VMASConfig(scenario=scenario, continuous_actions=continuous, max_episode_steps=4)
    rng = np.random.default_rng(0)
    venv = make_vector_env(config, n_envs=3, seed=7)
    actions = [_actions(venv, rng) for _ in range(6)]
    obs, state, avail = venv.reset()
    steps = [venv.step([torch.as_tensor(x) for x in a]) for a in actions]

    reference = _reference(config, 3, 7)
    ref_obs = reference.reset(seed=7)  # as the vector env's first reset
    assert torch.equal(obs[0], ref_obs[0])
    assert torch.equal(state, torch.cat(ref_obs, 1))
    assert avail is None
    for t, (a, step) in enumerate(zip(actions, steps), start=1):
        batch = [torch.as_tensor(x).long() if not continuous else torch.as_tensor(x) for x in a]
        ref_obs, ref_rew, ref_term, ref_trunc, _ = reference.step(batch)
        assert torch.equal(step.final_state, torch.cat(ref_obs, 1))
        assert torch.equal(step.rewards, torch.stack(ref_rew, 1))
        assert step.truncated.tolist() == [t == 4] * 3
        assert not step.terminated.any() or scenario == "balance"
        if t == 4:
            assert [info["length"] for info in step.episode_infos] == [4, 4, 4]
            ref_obs = reference.reset()
        for i in range(venv.n_agents):
            assert torch.equal(step.obs[i], ref_obs[i])
            assert step.obs[i].dtype == torch.float32
        assert torch.equal(step.state, torch.cat(ref_obs, 1))


def test_terminated_env_resets_alone() -> None:
    """A balance env whose package falls is terminated (not truncated) and reset by itself."""
    venv = make_vector_env(VMASConfig(scenario="balance", max_episode_steps=100), n_envs=16, seed=0)
    venv.reset()
    rng = np.random.default_rng(0)
    steps = []
    while len(steps) < 99 and not (steps and steps[-1].terminated.any()):
        steps.append(venv.step(_actions(venv, rng)))
    step, t = steps[-1], len(steps)
    assert step.terminated.any() and not step.truncated.any() and t < 99
    ended = step.terminated.nonzero().flatten()
    assert [info["length"] for info in step.episode_infos] == [t] * len(ended)
    assert not torch.equal(step.final_state[ended], step.state[ended])
    kept = (~step.terminated).nonzero().flatten()
    assert torch.equal(step.final_state[kept], step.state[kept])
    for i in range(venv.n_agents):
        assert torch.equal(step.final_obs[i][kept], step.obs[i][kept])
    assert step.active.shape == (16, venv.n_agents) and bool(step.active.all())


def test_returns_are_mean_agent_rewards() -> None:
    """An episode's return is the sum over its steps of the agents' mean reward."""
    venv = make_vector_env(VMASConfig(scenario="navigation", max_episode_steps=3), n_envs=2, seed=1)
    venv.reset()
    rng = np.random.default_rng(1)
    total = np.zeros(2)
    for _ in range(3):
        step = venv.step(_actions(venv, rng))
        total += step.rewards.double().mean(dim=1).numpy()
    np.testing.assert_allclose([info["return"] for info in step.episode_infos], total, rtol=1e-5)


class TestTensorNative:
    """Batches are torch tensors on the env's device; ``NumpyVectorEnv`` gives the same numbers as arrays."""

    def test_batches_are_tensors_on_the_env_device(self) -> None:
        """reset and step hand out tensors with the protocol's dtypes; the action tensors are not modified."""
        venv = make_vector_env(VMASConfig(scenario="balance", continuous_actions=False, max_episode_steps=3),
                               n_envs=4, seed=0)
        assert is_tensor_native(venv) and venv.device == torch.device("cpu")
        obs, state, avail = venv.reset()
        assert all(isinstance(o, torch.Tensor) and o.dtype == torch.float32 for o in obs)
        assert isinstance(state, torch.Tensor) and state.shape == (4, venv.state_space.shape[0])
        actions = [torch.tensor([[0.0], [1.0], [2.0], [4.0]]) for _ in range(venv.n_agents)]
        kept = [a.clone() for a in actions]
        for _ in range(3):
            step = venv.step(actions)
        assert all(torch.equal(a, b) for a, b in zip(actions, kept))
        batches = [*step.obs, *step.final_obs, step.state, step.final_state, step.rewards,
                   step.terminated, step.truncated, step.active]
        assert all(isinstance(x, torch.Tensor) and x.device == venv.device for x in batches)
        assert step.rewards.dtype == torch.float32 and step.rewards.shape == (4, venv.n_agents)
        assert step.terminated.dtype == step.truncated.dtype == step.active.dtype == torch.bool
        assert step.truncated.tolist() == [True] * 4 and len(step.episode_infos) == 4

    def test_numpy_view_gives_the_same_batches_as_arrays(self) -> None:
        """One seed and the same actions, one env seen through NumpyVectorEnv: equal numbers, numpy arrays."""
        config = VMASConfig(scenario="balance", max_episode_steps=50)
        rng = np.random.default_rng(0)
        actions = [_actions(make_vector_env(config, n_envs=16), rng) for _ in range(55)]

        def run(venv):  # noqa: ANN001, ANN202 - VMAS draws from one global generator: one env at a time
            return venv.reset(), [venv.step(a) for a in actions], venv.episode_starts()

        (obs, state, _), steps, starts = run(make_vector_env(config, n_envs=16, seed=5))
        view = as_numpy(make_vector_env(config, n_envs=16, seed=5))
        assert isinstance(view, NumpyVectorEnv) and not is_tensor_native(view) and as_numpy(view) is view
        (obs_np, state_np, avail_np), steps_np, starts_np = run(view)
        assert avail_np is None and isinstance(state_np, np.ndarray)
        np.testing.assert_array_equal(state_np, state.numpy())
        # single envs were reset (terminated) and all of them at once (truncated)
        assert any(s.terminated.any() for s in steps) and steps[49].truncated.any()
        for step, step_np in zip(steps, steps_np):
            for name in ("state", "final_state", "rewards", "terminated", "truncated", "active"):
                ours = getattr(step_np, name)
                assert isinstance(ours, np.ndarray)
                np.testing.assert_array_equal(ours, getattr(step, name).numpy())
            for i in range(view.n_agents):
                np.testing.assert_array_equal(step_np.obs[i], step.obs[i].numpy())
                np.testing.assert_array_equal(step_np.final_obs[i], step.final_obs[i].numpy())
            assert step_np.episode_infos == step.episode_infos
        assert starts_np == starts


def test_one_simulator_whatever_the_backend() -> None:
    """make_vector_env builds VMAS natively even when asked for worker processes; make_env refuses."""
    venv = make_vector_env(VMASConfig(), n_envs=5, backend="subprocess", workers=2)
    assert isinstance(venv, VMASVectorEnv) and venv.n_envs == 5
    with pytest.raises(TypeError, match='"vmas" is vectorised natively'):
        make_env(VMASConfig())


def test_unknown_scenario() -> None:
    """A scenario VMAS does not have is a ConfigError naming env.scenario."""
    with pytest.raises(ConfigError, match='env.scenario: VMAS has no scenario "balanse"'):
        make_vector_env(VMASConfig(scenario="balanse"), n_envs=1)


def test_missing_extra_message(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without vmas, building the env names the extra to install."""
    monkeypatch.setitem(sys.modules, "vmas", None)
    with pytest.raises(MissingExtraError) as caught:
        make_vector_env(VMASConfig(), n_envs=2)
    assert str(caught.value) == (
        'env kind "vmas" needs: pip install "harl[vmas]" (the optional package "vmas" is not installed)'
    )


def test_module_imports_without_vmas() -> None:
    """harl.envs.vmas_env imports without vmas (and without torch work at import)."""
    code = "import sys; sys.modules['vmas'] = None; import harl.envs.vmas_env, harl.envs.vector"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[2])


def _vmas_pipeline(**collector: object) -> dict:
    """Balance with 16 envs: within 60 steps some packages fall (terminated) and the rest time out."""
    return {
        "run": {"seed": 3, "total_env_steps": 10_000},
        "env": {"kind": "vmas", "scenario": "balance", "max_episode_steps": 50},
        "collector": {"n_envs": 16, "rollout_length": 60, **collector},
        "policy": {"hidden_sizes": [16]},
        "critic": {"hidden_sizes": [16]},
        "updater": {"objective": {"epochs": 1}},
        "evaluator": {"episodes": 6, "n_envs": 3},
    }


def _off_policy_pipeline() -> dict:
    return {
        "run": {"seed": 3, "total_env_steps": 10_000},
        "env": {"kind": "vmas", "scenario": "balance", "max_episode_steps": 50},
        "collector": {"kind": "off_policy", "n_envs": 16, "rollout_length": 30, "warmup_steps": 240,
                      "updates_per_round": 2},
        "buffer": {"kind": "replay", "capacity": 2000, "batch_size": 16},
        "returns": {"kind": "n_step", "n_step": 3},
        "critic": {"kind": "q", "twin": True, "hidden_sizes": [16]},
        "updater": {"kind": "sequential", "objective": {"kind": "td3"}},
        "policy": {"hidden_sizes": [16]},
        "evaluator": {"episodes": 6, "n_envs": 3},
    }


def _build(pipeline: dict, numpy_envs: bool):  # noqa: ANN202
    """The pipeline's stages; with ``numpy_envs`` its collector and evaluator see the envs as numpy."""
    stages = build_stages(structure_pipeline(pipeline, "vmas"))
    if numpy_envs:
        c, e = stages.collector, stages.evaluator
        if isinstance(c, OnPolicyCollector):
            stages.collector = OnPolicyCollector(c.config, NumpyVectorEnv(c.venv), c.policy, c.critic,
                                                 c.device, c.seed)
        else:
            stages.collector = OffPolicyCollector(c.config, NumpyVectorEnv(c.venv), c.policy, c.device, c.seed)
        stages.evaluator = Evaluator(e.config, NumpyVectorEnv(e.venv), e.policy, e.device, e.seed)
    return stages


def _no_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make any tensor -> numpy conversion raise (``Tensor.numpy``, ``np.asarray(tensor)``)."""
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a tensor was converted to numpy")

    monkeypatch.setattr(torch.Tensor, "numpy", refuse)
    monkeypatch.setattr(torch.Tensor, "__array__", refuse)


def _storage(buffer: object) -> dict[str, object]:
    """Every tensor (or per-agent list of tensors) a buffer holds, by attribute name."""
    def is_storage(x: object) -> bool:
        return isinstance(x, torch.Tensor) or (
            isinstance(x, list) and any(isinstance(t, torch.Tensor) for t in x))
    return {name: x for name, x in vars(buffer).items() if is_storage(x)}


def _same_storage(a: object, b: object) -> None:
    first, second = _storage(a), _storage(b)
    assert first.keys() == second.keys() and "obs" in first
    for name, x in first.items():
        y = second[name]
        pairs = list(zip(x, y)) if isinstance(x, list) else [(x, y)]
        for u, v in pairs:
            assert (u is None and v is None) or torch.equal(u, v), name


def _spy_on_steps(venv: object, seen: list[str]) -> None:
    """Record the kind of every action batch ``venv.step`` receives and every batch it returns."""
    step = venv.step

    def spied(actions):  # noqa: ANN001, ANN202
        out = step(actions)
        seen.extend(type(a).__name__ for a in actions)
        seen.extend(type(x).__name__ for x in [*out.obs, out.state, out.rewards, out.terminated,
                                                out.truncated, out.active, out.final_state])
        return out

    venv.step = spied


class TestCollectorsOnTensors:
    """The collectors and the evaluator run VMAS on tensors alone, and store what the numpy path stores."""

    def _on_policy(self, numpy_envs: bool, monkeypatch: pytest.MonkeyPatch) -> tuple:
        stages = _build(_vmas_pipeline(), numpy_envs)
        seen: list[str] = []
        _spy_on_steps(stages.collector.venv, seen)
        try:
            with monkeypatch.context() as patch:
                if not numpy_envs:
                    _no_numpy(patch)
                first = stages.collector.collect(stages.buffer)
                snapshot = {name: [None if t is None else t.clone() for t in x] if isinstance(x, list)
                            else x.clone() for name, x in _storage(stages.buffer).items()}
                stages.returns.compute(stages.buffer)
                stages.updater.update(stages.buffer, 0.0)
                second = stages.collector.collect(stages.buffer)
                evaluation = stages.evaluator.evaluate()
        finally:
            stages.close()
        return stages.buffer, snapshot, first, second, evaluation, set(seen)

    def test_on_policy_rollouts_equal_the_numpy_path(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """HAPPO on balance, two rollouts around an update and an evaluation: the env receives and returns
        only tensors (no tensor ever becomes numpy), and the buffer holds bit for bit what the numpy
        path's holds, episode ends included."""
        buffer, first_rollout, first, second, evaluation, seen = self._on_policy(False, monkeypatch)
        buffer_np, first_rollout_np, first_np, second_np, evaluation_np, seen_np = self._on_policy(True, monkeypatch)
        assert seen == {"Tensor"} and seen_np == {"ndarray"}
        assert bool(buffer.terminated.any()) and bool(buffer.truncated.any())
        assert first.episodes == first_np.episodes and second.episodes == second_np.episodes
        _same_storage(_Holder(first_rollout), _Holder(first_rollout_np))
        _same_storage(buffer, buffer_np)
        assert evaluation == evaluation_np and evaluation.episodes == 6

    def test_off_policy_transitions_equal_the_numpy_path(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """HATD3 on balance (warm-up, then exploration after an update round): tensors only, and the
        replay buffer holds the numpy path's transitions bit for bit."""
        results = []
        for numpy_envs in (False, True):
            stages = _build(_off_policy_pipeline(), numpy_envs)
            seen: list[str] = []
            _spy_on_steps(stages.collector.venv, seen)
            try:
                with monkeypatch.context() as patch:
                    if not numpy_envs:
                        _no_numpy(patch)
                    episodes = []
                    for _ in range(2):
                        episodes += stages.collector.collect(stages.buffer).episodes
                        stages.updater.update(stages.buffer, 0.0)
                    evaluation = stages.evaluator.evaluate()
            finally:
                stages.close()
            results.append((stages.buffer, episodes, evaluation, set(seen)))
        (buffer, episodes, evaluation, seen), (buffer_np, episodes_np, evaluation_np, seen_np) = results
        assert seen == {"Tensor"} and seen_np == {"ndarray"}
        assert buffer.size == 960 and not stages.collector.warming_up
        assert bool(buffer.terminated.any()) and episodes == episodes_np
        # the filled rows only (the rest is uninitialised memory)
        _same_storage(_Holder(buffer.state_dict()), _Holder(buffer_np.state_dict()))
        assert evaluation == evaluation_np


class _Holder:
    """Attributes from a dict (to compare a snapshot of a buffer's storage like a buffer)."""

    def __init__(self, values: dict[str, object]) -> None:
        vars(self).update(values)


class TestRestart:
    """A checkpoint's episode starts begin VMAS's episodes again as they began."""

    def test_restart_repeats_a_whole_batch_reset(self) -> None:
        """After all episodes ended together, a fresh env restarted from the episode starts
        continues exactly as the original (observations and rewards, step for step)."""
        config = VMASConfig(scenario="navigation", max_episode_steps=3)
        venv = make_vector_env(config, n_envs=4, seed=2)
        venv.reset()
        rng = np.random.default_rng(0)
        actions = [[torch.as_tensor(a) for a in _actions(venv, rng)] for _ in range(8)]
        for a in actions[:3]:
            step = venv.step(a)
        assert step.truncated.all()
        starts, obs = venv.episode_starts(), step.obs
        assert [s["steps"] for s in starts] == [0] * 4 and starts[0]["batch"]["seed"] is None
        after = [venv.step(a) for a in actions[3:]]

        again = make_vector_env(config, n_envs=4, seed=2)
        restarted, _, _ = again.restart(starts)
        assert all(torch.equal(x, y) for x, y in zip(restarted, obs))
        for a, expected in zip(actions[3:], after):
            step = again.step(a)
            assert torch.equal(step.rewards, expected.rewards) and torch.equal(step.state, expected.state)

    def test_an_env_reset_alone_falls_back_to_the_first_seed(self) -> None:
        """Once one env was reset alone (a terminated balance env), the starts hold no batch and
        restart begins every env from the constructor's seed."""
        config = VMASConfig(scenario="balance", max_episode_steps=100)
        venv = make_vector_env(config, n_envs=16, seed=0)
        first, _, _ = venv.reset()
        assert "batch" in venv.episode_starts()[0]
        rng = np.random.default_rng(0)
        while not venv.step(_actions(venv, rng)).terminated.any():
            pass
        starts = venv.episode_starts()
        assert "batch" not in starts[0] and any(s["steps"] == 0 for s in starts)
        obs, _, _ = make_vector_env(config, n_envs=16, seed=0).restart(starts)
        assert all(torch.equal(x, y) for x, y in zip(obs, first))

    def test_exact_resume_through_the_cli(self, tmp_path: Path) -> None:
        """HAPPO on navigation, rollouts of whole episodes: resuming from iteration 2 repeats rows 3 and 4."""
        from harl.cli import main
        from harl.logging.csv_log import read_metrics

        settings = {"collector.n_envs": 8, "collector.rollout_length": 20, "env.max_episode_steps": 20,
                    "run.total_env_steps": 640, "checkpoint.every_iterations": 1, "checkpoint.keep": 10,
                    "evaluator.episodes": 4, "evaluator.n_envs": 4, "evaluator.every_iterations": 2,
                    "logging.progress": "false", "policy.hidden_sizes": "[32]", "critic.hidden_sizes": "[32]"}
        pipeline = Path(__file__).parents[2] / "pipelines" / "happo_vmas_navigation.toml"
        args = [arg for key, value in settings.items() for arg in ("--set", f"{key}={value}")]
        whole, resumed = tmp_path / "whole", tmp_path / "resumed"
        assert main(["train", str(pipeline), *args, "--run-dir", str(whole)]) == 0
        shutil.copytree(whole, resumed)
        checkpoint = resumed / "checkpoints" / "iter_0000002.pt"
        assert main(["train", "--resume", str(resumed), "--checkpoint", str(checkpoint)]) == 0

        def rows(run: Path) -> list[dict[str, str]]:
            return [{k: v for k, v in row.items() if k not in ("wall_time", "steps_per_s")}
                    for row in read_metrics(run / "metrics.csv")]

        assert len(rows(whole)) == 4 and rows(resumed) == rows(whole)
        assert rows(whole)[-1]["eval_return"]
