"""harl.export: exported actors (TorchScript and ONNX) take harl's own deterministic actions.

Each team is a tiny trained run (two iterations); 1,000 random observations per agent (with
random action masks and GRU states where the team has them) go through harl's actors and
through the exported files, which must agree to 1e-5 (floats) or exactly (integers).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from gymnasium import spaces

from harl.cli import main
from harl.export import load_team
from harl.export.deploy import team_actors
from harl.nets.heads import avail_size
from harl.policy.agent_q import AgentQActor, AgentQNetworks
from harl.policy.on_policy import Actor
from tests.fakes import counting, images
from tests.train_briefly import train_briefly
from tests.value import fake_envs

pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.load` is deprecated:DeprecationWarning")
ROOT = Path(__file__).parents[2]
N = 1000
TINY_ON = ["collector.n_envs=2", "collector.rollout_length=10", "collector.backend=inline",
           "evaluator.episodes=1", "evaluator.n_envs=1", "logging.progress=false",
           "policy.hidden_sizes=[16,16]", "critic.hidden_sizes=[16,16]"]
TINY_OFF = ["collector.n_envs=2", "collector.rollout_length=10", "collector.warmup_steps=10",
            "collector.backend=inline", "buffer.batch_size=8", "evaluator.episodes=1", "evaluator.n_envs=1",
            "logging.progress=false", "policy.hidden_sizes=[16,16]", "critic.hidden_sizes=[16,16]"]
COUNTING_HAPPO = "\n".join([
    '[run]\nname = "counting"', '[env]\nkind = "counting"', '[collector]\nrollout_length = 6\nn_envs = 2',
    '[policy]\nhidden_sizes = [16]\nrecurrent = "{recurrent}"\nchunk_length = 3', '[critic]\nhidden_sizes = [16]',
    '[evaluator]\nepisodes = 1\nn_envs = 1', '[logging]\nprogress = false'])
COUNTING_HASAC = "\n".join([
    '[run]\nname = "counting-sac"', '[env]\nkind = "counting"',
    '[collector]\nkind = "off_policy"\nn_envs = 2\nrollout_length = 5\nwarmup_steps = 10\nupdates_per_round = 2',
    '[buffer]\nkind = "replay"\ncapacity = 40\nbatch_size = 8', '[returns]\nkind = "n_step"',
    '[critic]\nkind = "q"\ntwin = true\nhidden_sizes = [16]', '[updater.objective]\nkind = "sac"',
    '[policy]\nhidden_sizes = [16]', '[evaluator]\nepisodes = 1\nn_envs = 1', '[logging]\nprogress = false'])

IMAGES_HAPPO = COUNTING_HAPPO.replace('"counting"', '"images"').format(recurrent="none")
IMAGES_HASAC = COUNTING_HASAC.replace('"counting"', '"images"')
TINY_VALUE = ["buffer.batch_size=4", "evaluator.episodes=1", "evaluator.n_envs=1", "logging.progress=false"]
VALUE_GRU = ["updater.objective.recurrent=true", "updater.objective.last_action=true"]


def shipped_run(tmp: Path, pipeline: str, overrides: list[str], iterations: int = 2) -> Path:
    pytest.importorskip("mpe2", reason="the run uses MPE (pip install harl[mpe])")
    run = tmp / "run"
    train_briefly(ROOT / "pipelines" / pipeline, overrides, run, iterations)
    return run


def value_run(tmp: Path, overrides: list[str], pipeline: Path | None = None) -> Path:
    """The value family (agent Q networks) on the "guess" env, or on a shipped MPE pipeline."""
    assert fake_envs.GuessConfig  # registers the "guess" env kind
    run = tmp / "run"
    train_briefly(pipeline or ROOT / "tests" / "value" / "guess_qmix.toml", TINY_VALUE + overrides, run, 3)
    return run


def counting_run(tmp: Path, text: str, iterations: int = 2) -> Path:
    assert counting.CountingConfig and images.ImagesConfig  # registers the "counting" and "images" env kinds
    path, run = tmp / "p.toml", tmp / "run"
    path.write_text(text)
    train_briefly(path, [], run, iterations)
    return run


RUNS = {
    "happo_mpe": lambda tmp: shipped_run(tmp, "happo_mpe_spread.toml", TINY_ON + ["run.total_env_steps=40"]),
    "hasac_mpe": lambda tmp: shipped_run(tmp, "hasac_mpe_spread.toml", TINY_OFF + ["run.total_env_steps=40"], 3),
    "hatd3_mpe": lambda tmp: shipped_run(tmp, "hatd3_mpe_spread.toml", TINY_OFF + ["run.total_env_steps=40"], 3),
    "had3qn_mpe": lambda tmp: shipped_run(tmp, "had3qn_mpe_spread_discrete.toml", TINY_OFF + ["run.total_env_steps=40"], 3),
    "happo_counting": lambda tmp: counting_run(tmp, COUNTING_HAPPO.format(recurrent="none")),
    "happo_counting_gru": lambda tmp: counting_run(tmp, COUNTING_HAPPO.format(recurrent="naive")),
    "hasac_counting": lambda tmp: counting_run(tmp, COUNTING_HASAC, 3),
    "happo_images": lambda tmp: counting_run(tmp, IMAGES_HAPPO),
    "hasac_images": lambda tmp: counting_run(tmp, IMAGES_HASAC, 3),
    "qmix_guess": lambda tmp: value_run(tmp, []),
    "vdn_guess_gru": lambda tmp: value_run(tmp, VALUE_GRU + ["critic.kind=vdn",
                                                             "updater.objective.share_parameters=false"]),
    "iql_speaker_listener_gru": lambda tmp: value_run(
        tmp, VALUE_GRU + ["critic.kind=none", "env.scenario=simple_speaker_listener", "collector.n_envs=2",
                          "updater.objective.hidden_dim=16"],
        pytest.importorskip("mpe2") and ROOT / "pipelines" / "qmix_mpe_spread_discrete.toml"),
}
"""The teams: Box (clipped Gaussian means, tanh-bounded SAC and TD3), Discrete with masks, MultiDiscrete, dueling Q, GRU,
CNN encoders (uint8 images, exported as the flattened HWC pixels in float32); the value family's
greedy agent Qs (masked, a GRU with the previous action as input, agents of different spaces sharing
one network)."""


@pytest.fixture(scope="module", params=sorted(RUNS))
def run_dir(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return RUNS[request.param](tmp_path_factory.mktemp(request.param))


def random_inputs(team: Any, rng: np.random.Generator) -> list[dict[str, np.ndarray]]:
    """Per agent: N observations, masks with at least one allowed action per sub-action, GRU states."""
    per_agent = []
    for i, (dim, space) in enumerate(zip(team.observation_dims, team.action_spaces)):
        inputs = {"obs": (rng.standard_normal((N, dim)) * 3).astype(np.float32)}
        if team.masked and avail_size(space):
            sizes = [int(space.n)] if isinstance(space, spaces.Discrete) else list(np.asarray(space.nvec).ravel())
            parts = []
            for n in sizes:
                mask = (rng.random((N, n)) < 0.6).astype(np.float32)
                mask[np.arange(N), rng.integers(0, n, N)] = 1.0
                parts.append(mask)
            inputs["avail"] = np.concatenate(parts, 1)
        actor = team_actors(team.policy)[i]
        if (isinstance(actor, Actor) and actor.rnn is not None) or (isinstance(actor, AgentQActor) and actor.recurrent):
            inputs["hidden"] = rng.standard_normal((N, actor.hidden_size)).astype(np.float32)
        if isinstance(actor, AgentQActor) and actor.last_action:  # -1: an episode's first step
            inputs["last_action"] = rng.integers(-1, actor.n, N).astype(np.int64)
        per_agent.append(inputs)
    return per_agent


def harl_actions(team: Any, per_agent: list[dict[str, np.ndarray]]) -> list[tuple[np.ndarray, np.ndarray | None]]:
    """harl's own deterministic actions as the env receives them (and the next GRU state)."""
    if isinstance(team.policy, AgentQNetworks):
        return value_actions(team.policy, per_agent)
    out = []
    with torch.no_grad():
        for actor, space, inputs in zip(team_actors(team.policy), team.action_spaces, per_agent):
            obs = torch.as_tensor(inputs["obs"])
            avail = torch.as_tensor(inputs["avail"]) if "avail" in inputs else None
            hidden = None
            if isinstance(actor, Actor):
                h = torch.as_tensor(inputs["hidden"]) if "hidden" in inputs else None
                starts = torch.zeros(N) if h is not None else None
                action, _, hidden = actor.act(obs, avail, True, h, starts)
            else:  # off-policy actors: OffPolicyActors.act calls each actor's act
                action = actor.act(obs, avail, True)
            action = action.numpy()
            if isinstance(space, spaces.Box):  # every harl env adapter clips into the Box
                action = np.clip(action, space.low, space.high).reshape(N, *space.shape)
            else:
                action = action.astype(np.int64)
                action = action[:, 0] if isinstance(space, spaces.Discrete) else action
            out.append((action, None if hidden is None else hidden.numpy()))
    return out


