"""PQN's export: each agent's ``PQNActor`` (and the files ``harl export`` writes of it) takes the
policy's own greedy actions, step after step, with the GRU state carried and restarted."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from gymnasium import spaces

import harl
from harl.cli import main
from harl.export import load_team
from harl.nets.heads import avail_size
from harl.policy.pqn import PQNPolicy, PQNPolicyConfig
from tests.train_briefly import train_briefly

pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.load` is deprecated:DeprecationWarning")
ROOT = Path(__file__).parents[2]
STEPS = 5
BATCH = 64
OBS_DIMS, N_ACTIONS = (5, 3, 4), (4, 2, 3)
"""Agents of different observation and action sizes sharing the one network (padding, own actions)."""
GRU_BN = PQNPolicyConfig(hidden_sizes=(16, 16), norm="batch_norm", input_norm=True, recurrent="gru")
"""pqn-vdn_smax_3m.toml's network, narrow: input BatchNorm, BatchNorm after each Linear, a GRU."""


def tiny_policy(config: PQNPolicyConfig) -> PQNPolicy:
    """A PQN policy with BatchNorm running averages moved off their start (so eval mode matters)."""
    torch.manual_seed(0)
    policy = PQNPolicy([spaces.Box(-1, 1, (d,)) for d in OBS_DIMS], [spaces.Discrete(n) for n in N_ACTIONS], config)
    policy.net.features(torch.randn(32, len(OBS_DIMS), policy.in_dim) * 2 + 1)  # train mode: updates the averages
    return policy


def random_step(rng: np.random.Generator) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Observations and masks (at least one allowed action per row) for each agent."""
    obs = [torch.as_tensor(rng.standard_normal((BATCH, d)) * 3, dtype=torch.float32) for d in OBS_DIMS]
    avail = []
    for n in N_ACTIONS:
        mask = (rng.random((BATCH, n)) < 0.6).astype(np.float32)
        mask[np.arange(BATCH), rng.integers(0, n, BATCH)] = 1.0
        avail.append(torch.as_tensor(mask))
    return obs, avail


@pytest.mark.parametrize("config", [PQNPolicyConfig(hidden_sizes=(16, 16)),
                                    PQNPolicyConfig(hidden_sizes=(16,), dueling=True), GRU_BN],
                         ids=["layer_norm", "dueling", "gru_batch_norm"])
def test_each_agents_actor_takes_the_policys_greedy_actions(config: PQNPolicyConfig) -> None:
    """Over five steps (a GRU's state carried; episodes starting at step 0 everywhere and at step 2 in
    half the envs) every agent's actor gives the policy's ``act(deterministic=True)`` action, its own
    Q values and the policy's next GRU state; the policy stays in the mode it was in."""
    policy = tiny_policy(config)
    actors = policy.export_actors()
    rng = np.random.default_rng(0)
    hidden = policy.initial_hidden(BATCH, "cpu")
    mine: list[torch.Tensor | None] = [None] * len(actors)
    for t in range(STEPS):
        starts = torch.ones(BATCH) if t == 0 else (torch.arange(BATCH) % 2 == 0).float() * (t == 2)
        obs, avail = random_step(rng)
        want, hidden = policy.act(obs, avail, True, hidden, starts)
        for i, actor in enumerate(actors):
            h = mine[i]
            with torch.no_grad():  # an episode's start: zeros, as a deployment passes them
                action, q, mine[i] = actor(obs[i], avail[i], None if h is None else h * (1 - starts).unsqueeze(-1))
            assert q.shape == (BATCH, N_ACTIONS[i])
            assert torch.equal(action, want[i][:, 0].long()), f"step {t}, agent {i}"
            h = mine[i]
            assert (h is None) == (not policy.recurrent)
            if h is not None:
                assert torch.allclose(h, hidden[:, i], atol=1e-6)
    assert policy.net.training


SMALL = ["collector.n_envs=4", "collector.rollout_length=10", "run.total_env_steps=200", "updater.epochs=1",
         "updater.minibatches=2", "policy.hidden_sizes=[16]", "evaluator.episodes=1", "evaluator.n_envs=1",
         "logging.progress=false", "run.torch_threads=1"]
"""Five rollouts of 4 torch-MPE envs x 10 steps: 200 env steps, a few seconds."""
RUNS = {
    "vdn_ff": ("pqn-vdn_mpe_torch_spread.toml", []),
    "iql_gru_batch_norm": ("pqn-iql_mpe_torch_spread.toml", ["policy.recurrent=gru", "policy.norm=batch_norm",
                                                             "policy.input_norm=true", "buffer.memory_window=2"]),
}


