"""harl tune killed or stopped at awkward moments loses nothing: workers die with a driver killed
by SIGKILL (and a run another process still holds is waited for, not failed), a stop in a trial's
first second leaves the trial open, a resume continues the sampler with the study's own --jobs;
a missing space file and a space that cannot fit are refused before anything runs; a resume
without the replay buffer says so.  Skips without the tune extra."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

optuna = pytest.importorskip("optuna", reason='harl tune needs pip install "harl[tune]" (optuna)')
pytestmark = pytest.mark.extra("tune")

import harl  # noqa: E402
from harl import api  # noqa: E402
from harl.cli import main  # noqa: E402
from harl.errors import ConfigError  # noqa: E402
from harl.rundir.lock import RunLockedError, take  # noqa: E402
from harl.tune.space import read_space  # noqa: E402
from harl.tune.study import Request, base_text, open_study, write_record  # noqa: E402

from .test_tune import HAPPO, ROOT, SPACE, TINY, _space  # noqa: E402

RUN = Path("trial-0000") / "happo-mpe-spread-s1"
RANDOM = SPACE.replace("seed = 3", 'kind = "random"\nseed = 3')


def _driver(tmp_path: Path, steps: int, trials: int = 1) -> tuple[subprocess.Popen[str], Path]:
    """``harl tune`` in its own process, one seed, ``steps`` env steps per run."""
    tune_dir = tmp_path / "tune"
    budget = [s for s in TINY if not s.startswith("run.total_env_steps")] + [f"run.total_env_steps={steps}"]
    command = [sys.executable, "-m", "harl", "tune", str(HAPPO), "--space", str(_space(tmp_path)), "--trials",
               str(trials), "--seeds", "1", "--final-seeds", "none", "--run-dir", str(tune_dir),
               *(a for s in budget for a in ("--set", s))]
    driver = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    return driver, tune_dir


def _until(condition: object, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return True
        time.sleep(0.1)
    return False


def _free(run_dir: Path) -> bool:
    try:
        with take(run_dir):
            return True
    except RunLockedError:
        return False


@pytest.mark.slow
def test_a_driver_killed_with_sigkill_takes_its_workers_with_it_and_resume_completes(tmp_path: Path) -> None:
    """kill -9 of the driver mid-trial: its worker (in its own session) gets SIGTERM from the kernel,
    stops after its iteration with a checkpoint and frees its run lock within seconds (it used to run
    on as an orphan, and the resume's worker met its lock: the trial failed); --resume completes it."""
    driver, tune_dir = _driver(tmp_path, 1500)
    run_dir = tune_dir / RUN
    checkpoints = run_dir / "checkpoints"
    assert _until(lambda: checkpoints.is_dir() and any(checkpoints.iterdir()), 180), driver.communicate()[0]
    driver.kill()
    driver.communicate(timeout=60)
    ended = run_dir / "outcome.json"  # written after the run's lock is released, as the process ends
    assert _until(lambda: ended.exists() and _free(run_dir), 30), "the worker outlived its driver"
    assert json.loads(ended.read_text())["status"] == "stopped"   # not run to its end
    lines: list[str] = []
    result = harl.tune(resume=tune_dir, say=lines.append)
    assert any(line.startswith("trial 0: seed 1 resumes at iteration ") for line in lines), lines
    assert [r["state"] for r in result.trials] == ["complete"], lines
    assert harl.read_metrics(run_dir)[-1]["env_steps"] == 1500


def _open_trial(tune_dir: Path, tmp_path: Path) -> Path:
    """A study whose driver died after asking trial 0 and writing its run directory (no checkpoint)."""
    from harl.config.dump import dump_pipeline

    space = read_space(_space(tmp_path), HAPPO, TINY)
    write_record(tune_dir, Request(str(HAPPO), list(TINY), [1], 1, [], False, base_text(HAPPO, TINY)), space)
    values = space.suggest(open_study(tune_dir, space, create=True).ask())
    run_dir = tune_dir / RUN
    run_dir.mkdir(parents=True)
    pipeline = harl.load_pipeline(HAPPO, [*TINY, "run.seed=1", *(f"{k}={v}" for k, v in values.items())])
    (run_dir / "pipeline.toml").write_text(dump_pipeline(pipeline))
    return run_dir


def test_a_run_another_process_holds_is_waited_for_then_run(tmp_path: Path) -> None:
    """A resume that finds a trial's run lock held (a worker of a killed driver still stopping) waits
    for it and then runs the trial, where its worker used to meet the lock and fail the trial."""
    tune_dir = tmp_path / "tune"
    run_dir = _open_trial(tune_dir, tmp_path)
    held = take(run_dir)
    threading.Timer(3.0, held.release).start()
    lines: list[str] = []
    result = harl.tune(resume=tune_dir, say=lines.append)
    assert any(line.startswith(f"trial 0: seed 1 is still written by PID {os.getpid()} ") for line in lines), lines
    assert [r["state"] for r in result.trials] == ["complete"], lines
    assert json.loads((run_dir / "outcome.json").read_text())["status"] == "finished"


@pytest.mark.slow
def test_a_stop_in_a_trials_first_second_leaves_the_trial_open(tmp_path: Path) -> None:
    """SIGTERM to the driver as a trial's worker starts (before its handlers are installed): the worker
    dies by the signal with an empty train.log; the trial is stopped, not failed, and --resume runs it."""
    driver, tune_dir = _driver(tmp_path, 150)
    log = tune_dir / RUN / "train.log"
    assert _until(log.exists, 180), driver.communicate()[0]
    driver.send_signal(signal.SIGTERM)
    out, _ = driver.communicate(timeout=120)
    assert driver.returncode == 143, out
    assert not (tune_dir / RUN / "checkpoints").exists(), "the signal came too late to test the first second"
    study = optuna.load_study(study_name="harl", storage=f"sqlite:///{tune_dir / 'study.db'}")
    assert [t.state.name for t in study.trials] == ["RUNNING"], out   # open, not failed
    lines: list[str] = []
    result = harl.tune(resume=tune_dir, say=lines.append)
    assert "trial 0: seed 1 re-runs from the start (no checkpoint)" in lines, lines
    assert [r["state"] for r in result.trials] == ["complete"], lines


@pytest.mark.parametrize("sampler", ["random", "tpe"])
def test_a_resumed_study_proposes_new_values(tmp_path: Path, sampler: str) -> None:
    """3 trials, the study reopened (a resume), 3 more: no set of values repeats (the sampler was
    re-seeded with the space's seed on every resume: the random sampler's trials 3-5 were 0-2's)."""
    text = SPACE.replace("startup_trials = 1", "startup_trials = 10").replace("seed = 3", f'kind = "{sampler}"\nseed = 3')
    space = read_space(_space(tmp_path, text), HAPPO, TINY)
    proposed = []
    for create in (True, False):
        study = open_study(tmp_path, space, create=create)
        for _ in range(3):
            trial = study.ask()
            proposed.append(tuple(sorted(space.suggest(trial).items())))
            study.tell(trial, -sum(v for _, v in proposed[-1]))
    assert len(set(proposed)) == 6, proposed


def test_a_resume_keeps_the_studys_jobs_and_continues_its_sampler(tmp_path: Path) -> None:
    """A study started with --jobs 2, resumed without --jobs: 2 runs at a time again (it used to fall back
    to 1), recorded in tune.json; the resumed trial's values are new (not trial 0's again)."""
    tune_dir = tmp_path / "tune"
    harl.tune(HAPPO, _space(tmp_path, RANDOM), 1, seeds=[1], overrides=TINY, run_dir=tune_dir, final_seeds=[],
              jobs=2)
    assert json.loads((tune_dir / "tune.json").read_text())["jobs"] == 2
    lines: list[str] = []
    result = harl.tune(resume=tune_dir, trials=2, say=lines.append)
    assert "2 run(s) at a time" in lines[1], lines  # the header: the directory, then what runs
    assert [r["state"] for r in result.trials] == ["complete", "complete"]
    first, second = (optuna.load_study(study_name="harl", storage=f"sqlite:///{tune_dir / 'study.db'}").trials[k].params
                     for k in (0, 1))
    assert first != second
    assert json.loads((tune_dir / "tune.json").read_text())["trials"] == 2   # the next resume's count


def test_a_missing_space_file_is_named_a_space(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "spcae.toml"
    with pytest.raises(ConfigError, match=r"--space .*spcae.toml: no such space file"):
        harl.tune(HAPPO, missing, 1, overrides=TINY, run_dir=tmp_path / "t")
    assert main(["tune", str(HAPPO), "--space", str(missing), "--trials", "1"]) == 2
    err = capsys.readouterr().err
    assert "no such space file" in err and "pipeline" not in err.split("no such space file")[0]
    assert not (tmp_path / "t").exists()


def test_a_space_value_that_cannot_fit_is_refused_before_the_first_trial(tmp_path: Path) -> None:
    """collector.n_envs up to 10**9 loads into the pipeline but can never fit in memory: refused in one
    paragraph naming the key and the bound, before the tune directory exists (every trial drawing near it
    used to fail)."""
    space = _space(tmp_path, SPACE + '\n[params."collector.n_envs"]\nint = [2, 1_000_000_000]\nlog = true\n')
    with pytest.raises(ConfigError) as error:
        harl.tune(HAPPO, space, 1, seeds=[1], overrides=TINY, run_dir=tmp_path / "t", final_seeds=[])
    message = str(error.value)
    assert '"collector.n_envs": 1_000_000_000 cannot fit in memory' in message, message
    assert "change its high bound" in message and "\n" not in message
    assert not (tmp_path / "t").exists()


def test_a_resume_without_the_replay_buffer_says_the_updates_differ(tmp_path: Path) -> None:
    """[checkpoint] replay_buffer = false (the default): the resumed off-policy run starts its buffer empty,
    and says so in one line; with the buffer saved it says nothing."""
    tiny = ["collector.n_envs=2", "collector.rollout_length=10", "collector.warmup_steps=10", "collector.backend=inline",
            "buffer.batch_size=8", "evaluator.episodes=1", "evaluator.n_envs=1", "logging.progress=false",
            "policy.hidden_sizes=[16,16]", "critic.hidden_sizes=[16,16]", "run.device=cpu", "run.total_env_steps=200",
            "checkpoint.every_iterations=1"]
    notes = {}
    for saved in (False, True):
        run_dir = tmp_path / f"saved-{saved}"
        harl.train(harl.load_pipeline(ROOT / "pipelines" / "hasac_mpe_spread.toml",
                                      [*tiny, f"checkpoint.replay_buffer={str(saved).lower()}"]),
                   run_dir=run_dir, max_iterations=2)
        with api.start_resume(run_dir) as trainer:
            notes[saved] = [n for n in trainer.stages.notes if "replay buffer" in n]
    assert notes[True] == []
    assert len(notes[False]) == 1 and "holds no replay buffer" in notes[False][0] and \
        "updates differ from an uninterrupted run's until the buffer refills" in notes[False][0]
