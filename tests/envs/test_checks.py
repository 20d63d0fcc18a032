"""harl.envs.checks: a user's custom env that breaks the protocol is named precisely."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from harl.buffers.rollout import RolloutBuffer
from harl.cli import main
from harl.collect.on_policy import OnPolicyCollector, OnPolicyCollectorConfig
from harl.envs.checks import FULL_CHECK_STEPS, check_finite, stack_avail
from harl.envs.python_env import PythonEnvConfig
from harl.envs.vector import make_vector_env
from harl.errors import EnvCrashedError, EnvProtocolError, NonFiniteError
from harl.policy.on_policy import OnPolicyActors, PolicyConfig
from harl.update.v_critic import VCritic, VCriticConfig
from tests.fakes.bad_env import write_pipeline

FACTORY = "tests.fakes.bad_env:make"
NAME = f'python env "{FACTORY}"'
TAIL = "; see the MultiAgentEnv protocol in harl/envs/protocol.py"
ROOT = Path(__file__).parents[2]


def venv(mode: str, backend: str = "inline", n_envs: int = 2, **kwargs: Any) -> Any:
    return make_vector_env(PythonEnvConfig(factory=FACTORY, kwargs={"mode": mode, **kwargs}), n_envs, backend)


def actions(n: int = 2) -> list[np.ndarray]:
    return [np.zeros((n, 1), dtype=np.float32), np.zeros((n, 1), dtype=np.int64)]


def first_error(mode: str, backend: str = "inline") -> str:
    """The message of the first error the env's reset or first steps raise."""
    env = venv(mode, backend)
    try:
        with pytest.raises((EnvProtocolError, NonFiniteError, EnvCrashedError)) as caught:
            env.reset(seed=0)
            for _ in range(3):
                env.step(actions())
    finally:
        env.close()
    return str(caught.value)