@pytest.fixture(scope="module", params=sorted(RUNS))
def run_dir(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    pipeline, extra = RUNS[request.param]
    run = tmp_path_factory.mktemp(request.param) / "run"
    train_briefly(ROOT / "pipelines" / pipeline, SMALL + extra, run, iterations=5)
    return run


Step = tuple[list[np.ndarray], list[np.ndarray] | None]
"""One step of every agent's observations and (where the env masks actions) action masks."""


def random_steps(run: Path) -> list[Step]:
    """Five steps of random observations (and masks with at least one allowed action) for the run's agents."""
    team = load_team(run)
    rng = np.random.default_rng(1)
    steps: list[Step] = []
    for _ in range(STEPS):
        obs = [(rng.standard_normal((BATCH, d)) * 2).astype(np.float32) for d in team.observation_dims]
        avail = None
        if team.masked:
            sizes = [avail_size(s) for s in team.action_spaces]
            avail = [(rng.random((BATCH, n)) < 0.6).astype(np.float32) for n in sizes]
            for mask, n in zip(avail, sizes):
                mask[np.arange(BATCH), rng.integers(0, n, BATCH)] = 1.0
        steps.append((obs, avail))
    return steps


def harl_steps(run: Path, steps: list[Step]) -> list[list[np.ndarray]]:
    """The run's policy's greedy actions at each step (state carried, an episode's start first)."""
    policy = load_team(run).policy
    assert isinstance(policy, PQNPolicy)
    hidden, out = None, []
    for t, (obs, avail) in enumerate(steps):
        starts = torch.full((BATCH,), float(t == 0))
        masks = None if avail is None else [torch.as_tensor(a) for a in avail]
        actions, hidden = policy.act([torch.as_tensor(o) for o in obs], masks, True, hidden, starts)
        out.append([a[:, 0].numpy().astype(np.int64) for a in actions])
    return out


def test_harl_export_loads_back_with_the_policys_actions(run_dir: Path, tmp_path: Path) -> None:
    """``harl export`` (TorchScript) of a trained PQN run, loaded with ``harl.load_policy``, and the run
    itself loaded so, act as the run's policy does over five steps; the manifest names a Q actor."""
    steps = random_steps(run_dir)
    want = harl_steps(run_dir, steps)
    out = tmp_path / "ts"
    assert main(["export", str(run_dir), "--format", "torchscript", "--out", str(out)]) == 0
    manifest = json.loads((out / "policy.json").read_text())
    assert [a["distribution"] for a in manifest["agents"]] == ["q"] * 3
    recurrent = "gru" in run_dir.parent.name
    assert all(("hidden" in [t["name"] for t in a["inputs"]]) == recurrent for a in manifest["agents"])
    for source in (out, run_dir):
        team, hidden = harl.load_policy(source), None
        for t, (obs, avail) in enumerate(steps):
            actions, hidden = team.act(obs, avail, hidden=hidden)
            for i, (got, expected) in enumerate(zip(actions, want[t])):
                assert np.array_equal(got, expected), f"{source.name}: step {t}, agent {i}"


def test_onnx_export_takes_the_policys_actions(run_dir: Path, tmp_path: Path) -> None:
    """``harl export --format onnx``: onnxruntime, its GRU state fed back, gives the run's actions."""
    ort = pytest.importorskip("onnxruntime", reason="ONNX export needs pip install harl[onnx]")
    steps = random_steps(run_dir)
    want = harl_steps(run_dir, steps)
    out = tmp_path / "onnx"
    assert main(["export", str(run_dir), "--format", "onnx", "--out", str(out)]) == 0
    agents = json.loads((out / "policy.json").read_text())["agents"]
    sessions = [ort.InferenceSession(str(out / a["file"]), providers=["CPUExecutionProvider"]) for a in agents]
    hidden = [np.zeros((BATCH, a["hidden_size"]), np.float32) for a in agents]
    for t, (obs, avail) in enumerate(steps):
        for i, (agent, session) in enumerate(zip(agents, sessions)):
            feeds = {"obs": obs[i], "avail": None if avail is None else avail[i], "hidden": hidden[i]}
            outputs = session.run(None, {x["name"]: feeds[x["name"]] for x in agent["inputs"]})
            assert np.array_equal(outputs[0], want[t][i]), f"step {t}, agent {i}"
            if agent["hidden_size"]:
                hidden[i] = outputs[1]