def value_actions(policy: AgentQNetworks, per_agent: list[dict[str, np.ndarray]]
                  ) -> list[tuple[np.ndarray, np.ndarray | None]]:
    """The value team's own greedy step (``act``, every agent at once) on each agent's inputs."""
    def column(name: str, default: torch.Tensor) -> torch.Tensor:
        return torch.stack([torch.as_tensor(x[name]) if name in x else default for x in per_agent], 1)

    obs = [torch.as_tensor(x["obs"]) for x in per_agent]
    avail = [torch.as_tensor(x["avail"]) if "avail" in x else None for x in per_agent]
    hidden = (column("hidden", torch.zeros(N, policy.hidden_dim)), column("last_action", torch.full((N,), -1)))
    with torch.no_grad():
        actions, (h, _) = policy.act(obs, avail, True, hidden)
    return [(a[:, 0].numpy().astype(np.int64), h[:, i].numpy() if policy.recurrent else None)
            for i, a in enumerate(actions)]


def assert_same(i: int, got: np.ndarray, want: np.ndarray) -> None:
    assert got.shape == want.shape, f"agent {i}: shape {got.shape} != {want.shape}"
    if want.dtype == np.int64:
        assert got.dtype == np.int64 and np.array_equal(got, want), f"agent {i}: integer actions differ"
    else:
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-5, err_msg=f"agent {i}")


