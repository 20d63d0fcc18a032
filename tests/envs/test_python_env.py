"""The "python" env kind: a factory path from the pipeline, checked with messages naming env.factory."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from harl.config.loading import structure_pipeline
from harl.envs.python_env import PythonEnvConfig, make_python_env
from harl.envs.vector import make_vector_env
from harl.errors import ConfigError
from harl.settings import InvalidSetting

EXAMPLE = "examples.custom_env:make_env"
NOT_CALLABLE = 42


def not_an_env() -> dict[str, int]:
    return {"n_agents": 2}


class _Mismatched:
    n_agents = 3
    observation_spaces = action_spaces = [None, None]
    state_space = None

    def reset(self, seed=None): ...

    def step(self, actions): ...

    def close(self): ...


def mismatched() -> _Mismatched:
    return _Mismatched()


def _message(env: dict) -> str:
    with pytest.raises(ConfigError) as caught:
        structure_pipeline({"env": {"kind": "python", **env}}, "p.toml")
    return str(caught.value)


class TestFactoryPath:
    def test_module_not_found(self) -> None:
        """A module that does not exist is named, with where it was looked for."""
        assert _message({"factory": "no_such_pkg.envs:make"}) == (
            'p.toml: env.factory: cannot import module "no_such_pkg.envs" (No module named '
            "'no_such_pkg'); it must be importable from sys.path or the current directory"
        )

    def test_attribute_missing(self) -> None:
        """A missing attribute is named, with the nearest existing one."""
        assert _message({"factory": "examples.custom_env:make_envv"}) == (
            'p.toml: env.factory: module "examples.custom_env" has no attribute "make_envv" '
            '(did you mean "make_env"?)'
        )

    def test_not_callable(self) -> None:
        """An attribute that is not callable is refused."""
        assert _message({"factory": "tests.envs.test_python_env:NOT_CALLABLE"}) == (
            'p.toml: env.factory: "tests.envs.test_python_env:NOT_CALLABLE" is int 42, not a '
            "callable that makes an env"
        )

    def test_bad_format(self) -> None:
        """A path without ":callable" (or a missing factory) says what to write."""
        expected = ('p.toml: env.factory: expected "module.path:callable" (e.g. '
                    '"my_pkg.my_env:make_env"), got "{}"')
        assert _message({"factory": "examples.custom_env"}) == expected.format("examples.custom_env")
        assert _message({}) == expected.format("")

    def test_module_that_raises(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """An error inside the user's module is reported as such, not as "not found"."""
        (tmp_path / "harl_broken_env.py").write_text("import no_such_dependency_xyz\n")
        monkeypatch.syspath_prepend(str(tmp_path))
        assert _message({"factory": "harl_broken_env:make"}) == (
            'p.toml: env.factory: importing "harl_broken_env" raised ModuleNotFoundError: '
            "No module named 'no_such_dependency_xyz'"
        )

    def test_kwargs_checked_against_the_signature(self) -> None:
        """An argument the factory does not take is reported under env.kwargs."""
        message = _message({"factory": EXAMPLE, "kwargs": {"max_step": 5}})
        assert message.startswith(
            'p.toml: env.kwargs: "examples.custom_env:make_env" cannot take these arguments: '
            "got an unexpected keyword argument 'max_step'; its signature is (max_steps: int = 25"
        )

    def test_kwargs_must_be_a_table(self) -> None:
        """kwargs is a table of any TOML values; anything else says how to write it."""
        assert _message({"factory": EXAMPLE, "kwargs": 3}) == (
            "p.toml: env.kwargs: expected a table, got 3; write it as a [env.kwargs] table"
        )


class TestBuilding:
    def test_returns_something_else(self) -> None:
        """A factory whose result lacks the protocol is a ConfigError naming env.factory."""
        config = PythonEnvConfig(factory="tests.envs.test_python_env:not_an_env")
        with pytest.raises(ConfigError) as caught:
            make_python_env(config)
        assert str(caught.value) == (
            "env.factory: \"tests.envs.test_python_env:not_an_env\" returned dict {'n_agents': 2}, "
            "which is not a MultiAgentEnv (missing: n_agents, observation_spaces, action_spaces, "
            "state_space, reset, step, close); see the protocol in harl/envs/protocol.py"
        )

    def test_space_counts_must_match_n_agents(self) -> None:
        """Per-agent space lists must have one entry per agent."""
        with pytest.raises(ConfigError, match="n_agents = 3 but 2 observation_spaces, 2 action_spaces"):
            make_python_env(PythonEnvConfig(factory="tests.envs.test_python_env:mismatched"))

    def test_kwargs_reach_the_factory(self) -> None:
        """[env.kwargs] are passed as keyword arguments."""
        env = make_python_env(PythonEnvConfig(factory=EXAMPLE, kwargs={"max_steps": 2}))
        env.reset(seed=0)
        steps = [env.step([np.zeros(2, np.float32), np.array([1, 1])]) for _ in range(2)]
        assert [s.truncated for s in steps] == [False, True]

    def test_subprocess_workers_build_it(self) -> None:
        """Worker processes import the factory too (they inherit sys.path)."""
        config = PythonEnvConfig(factory=EXAMPLE)
        venv = make_vector_env(config, n_envs=2, backend="subprocess", workers=2, seed=0)
        try:
            obs, state, avail = venv.reset()
            assert [o.shape for o in obs] == [(2, 4), (2, 6)] and state.shape == (2, 6) and avail is None
        finally:
            venv.close()

    def test_module_next_to_the_current_directory(self, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
        """A module in the current directory is found even when it is not on sys.path."""
        (tmp_path / "harl_cwd_env.py").write_text(textwrap.dedent("""
            from examples.custom_env import make_env as make
        """))
        monkeypatch.chdir(tmp_path)
        monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
        monkeypatch.delitem(sys.modules, "harl_cwd_env", raising=False)
        config = PythonEnvConfig(factory="harl_cwd_env:make")
        assert make_python_env(config).n_agents == 2
        sys.modules.pop("harl_cwd_env", None)


def test_config_errors_are_invalid_settings() -> None:
    """Constructed directly, a bad config raises InvalidSetting with the key."""
    with pytest.raises(InvalidSetting) as caught:
        PythonEnvConfig(factory="examples.custom_env:nope")
    assert caught.value.key == "factory"


def test_kwargs_round_trip_through_the_resolved_pipeline() -> None:
    """[env.kwargs] is written back as a table and reads back equal (harl train runs/<run>/pipeline.toml)."""
    from harl.config.dump import dump_pipeline
    from harl.config.loading import parse_toml

    spec = structure_pipeline({"env": {"kind": "python", "factory": EXAMPLE,
                                       "kwargs": {"max_steps": 5, "step_size": 0.2}}}, "p.toml")
    text = dump_pipeline(spec)
    assert "[env.kwargs]\nmax_steps = 5\nstep_size = 0.2\n" in text
    assert structure_pipeline(parse_toml(text, "dumped"), "dumped") == spec