class TestProtocolViolations:
    """Each mistake a user makes in a custom env, with the exact message it gets."""

    @pytest.mark.parametrize(("mode", "what"), [
        ("obs_count", "reset() obs: expected a list of 2 observations (one per agent), got 1 observations"),
        ("obs_shape", "reset() agent 1 obs: expected shape (3,), got (5,)"),
        ("reset_two", "reset() returned a tuple of 2 values, expected a tuple (obs, state, avail) with avail "
                      "None where the env has no masks"),
        ("reward_shape", "step() rewards: expected shape (2,), got (1,)"),
        ("reward_str", "step() rewards: expected numbers of shape (2,), got a list of 2 values ['good', 'bad']"),
        ("step_tuple", "step() returned a tuple of 8 values, expected harl.envs.protocol.EnvStep(obs, state, "
                       "avail, rewards, terminated, truncated, active=None, info={})"),
        ("step_none", "step() returned None, expected harl.envs.protocol.EnvStep("),
        ("avail_wrong_len", "reset() agent 1 avail: expected a mask of shape (4,) for Discrete(4), got shape (3,)"),
        ("avail_box", "reset() agent 0 avail: a mask of 2 entries for a Box action space, which has no "
                      "discrete choices to mask; give None for this agent"),
    ])
    def test_inline(self, mode: str, what: str) -> None:
        """The message names the env kind and factory, the env index, the agent and the field."""
        message = first_error(mode)
        assert message.startswith(f"{NAME}, environment 0: {what}")
        assert message.endswith(TAIL)

    def test_subprocess_reports_the_same_message(self) -> None:
        """Under the subprocess backend the worker's report carries the same precise message."""
        message = first_error("reward_shape", "subprocess")
        assert message == (
            "Environment worker 0 (hosting env 0) raised harl.errors.EnvProtocolError: "
            f"{NAME}, environment 0: step() rewards: expected shape (2,), got (1,){TAIL} while stepping. "
            'Try [collector] backend = "inline" to see the full traceback.')

    def test_constructor_exception_inline(self) -> None:
        """An exception in the env's constructor names the factory instead of a raw traceback."""
        with pytest.raises(EnvCrashedError) as caught:
            venv("ctor_raises")
        assert str(caught.value) == (f'env.factory: "{FACTORY}" raised ValueError: unknown map \'x\' while '
                                     "building the environment")

    def test_constructor_exception_cli(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """harl train with such an env exits 2 with that one paragraph."""
        pipeline = write_pipeline(tmp_path / "bad.toml", "ctor_raises")
        assert main(["train", str(pipeline), "--run-dir", str(tmp_path / "run")]) == 2
        err = capsys.readouterr().err
        assert "raised ValueError: unknown map 'x' while building the environment" in err
        assert "Traceback" not in err

    def test_checks_stop_after_the_first_steps(self) -> None:
        """The full check runs on the first FULL_CHECK_STEPS vector steps only (finite checks always)."""
        env = venv("ok")
        env.reset(seed=0)
        for _ in range(FULL_CHECK_STEPS):
            env.step(actions())
        assert not env._check.active
        env.close()


class TestCastsAndMasks:
    def test_float64_observations_are_cast(self) -> None:
        """float64 observations and states come out float32, as the buffers and networks need."""
        env = venv("float64")
        obs, state, _ = env.reset(seed=0)
        step = env.step(actions())
        assert [o.dtype for o in obs + step.obs] == [np.float32] * 4
        assert state.dtype == step.state.dtype == step.final_state.dtype == np.float32
        env.close()

    def test_per_agent_none_mask_means_no_mask(self) -> None:
        """avail = [None, mask]: agent 0 gets an empty mask (Box), agent 1 its mask, stacked per env."""
        env = venv("ok")
        _, _, avail = env.reset(seed=0)
        assert avail[0].shape == (2, 0)
        assert avail[1].tolist() == [[1, 1, 1, 0]] * 2
        env.close()

    def test_stack_avail_fills_missing_masks_with_ones(self) -> None:
        """A None for one env or one agent stands for "all allowed"; all None stays None."""
        mask = np.array([1, 0, 1], dtype=np.float32)
        stacked = stack_avail([[None, mask], None], [0, 3])
        assert stacked[0].shape == (2, 0)
        assert stacked[1].tolist() == [[1, 0, 1], [1, 1, 1]]
        assert stack_avail([None, None], [0, 3]) is None

    def test_collector_with_a_mask_for_one_agent_only(self) -> None:
        """The mixed team that crashed the collector (object arrays) collects, masked actions never taken."""
        env = venv("ok")
        policy = OnPolicyActors(env.observation_spaces, env.action_spaces, PolicyConfig(hidden_sizes=(8,)))
        critic = VCritic(4, 2, VCriticConfig(hidden_sizes=(8,)))
        buffer = RolloutBuffer(env.observation_spaces, env.action_spaces, 4, 2, 20, fp_state=False)
        collector = OnPolicyCollector(OnPolicyCollectorConfig(rollout_length=20, n_envs=2), env, policy,
                                      critic, torch.device("cpu"), seed=0)
        stats = collector.collect(buffer)  # the env raises if agent 1 takes action 3
        assert stats.env_steps == 40
        assert buffer.avail[0] is None and buffer.avail[1][:, :, 3].sum() == 0
        env.close()


class TestNonFinite:
    @pytest.mark.parametrize(("mode", "what"), [
        ("nan_reward", "environment 0, agent 1: rewards holds nan"),
        ("inf_obs", "environment 0, agent 0: obs holds inf"),
    ])
    def test_env_output(self, mode: str, what: str) -> None:
        """A NaN reward or an infinite observation after the checked steps still names env, agent, field."""
        env = venv(mode, at=FULL_CHECK_STEPS + 3)
        env.reset(seed=0)
        for _ in range(FULL_CHECK_STEPS + 2):
            env.step(actions())
        with pytest.raises(NonFiniteError) as caught:
            env.step(actions())
        assert str(caught.value) == (
            f"{NAME}, {what} (NaN or infinity); harl trains only on finite numbers: fix the environment "
            "(clip or guard the computation) or wrap it to replace them")
        env.close()

    def test_check_finite_locates_the_env(self) -> None:
        """The first bad entry of a batch names its env (and, for rewards, its agent)."""
        rewards = np.zeros((3, 2), dtype=np.float32)
        rewards[2, 1] = -np.inf
        with pytest.raises(NonFiniteError, match="^e, environment 2, agent 1: rewards holds -inf"):
            check_finite("e", "rewards", rewards)


class TestBlankImages:
    """An env whose images never change (it does not draw its screen) is named once, after the full checks."""

    def run(self, blank_agent: int, steps: int = FULL_CHECK_STEPS) -> list[str]:
        from tests.fakes.images import ImagesConfig

        env = make_vector_env(ImagesConfig(blank_agent=blank_agent), 2, "inline")
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                env.reset(seed=0)
                for _ in range(steps):
                    env.step([np.zeros((2,), dtype=np.int64)] * 2)
        finally:
            env.close()
        return [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]

    def test_a_black_agent_is_named_after_the_last_full_check(self):
        assert self.run(1, FULL_CHECK_STEPS - 1) == []
        (message,) = self.run(1, FULL_CHECK_STEPS + 3)
        assert message.startswith('images env: the image observations of agent(s) 1 were one flat colour in '
                                  f"every env, at every reset and for the first {FULL_CHECK_STEPS} steps")
        assert 'render_mode = "rgb_array"' in message

    def test_lit_images_give_no_warning(self):
        assert self.run(-1, FULL_CHECK_STEPS + 3) == []