def test_torchscript_and_onnx_take_harls_deterministic_actions(run_dir: Path, tmp_path: Path) -> None:
    """On 1,000 observations per agent both exports equal harl's actions (1e-5; integers exactly)."""
    team = load_team(run_dir)
    per_agent = random_inputs(team, np.random.default_rng(0))
    want = harl_actions(team, per_agent)
    ts = tmp_path / "ts"
    assert main(["export", str(run_dir), "--format", "torchscript", "--out", str(ts)]) == 0
    manifest = json.loads((ts / "policy.json").read_text())
    for i, agent in enumerate(manifest["agents"]):
        module = torch.jit.load(str(ts / agent["file"]))
        inputs = [torch.as_tensor(per_agent[i][t["name"]]) for t in agent["inputs"]]
        with torch.no_grad():
            outputs = module(*inputs)
        assert_same(i, outputs[0].numpy(), want[i][0])
        if want[i][1] is not None:
            np.testing.assert_allclose(outputs[1].numpy(), want[i][1], rtol=0, atol=1e-5)
    ort = pytest.importorskip("onnxruntime", reason="ONNX export needs pip install harl[onnx]")
    ox = tmp_path / "onnx"
    assert main(["export", str(run_dir), "--format", "onnx", "--out", str(ox)]) == 0
    manifest = json.loads((ox / "policy.json").read_text())
    for i, agent in enumerate(manifest["agents"]):
        session = ort.InferenceSession(str(ox / agent["file"]), providers=["CPUExecutionProvider"])
        feeds = {t["name"]: per_agent[i][t["name"]] for t in agent["inputs"]}
        outputs = session.run(None, feeds)
        assert_same(i, outputs[0], want[i][0])
        if want[i][1] is not None:
            np.testing.assert_allclose(outputs[1], want[i][1], rtol=0, atol=1e-5)
