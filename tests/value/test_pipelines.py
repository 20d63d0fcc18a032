"""IQL, VDN and QMIX end to end: learning on a tiny env, exact resume, bad input, ``harl stages``."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import tests.value.fake_envs  # noqa: F401 - registers the "guess" env kind
from harl.cli import main
from harl.config.dump import describe_stages
from harl.logging.csv_log import read_metrics
from harl.rundir.checkpoint import load_checkpoint

HERE = Path(__file__).parent
GUESS = HERE / "guess_qmix.toml"
ROOT = HERE.parents[1]
WALL_CLOCK = ("wall_time", "steps_per_s")
VALUE_KINDS = {"collector": ["episodes"], "buffer": ["episodes"], "returns": ["episode_td"],
               "critic": ["none", "vdn", "qmix"], "updater": ["q_learning"], "updater.objective": ["joint_td"]}


def sets(**values: object) -> list[str]:
    return [arg for key, value in values.items() for arg in ("--set", f"{key}={value}")]


def rows(run_dir: Path) -> list[dict[str, str]]:
    return [{k: v for k, v in r.items() if k not in WALL_CLOCK} for r in read_metrics(run_dir / "metrics.csv")]


@pytest.mark.parametrize("mixer", ["none", "vdn", "qmix"])
def test_each_mixer_learns_the_guessing_game(tmp_path: Path, mixer: str) -> None:
    """IQL, VDN and QMIX reach the greedy return of 4 (both agents name the target at every step)
    within 3,200 env steps; the first evaluation (untrained, greedy) is below it."""
    run = tmp_path / "run"
    assert main(["train", str(GUESS), *sets(**{"critic.kind": mixer, "run.total_env_steps": 3200}),
                 "--run-dir", str(run)]) == 0
    evals = [float(r["eval_return"]) for r in read_metrics(run / "metrics.csv") if r["eval_return"]]
    assert evals[0] < 4.0
    assert evals[-1] == 4.0


def test_a_gru_team_with_last_actions_and_td_lambda_learns_too(tmp_path: Path) -> None:
    run = tmp_path / "run"
    extra = {"policy.recurrent": "naive", "policy.last_action": "true",
             "policy.share_parameters": "false", "returns.mode": "lambda", "run.total_env_steps": 3200,
             "updater.target_update_interval": 0, "updater.polyak": 0.05, "updater.objective.optimizer": "rmsprop"}
    assert main(["train", str(GUESS), *sets(**extra), "--run-dir", str(run)]) == 0
    last = [r for r in read_metrics(run / "metrics.csv") if r["eval_return"]][-1]
    assert float(last["eval_return"]) == 4.0


SHORT = {"run.total_env_steps": 160, "evaluator.every_iterations": 2, "checkpoint.every_iterations": 1,
         "checkpoint.keep": 100, "buffer.batch_size": 4, "checkpoint.replay_buffer": "true"}
"""10 iterations of 2 envs x 8 steps (4-step episodes end on iteration boundaries), updates from iteration 2."""


def test_a_stopped_run_resumes_exactly(tmp_path: Path) -> None:
    """Resuming from the checkpoint of iteration 5 (episode replay included) writes rows 6-10 as the
    uninterrupted run did; the checkpoint holds the replay's episodes."""
    whole = tmp_path / "whole"
    assert main(["train", str(GUESS), *sets(**SHORT, **{"policy.recurrent": "naive"}),
                 "--run-dir", str(whole)]) == 0
    state = load_checkpoint(whole / "checkpoints" / "iter_0000005.pt")
    assert state["buffer"]["size"] == 20 and "objective" in state["updater"]
    resumed = tmp_path / "resumed"
    shutil.copytree(whole, resumed)
    assert main(["train", "--resume", str(resumed), "--checkpoint",
                 str(resumed / "checkpoints" / "iter_0000005.pt")]) == 0
    assert rows(resumed) == rows(whole)
    assert len(rows(whole)) == 10 and rows(whole)[-1]["loss"] not in ("", None)


def test_same_seed_same_rows_and_another_seed_others(tmp_path: Path) -> None:
    a, b, c = (tmp_path / n for n in "abc")
    for run, seed in ((a, 1), (b, 1), (c, 2)):
        assert main(["train", str(GUESS), *sets(**SHORT, **{"run.seed": seed}), "--run-dir", str(run)]) == 0
    assert rows(a) == rows(b)
    assert rows(a) != rows(c)


