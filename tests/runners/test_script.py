"""examples/harl_train.py and a script that catches nothing, as real subprocesses."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "examples" / "harl_train.py"


def run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("HARL_DEBUG", None)
    return subprocess.run([sys.executable, *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_unknown_algo_ends_with_one_paragraph_and_exit_2(tmp_path: Path) -> None:
    """An --algo that RUNNER_REGISTRY lacks: harl's paragraph on stderr, no traceback, status 2."""
    done = run([str(SCRIPT), "--algo", "hapo"], tmp_path)
    assert done.returncode == 2
    assert done.stderr == (
        'harl: args["algo"]: unknown algorithm "hapo" (did you mean "happo"?); harl.runners.RUNNER_REGISTRY '
        "has happo, hatrpo, haa2c, haddpg, hatd3, hasac, had3qn, maddpg, matd3, mappo; pass one of them as --algo\n")


def test_uncaught_checkpoint_error_ends_with_exit_2_and_nothing_written(tmp_path: Path) -> None:
    """A script building a runner with a model_dir that holds no checkpoint ends as harl train would."""
    code = (
        "from harl.runners import RUNNER_REGISTRY\n"
        "from tests.runners.dicts import harl_dicts, on_policy\n"
        "RUNNER_REGISTRY['happo'](*harl_dicts('out', 'happo', model_dir='nowhere'), pipeline=on_policy())\n"
    )
    done = run(["-c", code], tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.startswith('harl: algo_args.train.model_dir = "nowhere": no such file or directory; ')
    assert not (tmp_path / "out").exists()


def test_other_errors_keep_their_traceback(tmp_path: Path) -> None:
    """Only harl's own errors are shortened: a bug still shows its traceback (status 1)."""
    done = run(["-c", "import harl.runners\nraise ValueError('a bug')"], tmp_path)
    assert done.returncode == 1 and "Traceback" in done.stderr and "ValueError: a bug" in done.stderr


needs_converter = pytest.mark.skipif(importlib.util.find_spec("harl.utils") is None,
                                     reason="harl.utils.configs_tools (the compat branch) is not merged yet")


@needs_converter
@pytest.mark.parametrize(("algo", "budget"), [("happo", ["--num_env_steps", "400", "--episode_length", "100"]),
                                             ("hasac", ["--num_env_steps", "400", "--warmup_steps", "100",
                                                        "--train_interval", "50", "--batch_size", "32"])])
def test_script_trains_in_harls_results_layout(tmp_path: Path, algo: str, budget: list[str]) -> None:
    """HARL's command line with overrides, tiny budget: results/pettingzoo_mpe/.../seed-00001-*/."""
    done = run([str(SCRIPT), "--algo", algo, "--env", "pettingzoo_mpe", "--exp_name", "ci", *budget,
                "--n_rollout_threads", "2", "--n_eval_rollout_threads", "1", "--eval_episodes", "1",
                "--cuda", "False"], tmp_path)
    assert done.returncode == 0, done.stderr
    (run_dir,) = (tmp_path / "results" / "pettingzoo_mpe").glob(f"*/{algo}/ci/seed-00001-*")
    assert {"metrics.csv", "pipeline.toml", "config.json", "checkpoints"} <= {p.name for p in run_dir.iterdir()}
