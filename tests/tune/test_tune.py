"""harl tune end to end on Optuna: a tiny study, its directory, resume, the seeded sampler and the
bad inputs (one paragraph, exit 2, nothing lost).  Skips without the tune extra."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

optuna = pytest.importorskip("optuna", reason='harl tune needs pip install "harl[tune]" (optuna)')
pytestmark = pytest.mark.extra("tune")

import harl  # noqa: E402
from harl.cli import main  # noqa: E402
from harl.config.messages import tomllib  # noqa: E402
from harl.errors import ConfigError, HarlError  # noqa: E402
from harl.rundir.lock import RunLockedError, take  # noqa: E402
from harl.tune.space import read_space  # noqa: E402
from harl.tune.study import open_study  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
HAPPO = ROOT / "pipelines" / "happo_mpe_spread.toml"
TINY = ["run.total_env_steps=150", "collector.n_envs=2", "collector.rollout_length=25", "collector.workers=1",
        "evaluator.episodes=2", "evaluator.n_envs=2", "evaluator.every_iterations=1", "run.device=cpu",
        "logging.progress=false", "checkpoint.every_iterations=1"]
SPACE = '''
[params]
"updater.objective.lr" = { log_uniform = [1e-4, 1e-3] }
"updater.objective.clip" = { uniform = [0.1, 0.3] }

[pruner]
kind = "none"

[sampler]
seed = 3
startup_trials = 1
'''


def _space(tmp_path: Path, text: str = SPACE) -> Path:
    path = tmp_path / "space.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_the_same_sampler_seed_proposes_the_same_trials(tmp_path: Path) -> None:
    space = read_space(_space(tmp_path), HAPPO, TINY)
    proposals = []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        study = open_study(tmp_path / name, space, create=True)
        values = []
        for _ in range(4):  # TPE after one random trial
            trial = study.ask()
            values.append(space.suggest(trial))
            study.tell(trial, -sum(values[-1].values()))
        proposals.append(values)
    assert proposals[0] == proposals[1]


def test_a_study_runs_resumes_and_reports(tmp_path: Path) -> None:
    """Two trials of one seed; a resume adds a third after a driver 'died' with one asked but not run;
    every trial is an ordinary run directory; best.toml loads; fresh seeds compare best and start."""
    lines: list[str] = []
    tune_dir = tmp_path / "tune"
    first = harl.tune(HAPPO, _space(tmp_path), 2, seeds=[1], overrides=TINY, run_dir=tune_dir,
                      final_seeds=[], jobs=2, say=lines.append)
    assert [r["state"] for r in first.trials] == ["complete", "complete"]
    assert {"tune.json", "space.toml", "study.db", "trials.csv", "best.toml", "history.png"} <= \
        {p.name for p in tune_dir.iterdir()}
    run = tune_dir / "trial-0000" / "happo-mpe-spread-s1"
    assert [r["iteration"] for r in harl.read_metrics(run)] == [1, 2, 3]
    best = tomllib.loads((tune_dir / "best.toml").read_text())
    assert best["updater"]["objective"]["lr"] == pytest.approx(first.best_params["updater.objective.lr"])
    harl.load_pipeline(tune_dir / "best.toml")

    # a driver that died after asking trial 2: the study holds it open, its run directory has no checkpoint
    space = read_space(tune_dir / "space.toml", HAPPO, TINY)
    study = open_study(tune_dir, space, create=False)
    values = space.suggest(study.ask())
    (tune_dir / "trial-0002" / "happo-mpe-spread-s1").mkdir(parents=True)
    pipeline = harl.load_pipeline(HAPPO, [*TINY, "run.seed=1", *(f"{k}={v}" for k, v in values.items())])
    from harl.config.dump import dump_pipeline

    (tune_dir / "trial-0002" / "happo-mpe-spread-s1" / "pipeline.toml").write_text(dump_pipeline(pipeline))
    lines.clear()
    second = harl.tune(resume=tune_dir, trials=3, final_seeds=[9], say=lines.append)
    assert "trial 2: seed 1 re-runs from the start (no checkpoint)" in lines
    assert [r["state"] for r in second.trials] == ["complete"] * 3
    assert [r["value"] for r in second.trials][:2] == [r["value"] for r in first.trials]   # kept
    with (tune_dir / "trials.csv").open() as f:
        assert [row["trial"] for row in csv.DictReader(f)] == ["0", "1", "2"]
    assert json.loads((tune_dir / "tune.json").read_text())["seeds"] == [1]
    # the record keeps the request; final seeds from this call
    assert set(second.final) == {"best", "start"}
    assert (tune_dir / "final" / "best" / "happo-mpe-spread-tuned-s9" / "metrics.csv").is_file()


def test_bad_input_is_one_paragraph_with_exit_2_and_nothing_lost(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    space = _space(tmp_path, SPACE.replace('kind = "none"', 'kind = "median"'))
    args = ["tune", str(HAPPO), "--space", str(space), "--trials", "2", "--seeds", "1"]
    tiny = [a for s in TINY for a in ("--set", s)]
    # a pruner on a pipeline that evaluates only at its end
    assert main([*args, *tiny, "--set", "evaluator.every_iterations=0", "--run-dir", str(tmp_path / "t")]) == 2
    err = capsys.readouterr().err
    assert 'pruner.kind = "median"' in err and "evaluates 1 time(s) before its last iteration" in err and \
        "--set evaluator.every_iterations=" in err
    assert not (tmp_path / "t").exists()
    # a study of another pipeline, and a second driver of one study
    tune_dir = tmp_path / "study"
    tune_dir.mkdir()
    (tune_dir / "tune.json").write_text(json.dumps({"pipeline": str(HAPPO), "overrides": TINY, "seeds": [1],
                                                    "trials": 2, "final_seeds": [], "vectorize": False}))
    (tune_dir / "space.toml").write_text(SPACE)
    other = ROOT / "pipelines" / "haa2c_mpe_spread.toml"
    with pytest.raises(HarlError, match=r"this study tunes .*happo_mpe_spread.toml .*give --resume .* alone"):
        harl.tune(other, None, None, seeds=[1], overrides=TINY, resume=tune_dir)
    with take(tune_dir, "study"), pytest.raises(RunLockedError, match="this study is being written by"):
        harl.tune(resume=tune_dir)
    assert sorted(p.name for p in tune_dir.iterdir()) == [".lock", "space.toml", "tune.json"]
    # a bad space: the file and the line
    with pytest.raises(ConfigError, match=r"space.toml:3: \[params\] \"updater.objective.lr\": the range"):
        harl.tune(HAPPO, _space(tmp_path, '[params]\n\n"updater.objective.lr" = { uniform = [1, 0] }\n'), 2,
                  overrides=TINY, run_dir=tmp_path / "bad")
    assert not (tmp_path / "bad").exists()


def test_without_optuna_the_command_names_the_extra(monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "optuna", None)
    assert main(["tune", str(HAPPO), "--space", "x.toml", "--trials", "1"]) == 2
    assert 'harl tune needs: pip install "harl[tune]"' in capsys.readouterr().err


@pytest.mark.slow
def test_sigterm_stops_the_study_with_checkpoints_and_resume_finishes_it(tmp_path: Path) -> None:
    """SIGTERM to the driver: the running runs stop after their iteration with a checkpoint, exit 143,
    their trial stays open; harl tune --resume resumes it from the checkpoint and completes the study."""
    import os
    import signal
    import subprocess
    import sys
    import time

    tune_dir = tmp_path / "tune"
    longer = [s for s in TINY if not s.startswith("run.total_env_steps")] + ["run.total_env_steps=3000"]
    command = [sys.executable, "-m", "harl", "tune", str(HAPPO), "--space", str(_space(tmp_path)), "--trials", "1",
               "--seeds", "1", "--final-seeds", "none", "--run-dir", str(tune_dir),
               *(a for s in longer for a in ("--set", s))]
    driver = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    checkpoints = tune_dir / "trial-0000" / "happo-mpe-spread-s1" / "checkpoints"
    deadline = time.monotonic() + 120
    while not (checkpoints.is_dir() and any(checkpoints.iterdir())) and time.monotonic() < deadline:
        time.sleep(0.2)
    driver.send_signal(signal.SIGTERM)
    out, _ = driver.communicate(timeout=120)
    assert driver.returncode == 143, out
    assert "SIGTERM: the running trials stop after their iteration with a checkpoint" in out
    lines: list[str] = []
    result = harl.tune(resume=tune_dir, say=lines.append)
    assert any(line.startswith("trial 0: seed 1 resumes at iteration ") for line in lines), lines
    assert [r["state"] for r in result.trials] == ["complete"]
    assert harl.read_metrics(checkpoints.parent)[-1]["env_steps"] == 3000


@pytest.mark.slow
def test_a_trials_seeds_train_as_one_population(tmp_path: Path) -> None:
    """--vectorize: each trial's seeds are one population process (harl.tune.worker --population); every seed is
    still its own run directory, scored like the others."""
    torch_mpe = ROOT / "pipelines" / "happo_mpe_torch_spread.toml"
    small = ["collector.n_envs=4", "collector.rollout_length=25", "run.total_env_steps=200", "evaluator.episodes=2",
             "evaluator.n_envs=2", "run.device=cpu", "logging.progress=false"]
    result = harl.tune(torch_mpe, _space(tmp_path), 2, seeds=[1, 2], overrides=small, vectorize=True,
                       run_dir=tmp_path / "tune", final_seeds=[])
    assert [r["state"] for r in result.trials] == ["complete", "complete"]
    for trial in ("trial-0000", "trial-0001"):
        runs = sorted(p.name for p in (tmp_path / "tune" / trial).iterdir())
        assert runs == ["happo-mpe-torch-spread-s1", "happo-mpe-torch-spread-s2"]


TORCH_MPE = ROOT / "pipelines" / "happo_mpe_torch_spread.toml"
POPULATION = ["collector.n_envs=2", "collector.rollout_length=25", "evaluator.episodes=2", "evaluator.n_envs=2",
              "evaluator.every_iterations=1", "checkpoint.every_iterations=1000", "run.device=cpu",
              "logging.progress=false"]


def _threshold(monkeypatch: pytest.MonkeyPatch, lower: float) -> None:
    """The space's median pruner becomes Optuna's ThresholdPruner: every trial pruned below ``lower``."""
    monkeypatch.setattr(optuna.pruners, "MedianPruner", lambda n_startup_trials, n_warmup_steps:
                        optuna.pruners.ThresholdPruner(lower=lower, n_warmup_steps=n_warmup_steps))


def test_a_pruned_population_trial_stops_early_with_a_checkpoint_per_seed(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """--vectorize with a pruner: the trial reports the mean of its members' k-th evaluation, and when
    the pruner says prune the whole population stops after its iteration, every member with a checkpoint
    (30 iterations unpruned; pruned at evaluation 1, the warm-up's end, it stops within a few)."""
    _threshold(monkeypatch, 1e9)  # MPE returns are negative: pruned once past the warm-up
    space = _space(tmp_path, SPACE.replace('kind = "none"', 'kind = "median"\nwarmup = 1'))
    lines: list[str] = []
    result = harl.tune(TORCH_MPE, space, 1, seeds=[1, 2], overrides=[*POPULATION, "run.total_env_steps=3000"],
                       vectorize=True, run_dir=tmp_path / "tune", final_seeds=[], say=lines.append)
    assert [r["state"] for r in result.trials] == ["pruned"], lines
    assert any(line.startswith("trial 0: pruned at evaluation 1 (mean return") for line in lines), lines
    trial = tmp_path / "tune" / "trial-0000"
    assert (trial / "PRUNED").is_file()
    stops = set()
    for run_dir in sorted(p for p in trial.iterdir() if p.is_dir()):
        assert json.loads((run_dir / "outcome.json").read_text())["status"] == "stopped"
        last = harl.read_metrics(run_dir)[-1]["iteration"]
        assert [p.name for p in (run_dir / "checkpoints").iterdir()] == [f"iter_{last:07d}.pt"]
        stops.add(last)
    assert len(stops) == 1 and stops.pop() < 30  # in step, long before the end


def test_a_population_trial_the_pruner_keeps_runs_to_its_end(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """--vectorize with a pruner that never prunes: the trial completes, every member at its last iteration."""
    _threshold(monkeypatch, -1e9)
    space = _space(tmp_path, SPACE.replace('kind = "none"', 'kind = "median"\nwarmup = 1'))
    result = harl.tune(TORCH_MPE, space, 1, seeds=[1, 2], overrides=[*POPULATION, "run.total_env_steps=200"],
                       vectorize=True, run_dir=tmp_path / "tune", final_seeds=[])
    assert [r["state"] for r in result.trials] == ["complete"]
    assert result.trials[0]["evaluations"] == 4  # 4 iterations, each evaluated
    trial = tmp_path / "tune" / "trial-0000"
    assert not (trial / "PRUNED").exists()
    for run_dir in sorted(p for p in trial.iterdir() if p.is_dir()):
        assert json.loads((run_dir / "outcome.json").read_text())["status"] == "finished"
        assert [r["iteration"] for r in harl.read_metrics(run_dir)] == [1, 2, 3, 4]
