"""The compiled collection step (``harl.collect.compiled``) against the eager collector."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from harl.collect import compiled
from harl.collect.compiled import CompiledCollection, should_compile
from harl.compose import build_stages
from harl.config.loading import structure_pipeline
from harl.errors import ConfigError

SLOTS = ("actions", "log_probs", "values", "obs", "avail", "state", "rewards", "terminated", "truncated",
         "starts", "active", "final_values")


def pipeline(scenario: str, continuous: bool, critic: dict[str, Any], compile_mode: str = "off",
             **policy: Any) -> dict[str, Any]:
    return {
        "run": {"seed": 3, "total_env_steps": 10_000, "device": "cpu"},
        "env": {"kind": "mpe_torch", "scenario": scenario, "continuous_actions": continuous, "max_episode_steps": 7},
        "collector": {"n_envs": 4, "rollout_length": 10, "compile": compile_mode},
        "policy": {"hidden_sizes": [16, 16], **policy},
        "critic": {"hidden_sizes": [16], **critic},
        "evaluator": {"episodes": 2, "n_envs": 2},
    }


SPREAD = pipeline("simple_spread", True, {"kind": "v", "value_norm": True})
LISTENER = pipeline("simple_speaker_listener", False, {"kind": "independent_v", "share_parameters": False})
SHARED = {**pipeline("simple_spread", False, {"kind": "independent_v", "share_parameters": True},
                    share_parameters=True, batch_agents=True), "updater": {"kind": "simultaneous"}}


def no_compile(fn: Any, **_: Any) -> Any:
    """``torch.compile``'s stand-in: the graphs' Python runs as it is."""
    return fn


def rollouts(raw: dict[str, Any], count: int, compiler: Any = None, lengths: list[int] | None = None
             ) -> tuple[dict[str, Any], list[list[dict[str, Any]]]]:
    """``count`` rollouts from a fresh build, eager (``compiler`` None) or through the compiled step;
    ``lengths``: the envs' episodes first moved to these lengths (out of lockstep)."""
    torch.manual_seed(0)
    stages = build_stages(structure_pipeline(raw, "test"))
    try:
        collector, buffer = stages.collector, stages.buffer
        collector.start(buffer)
        if lengths is not None:
            states = stages.collector.venv.get_state()
            for state, length in zip(states, lengths):
                state["length"] = length
            states[0]["lockstep"] = None
            collector.venv.set_state(states)
        torch.manual_seed(1)
        episodes = []
        for k in range(count):
            if k:
                buffer.roll_over()
            if compiler is None:
                for t in range(buffer.length):
                    acting = collector.act(buffer, t)
                    step = collector.venv.step(collector.env_actions(acting))
                    buffer.insert(collector.observe(acting, step))
                    episodes.append(step.episode_infos)
            else:
                steps = CompiledCollection(collector.venv, collector.policy, collector.critic, buffer, compiler)
                episodes.append(steps.rollout())
        saved = {name: getattr(buffer, name) for name in SLOTS}
        saved = {name: [x.clone() for x in v if x is not None] if isinstance(v, list) else v.clone()
                 for name, v in saved.items()}
        saved["env"] = collector.venv.get_state()
        return saved, [e for e in episodes if e] if compiler is None else episodes
    finally:
        stages.close()


