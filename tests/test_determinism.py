"""Bit-for-bit CPU determinism and exact resume, end to end through the CLI.

metrics.csv is compared on every column except the wall-clock ones (``wall_time``,
``steps_per_s``), which measure this machine and differ from run to run; since the file
holds 6 significant digits, the final checkpoints (networks, optimisers, generators) are
compared too, tensor by tensor, bit for bit.
"""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path

import numpy as np
import pytest
import torch

from harl.cli import main
from harl.collect.on_policy import OnPolicyCollector
from harl.logging.csv_log import read_metrics
from harl.rundir.checkpoint import latest_checkpoint, list_checkpoints, load_checkpoint

pytest.importorskip("mpe2", reason="these runs use MPE (pip install harl[mpe])")

ROOT = Path(__file__).parents[1]
HAPPO = ROOT / "pipelines" / "happo_mpe_spread.toml"
MAPPO_DISCRETE = ROOT / "pipelines" / "mappo_mpe_spread.toml"
WALL_CLOCK = ("wall_time", "steps_per_s")


def settings(**extra: object) -> list[str]:
    """Five iterations of 2 envs x 50 steps (episodes of 25 end on rollout boundaries),
    evaluated every 2 iterations, a checkpoint after every iteration; small networks."""
    values: dict[str, object] = {
        "collector.n_envs": 2, "collector.rollout_length": 50, "run.total_env_steps": 500,
        "evaluator.episodes": 3, "evaluator.n_envs": 2, "evaluator.every_iterations": 2,
        "policy.hidden_sizes": "[32,32]", "critic.hidden_sizes": "[32,32]", "updater.objective.epochs": 2,
        "checkpoint.every_iterations": 1, "checkpoint.keep": 100, "logging.progress": "false", **extra,
    }
    return [arg for key, value in values.items() for arg in ("--set", f"{key}={value}")]


def rows(run_dir: Path) -> list[dict[str, str]]:
    """metrics.csv without the wall-clock columns."""
    return [{k: v for k, v in row.items() if k not in WALL_CLOCK} for row in read_metrics(run_dir / "metrics.csv")]


def same(a: object, b: object) -> bool:
    """Equal, with tensors and arrays compared element by element (bit for bit)."""
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and np.array_equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def same_final_state(first: Path, second: Path) -> bool:
    """The newest checkpoints hold the same state, wall-clock time and pipeline text aside."""
    a, b = (load_checkpoint(latest_checkpoint(d)) for d in (first, second))
    for state in (a, b):
        state["counters"].pop("wall_time")
        state.pop("pipeline")  # may differ in [checkpoint] settings
        state.pop("metrics", None)  # the rows so far, with their wall-clock columns (rows() compares the rest)
    return same(a, b)


def train(pipeline: Path, run_dir: Path, *extra: str) -> Path:
    assert main(["train", str(pipeline), *settings(), *extra, "--run-dir", str(run_dir)]) == 0
    return run_dir