# --------------------------------------------------------------------------- bad input


def refused(capsys: pytest.CaptureFixture[str], tmp_path: Path, pipeline: Path, **values: object) -> str:
    run = tmp_path / "refused"
    assert main(["train", str(pipeline), *sets(**values), "--run-dir", str(run)]) == 2
    assert not run.exists()  # no rows, no checkpoint, no pipeline.toml, no run directory
    return " ".join(capsys.readouterr().err.split())


def test_continuous_actions_are_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    pytest.importorskip("mpe2", reason="MPE (pip install harl[mpe])")
    err = refused(capsys, tmp_path, ROOT / "pipelines" / "qmix_mpe_spread_discrete.toml",
                  **{"env.continuous_actions": "true"})
    assert "qmix_mpe_spread_discrete.toml" in err and "needs Discrete actions" in err
    assert "env.continuous_actions = false" in err


def test_qmix_without_a_state_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    err = refused(capsys, tmp_path, GUESS, **{"env.no_state": "true"})
    assert 'critic.kind: "qmix" makes its mixing weights from the global state' in err
    assert 'critic.kind = "vdn"' in err


def test_an_episode_replay_that_cannot_fit_is_refused_with_the_numbers(capsys: pytest.CaptureFixture[str],
                                                                        tmp_path: Path) -> None:
    err = refused(capsys, tmp_path, GUESS, **{"buffer.capacity": 10**12})
    assert "buffer.capacity = 1,000,000,000,000 episodes x (buffer.max_length = 4 + 1) steps" in err
    assert "lower buffer.capacity or buffer.max_length" in err


@pytest.mark.parametrize(("key", "value", "expected"), [
    ("collector.epsilon_start", 1.5, "expected a value in [0, 1], got 1.5"),
    ("collector.epsilon_finish", -0.1, "expected a value in [0, 1], got -0.1"),
    ("collector.epsilon_finish", 1.0, "epsilon_finish = 1.0 is above epsilon_start = 0.5"),
    ("collector.epsilon_anneal_steps", -5, "expected a value in [0, inf]"),
    ("buffer.batch_size", 500, "500 episodes per batch, but buffer.capacity = 200"),
    ("policy.hidden_sizes", "[32, 32]", "expected one positive width, got [32, 32]: an agent Q network has one"),
    ("policy.recurrent", "chunked", "chunked"),
    ("updater.polyak", 0.0, "expected a value in (0, 1]"),
])
def test_settings_out_of_range_are_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path, key: str,
                                           value: object, expected: str) -> None:
    err = refused(capsys, tmp_path, GUESS, **{key: value, "collector.epsilon_start": 0.5}
                  if key == "collector.epsilon_finish" and value == 1.0 else {key: value})
    assert f"guess_qmix.toml: {key}" in err and expected in err


def test_gymma_needs_max_length(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    pytest.importorskip("lbforaging", reason="LBF (pip install harl[pettingzoo])")
    err = refused(capsys, tmp_path, ROOT / "pipelines" / "qmix_lbf.toml", **{"buffer.max_length": 0})
    assert "qmix_lbf.toml: buffer.max_length" in err and "0 reads the episode limit from [env]" in err


def test_vectorize_is_refused_with_the_family(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["train", str(GUESS), "--seeds", "1,2", "--vectorize", "--run-dir", str(tmp_path / "pop")]) == 2
    assert "value" in capsys.readouterr().err


# --------------------------------------------------------------------------- harl stages


def test_harl_stages_lists_every_value_key_with_its_doc() -> None:
    found = {(slot, kind): keys for slot, kind, _, keys in describe_stages()}
    for slot, kinds in VALUE_KINDS.items():
        for kind in kinds:
            keys = found[(slot, kind)]
            assert all(doc for key, _, _, doc in keys if key != "objective"), (slot, kind)


def test_harl_stages_prints_a_kind(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stages", "joint_td"]) == 0
    out = capsys.readouterr().out
    assert "double_q" in out and "hidden_dim" not in out
    assert main(["stages", "policy"]) == 0  # the value family's agent networks are set in [policy]
    out = capsys.readouterr().out
    for key in ("hidden_sizes", "recurrent", "share_parameters", "agent_id", "last_action"):
        assert key in out