def flat(episodes: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    return [e for group in episodes for e in group]


def assert_same(a: dict[str, Any], b: dict[str, Any], exact: bool) -> None:
    for name in SLOTS:
        x, y = a[name], b[name]
        for u, v in zip(x, y) if isinstance(x, list) else [(x, y)]:
            if exact:
                assert torch.equal(u, v), name
            else:
                torch.testing.assert_close(u, v, rtol=1e-5, atol=1e-5, msg=name)
    assert [s["length"] for s in a["env"]] == [s["length"] for s in b["env"]]
    assert a["env"][0]["lockstep"] == b["env"][0]["lockstep"]


class TestTheStepsPython:
    """The compiled step's functions, run without compiling, equal the eager collector exactly."""

    @pytest.mark.parametrize("raw", [SPREAD, LISTENER, SHARED], ids=["spread-v", "listener-independent", "shared"])
    def test_same_rollouts_as_eager(self, raw: dict[str, Any]) -> None:
        """Two rollouts of 10 steps over episodes of 7: plain steps, ending steps, the carried episodes."""
        eager, eager_eps = rollouts(raw, 2)
        steps, steps_eps = rollouts(raw, 2, no_compile)
        assert_same(eager, steps, exact=True)
        assert flat(eager_eps) == flat(steps_eps)
        assert len(flat(steps_eps)) == 4 * 2  # every env ended an episode at steps 7 and 14

    def test_episodes_out_of_lockstep(self) -> None:
        """Envs whose episodes have run different lengths end at different steps (the host counts them)."""
        eager, eager_eps = rollouts(SPREAD, 2, lengths=[0, 3, 6, 2])
        steps, steps_eps = rollouts(SPREAD, 2, no_compile, lengths=[0, 3, 6, 2])
        assert_same(eager, steps, exact=True)
        assert flat(eager_eps) == flat(steps_eps)
        assert eager["env"][0]["lockstep"] is None


class TestAuto:
    def test_rule(self) -> None:
        """auto compiles once eager collection took as long as the expected compile; on/off always/never."""
        assert not should_compile("auto", 9.9, 10.0)
        assert should_compile("auto", 10.0, 10.0)
        assert should_compile("on", 0.0, 10.0) and not should_compile("off", 1e9, 0.0)

    def test_recorded_compile_time(self, tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
        """The cache folder remembers a step's compile time, for auto's estimate."""
        monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
        assert compiled.recorded_compile_s("abc") is None
        compiled.record_compile_s("abc", 12.3456)
        assert compiled.recorded_compile_s("abc") == 12.346
        assert compiled.cache_dir() == tmp_path

    def test_default_cache_folder(self, tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
        """Without TORCHINDUCTOR_CACHE_DIR: $XDG_CACHE_HOME/harl/inductor."""
        monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
        assert compiled.cache_dir() == tmp_path / "harl" / "inductor"

    def test_auto_stays_eager_until_the_collection_took_the_compile_time(
            self, tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
        """A recorded compile of an hour: auto collects eagerly (and never makes the compiled step)."""
        monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
        stages = build_stages(structure_pipeline(pipeline("simple_spread", True, {"kind": "v"}, "auto"), "t"))
        try:
            sig = compiled.signature(stages.collector.venv, stages.policy, stages.critic, stages.buffer.length)
            compiled.record_compile_s(sig, 3600.0)
            stages.collector.collect(stages.buffer)
            stages.collector.collect(stages.buffer)
            assert stages.collector.compiled is None and stages.collector._eager_s > 0
        finally:
            stages.close()


class TestChecks:
    def test_on_needs_the_torch_mpe(self) -> None:
        """compile = "on" with another env kind is refused at load time, naming the key."""
        raw = pipeline("simple_spread", True, {"kind": "v"}, "on")
        raw["env"] = {"kind": "mpe", "scenario": "simple_spread"}
        with pytest.raises(ConfigError, match=r'collector\.compile.*env\.kind = "mpe"'):
            structure_pipeline(raw, "test")

    def test_on_needs_feed_forward_networks(self) -> None:
        raw = pipeline("simple_spread", True, {"kind": "v"}, "on", recurrent="naive")
        with pytest.raises(ConfigError, match=r"collector\.compile.*recurrent"):
            structure_pipeline(raw, "test")

    def test_unknown_mode(self) -> None:
        raw = pipeline("simple_spread", True, {"kind": "v"}, "sometimes")
        with pytest.raises(ConfigError, match="sometimes"):
            structure_pipeline(raw, "test")


@pytest.mark.slow
class TestCompiled:
    """The real compiled graphs (inductor, C++ wrapper): equal to eager to float rounding."""

    @pytest.mark.parametrize("raw", [SPREAD, SHARED], ids=["spread-v", "shared-discrete"])
    def test_same_rollouts_as_eager(self, raw: dict[str, Any]) -> None:
        eager, eager_eps = rollouts(raw, 2)
        steps, steps_eps = rollouts(raw, 2, torch.compile)
        assert_same(eager, steps, exact=False)
        for e, c in zip(flat(eager_eps), flat(steps_eps)):
            assert e["length"] == c["length"] and e["return"] == pytest.approx(c["return"], abs=1e-4)


def test_first_calls_are_announced_and_their_time_recorded(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each graph's first call (where it compiles) is shown to the progress views and its seconds kept."""
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    said: list[str | None] = []
    monkeypatch.setattr(compiled, "announce", said.append)
    stages = build_stages(structure_pipeline(SPREAD, "test"))
    try:
        stages.collector.start(stages.buffer)
        steps = CompiledCollection(stages.collector.venv, stages.policy, stages.critic, stages.buffer, no_compile)
        steps.rollout()
        steps.rollout()
        assert said == ["compiling the collection step", None] * 2  # the plain step's graph, the ending one's
        assert compiled.recorded_compile_s(steps.signature) == pytest.approx(steps.compile_s, abs=1e-3)
    finally:
        stages.close()