@pytest.fixture(scope="module")
def happo_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One uninterrupted HAPPO run, the reference of the tests below (do not modify it)."""
    return train(HAPPO, tmp_path_factory.mktemp("happo") / "run")


def test_same_seed_same_metrics(tmp_path: Path, happo_run: Path) -> None:
    """Two runs of one pipeline and seed write the same metrics.csv, wall-clock columns aside."""
    second = train(HAPPO, tmp_path / "b")
    header = (happo_run / "metrics.csv").read_text().splitlines()[0]
    assert header == (second / "metrics.csv").read_text().splitlines()[0]
    assert rows(happo_run) == rows(second)
    assert len(rows(second)) == 5
    assert same_final_state(happo_run, second)


def test_another_seed_other_metrics(tmp_path: Path) -> None:
    """A different seed gives different numbers (the comparison above is not vacuous)."""
    first = train(HAPPO, tmp_path / "a", "--set", "run.total_env_steps=100")
    second = train(HAPPO, tmp_path / "b", "--set", "run.total_env_steps=100", "--set", "run.seed=2")
    assert rows(first) != rows(second)


def resume_from_3(whole: Path, resumed: Path) -> None:
    shutil.copytree(whole, resumed)
    checkpoint = resumed / "checkpoints" / "iter_0000003.pt"
    assert main(["train", "--resume", str(resumed), "--checkpoint", str(checkpoint)]) == 0
    assert [r["iteration"] for r in rows(resumed)] == ["1", "2", "3", "4", "5"]


def test_resume_from_checkpoint_k_repeats_rows_k_plus_1_to_n(tmp_path: Path, happo_run: Path) -> None:
    """Resuming from the checkpoint of iteration 3 writes rows 4 and 5 as the uninterrupted run did."""
    resume_from_3(happo_run, tmp_path / "resumed")
    assert rows(tmp_path / "resumed") == rows(happo_run)
    assert same_final_state(tmp_path / "resumed", happo_run)


def test_exact_resume_with_one_shared_discrete_actor(tmp_path: Path) -> None:
    """The same for MAPPO (one shared actor) with Discrete actions."""
    whole = train(MAPPO_DISCRETE, tmp_path / "whole", "--set", "env.continuous_actions=false")
    resume_from_3(whole, tmp_path / "resumed")
    assert rows(tmp_path / "resumed") == rows(whole)
    assert same_final_state(tmp_path / "resumed", whole)


GRU = ROOT / "pipelines" / "happo_mpe_speaker_listener_gru.toml"


def test_exact_resume_with_gru_actors_and_critic(tmp_path: Path) -> None:
    """HAPPO with chunked GRU actors and critic (speaker-listener): resuming from iteration 3 repeats
    rows 4 and 5.  At the checkpoint every env is at an episode's first step, where the GRU states
    the collector carries are reset, so the checkpoint holds none and needs none."""
    whole = train(GRU, tmp_path / "whole")
    saved = load_checkpoint(whole / "checkpoints" / "iter_0000003.pt")
    assert [start["steps"] for start in saved["collector"]["episode_starts"]] == [0, 0]
    assert "buffer" not in saved  # no rollout storage, hence no GRU states
    resume_from_3(whole, tmp_path / "resumed")
    assert rows(tmp_path / "resumed") == rows(whole)
    assert same_final_state(tmp_path / "resumed", whole)


def test_ctrl_c_stops_after_the_iteration_and_resumes_exactly(tmp_path: Path, happo_run: Path,
                                                              monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """Ctrl-C during iteration 3 finishes it, checkpoints, exits 130; resume then matches an uninterrupted run."""
    collect = OnPolicyCollector.collect
    calls = []

    def collect_and_press_ctrl_c(self: OnPolicyCollector, buffer: object) -> object:
        calls.append(1)
        if len(calls) == 3:
            os.kill(os.getpid(), signal.SIGINT)
        return collect(self, buffer)

    monkeypatch.setattr(OnPolicyCollector, "collect", collect_and_press_ctrl_c)
    stopped = tmp_path / "stopped"
    args = ["train", str(HAPPO), *settings(**{"checkpoint.every_iterations": 50}), "--run-dir", str(stopped)]
    assert main(args) == 130
    out = capsys.readouterr()
    assert "Ctrl-C: stopping after this iteration, with a checkpoint (Ctrl-C again to stop now)" in out.err
    assert "stopped: 3 iterations, 300 env steps" in out.out
    assert [p.name for p in list_checkpoints(stopped)] == ["iter_0000003.pt"]
    monkeypatch.undo()
    assert main(["train", "--resume", str(stopped)]) == 0
    assert rows(stopped) == rows(happo_run)
    assert same_final_state(stopped, happo_run)


HATD3 = ROOT / "pipelines" / "hatd3_mpe_spread.toml"


def off_policy_settings(**extra: object) -> list[str]:
    """Five iterations of 2 envs x 25 steps (one episode each), warm-up over after two,
    small batches and networks, a checkpoint after every iteration."""
    values: dict[str, object] = {
        "collector.n_envs": 2, "collector.rollout_length": 25, "collector.updates_per_round": 4,
        "collector.warmup_steps": 100, "buffer.capacity": 10_000, "buffer.batch_size": 32,
        "run.total_env_steps": 250, "evaluator.episodes": 2, "evaluator.n_envs": 2,
        "evaluator.every_iterations": 2, "policy.hidden_sizes": "[32,32]", "critic.hidden_sizes": "[32,32]",
        "checkpoint.every_iterations": 1, "checkpoint.keep": 100, "logging.progress": "false", **extra,
    }
    return [arg for key, value in values.items() for arg in ("--set", f"{key}={value}")]


def test_off_policy_exact_resume_with_the_replay_buffer(tmp_path: Path) -> None:
    """HATD3 with ``[checkpoint] replay_buffer = true``: resuming from iteration 3 repeats rows 4 and 5;
    the checkpoint then holds the buffer's filled rows (it is larger than without them)."""
    without = tmp_path / "without"
    assert main(["train", str(HATD3), *off_policy_settings(), "--run-dir", str(without)]) == 0
    whole = tmp_path / "whole"
    args = ["train", str(HATD3), *off_policy_settings(**{"checkpoint.replay_buffer": "true"}), "--run-dir", str(whole)]
    assert main(args) == 0
    name = "iter_0000003.pt"
    assert "buffer" in load_checkpoint(whole / "checkpoints" / name)
    assert "buffer" not in load_checkpoint(without / "checkpoints" / name)
    assert (whole / "checkpoints" / name).stat().st_size > (without / "checkpoints" / name).stat().st_size
    resume_from_3(whole, tmp_path / "resumed")
    assert rows(tmp_path / "resumed") == rows(whole)
    assert rows(whole)[-1]["critic_loss"] not in ("", None)  # updates ran after the checkpoint
    assert same_final_state(tmp_path / "resumed", whole)
