"""harl train --seeds ... --vectorize: a population's members are runs, in step, resumable,
bit-identical to themselves; a failing member stops alone; what cannot be batched or fit is
refused in one paragraph (harl.population)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

import harl.trainer as trainer_module
from harl.api import read_metrics
from harl.cli import main
from harl.errors import ConfigError, ResourceError
from harl.finite import NonFiniteUpdateError
from harl.population.driver import Population, open_population
from harl.rundir.checkpoint import list_checkpoints
from harl.sweep.plan import Request, Sweep

ROOT = Path(__file__).resolve().parents[2]
TORCH_MPE = ROOT / "pipelines" / "happo_mpe_torch_spread.toml"
SMALL = {"collector.n_envs": 2, "collector.rollout_length": 25, "run.total_env_steps": 200,
         "evaluator.episodes": 2, "evaluator.n_envs": 2, "evaluator.every_iterations": 1,
         "checkpoint.every_iterations": 1, "logging.progress": "false", "run.torch_threads": 1}
WALL_CLOCK = ("wall_time", "steps_per_s")


def sets(**extra: object) -> list[str]:
    return [arg for k, v in {**SMALL, **extra}.items() for arg in ("--set", f"{k}={v}")]


def rows(run_dir: Path) -> list[dict[str, str]]:
    with (run_dir / "metrics.csv").open(newline="") as f:
        return [{k: v for k, v in r.items() if k not in WALL_CLOCK} for r in csv.DictReader(f)]


def member_dirs(sweep: Path) -> list[Path]:
    return sorted(p for p in sweep.iterdir() if (p / "pipeline.toml").is_file())


def test_members_are_runs_in_one_sweep_directory(tmp_path: Path) -> None:
    """Each member writes what a separate run writes: its seed's pipeline, metrics, checkpoints."""
    sweep = tmp_path / "pop"
    assert main(["train", str(TORCH_MPE), "--seeds", "3,5", "--vectorize", "--run-dir", str(sweep), *sets()]) == 0
    dirs = member_dirs(sweep)
    assert [d.name for d in dirs] == ["happo-mpe-torch-spread-s3", "happo-mpe-torch-spread-s5"]
    for d, seed in zip(dirs, (3, 5)):
        assert f"seed = {seed}" in (d / "pipeline.toml").read_text()
        metrics = read_metrics(d / "metrics.csv")
        assert [r["iteration"] for r in metrics] == [1, 2, 3, 4]
        assert metrics[-1]["env_steps"] == 200 and metrics[-1]["eval_return"] is not None
        assert len(list_checkpoints(d)) >= 1
    assert rows(dirs[0]) != rows(dirs[1])  # different seeds learn differently
    assert main(["export", str(dirs[1]), "--format", "torchscript", "--out", str(tmp_path / "policy")]) == 0
    assert (tmp_path / "policy" / "policy.json").is_file()  # one member's policy, as any run's
    assert Sweep.resume(sweep, None).vectorize  # recorded: a resume trains populations again
    summary = (sweep / "summary.csv").read_text()
    assert "2 finished" in summary or "finished" in (sweep / "trials.csv").read_text()


def test_same_population_is_bit_identical_to_itself(tmp_path: Path) -> None:
    for name in ("a", "b"):
        assert main(["train", str(TORCH_MPE), "--seeds", "1-2", "--vectorize", "--run-dir",
                     str(tmp_path / name), *sets()]) == 0
    for a, b in zip(member_dirs(tmp_path / "a"), member_dirs(tmp_path / "b")):
        assert rows(a) == rows(b)


def _population(sweep: Path, seeds: str, **extra: object) -> tuple[list[Path], list]:
    request = Request.parse(str(TORCH_MPE), [f"{k}={v}" for k, v in {**SMALL, **extra}.items()], seeds, [])
    made = Sweep.new(request, sweep, None)
    return [s.run_dir for s in made.states], [s.spec for s in made.states]


@pytest.mark.parametrize("update", ["per_member", "batched"])
def test_resume_continues_the_population_exactly(tmp_path: Path, update: str) -> None:
    """Two iterations, closed, reopened from the checkpoints and run to four: the rows of one
    uninterrupted run of four (either update)."""
    straight_dirs, specs = _population(tmp_path / "straight", "1-2", **{"run.population_update": f'"{update}"'})
    trainers, venv = open_population(straight_dirs, specs, "test")
    with Population(trainers, venv, ["s1", "s2"]) as pop:
        pop.train(quiet=True)
    split_dirs, specs = _population(tmp_path / "split", "1-2", **{"run.population_update": f'"{update}"'})
    trainers, venv = open_population(split_dirs, specs, "test")
    with Population(trainers, venv, ["s1", "s2"]) as pop:
        results = pop.train(quiet=True, max_iterations=2)
    assert [r.counters.iteration for r in results] == [2, 2]
    assert all(r.stopped_by == "max_iterations" for r in results)
    trainers, venv = open_population(split_dirs, specs, "test")
    assert [t.counters.iteration for t in trainers] == [2, 2]
    with Population(trainers, venv, ["s1", "s2"]) as pop:
        pop.train(quiet=True)
    for a, b in zip(straight_dirs, split_dirs):
        assert rows(a) == rows(b)


def test_a_non_finite_member_stops_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    """Seed 2's update at iteration 2 is non-finite: it stops there, named, unsaved; 1 and 3 go on."""
    real = trainer_module.check_update

    def check(row: dict, iteration: int, stages: object, run_dir: Path) -> None:
        if run_dir.name.endswith("-s2") and iteration == 2:
            raise NonFiniteUpdateError(f"iteration {iteration}: the update gave nan")
        real(row, iteration, stages, run_dir)

    monkeypatch.setattr(trainer_module, "check_update", check)
    sweep = tmp_path / "pop"
    code = main(["train", str(TORCH_MPE), "--seeds", "1-3", "--vectorize", "--run-dir", str(sweep), *sets()])
    assert code != 0
    out = capsys.readouterr()
    assert "seed 2: iteration 2: the update gave nan" in out.out + out.err
    counts = {d.name[-2:]: len(rows(d)) for d in member_dirs(sweep)}
    assert counts == {"s1": 4, "s2": 1, "s3": 4}
    statuses = {r["run_dir"][-2:]: r["status"] for r in csv.DictReader((sweep / "trials.csv").open())}
    assert statuses == {"s1": "finished", "s2": "failed", "s3": "finished"}


@pytest.mark.parametrize(("pipeline", "extra", "named"), [
    ("hasac_mpe_spread.toml", ["run.population_update=batched"], 'run.population_update = "batched"'),
    ("happo_mpe_speaker_listener_gru.toml", [], 'policy.recurrent = "'),
    ("hatrpo_mpe_spread.toml", [], 'updater.objective.kind = "trpo"'),
])
def test_stages_that_cannot_be_batched_are_named(tmp_path: Path, pipeline: str, extra: list[str], named: str,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["train", str(ROOT / "pipelines" / pipeline), "--seeds", "1-2", "--vectorize",
                 "--run-dir", str(tmp_path / "pop"), "--set", "logging.progress=false",
                 *[a for e in extra for a in ("--set", e)]])
    out = capsys.readouterr()
    text = " ".join((out.out + out.err).split())
    assert code == 2
    assert "--vectorize trains the seeds as one batched population" in text and named in text
    assert "Drop --vectorize" in text


def test_a_population_that_cannot_fit_is_refused_with_the_numbers(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    import harl.envs.footprint
    import harl.sizes

    monkeypatch.setattr(harl.sizes, "available_bytes", lambda device="cpu": 50_000)
    monkeypatch.setattr(harl.envs.footprint, "available_bytes", lambda device="cpu": 50_000)
    dirs, specs = _population(tmp_path / "pop", "1-16")
    with pytest.raises(ResourceError) as info:
        open_population(dirs, specs, "p.toml")
    text = str(info.value)
    assert "16 members x collector.n_envs = 2" in text and "train fewer seeds at once" in text


@pytest.mark.parametrize(("flags", "message"), [
    (["--vectorize"], "--vectorize goes with --seeds"),
    (["--seeds", "1-2", "--vectorize", "--ray"], "--ray does not go with it"),
    (["--seeds", "1-2", "--vectorize", "--grid", "updater.objective.lr=1e-4,5e-4"], "--grid does not go with it"),
])
def test_flags_that_do_not_go_with_vectorize(tmp_path: Path, flags: list[str], message: str,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train", str(TORCH_MPE), *flags, "--run-dir", str(tmp_path / "x")]) == 2
    out = capsys.readouterr()
    assert message in " ".join((out.out + out.err).split())


def test_check_population_rejects_members_that_differ() -> None:
    import attrs

    from harl.config.loading import load_spec_and_notes
    from harl.population.check import check_population

    spec, _ = load_spec_and_notes(TORCH_MPE, [])
    other = attrs.evolve(spec, run=attrs.evolve(spec.run, seed=2, total_env_steps=5))
    with pytest.raises(ConfigError, match="differs from seed 1's in more than run.seed"):
        check_population([spec, other], "p.toml")


def test_per_member_update_is_a_separate_runs_update(tmp_path: Path) -> None:
    """population_update = "per_member" calls each member's own updater: given the same rollout,
    its networks are a separate run's, bit for bit (the batched call agrees to rounding:
    tests/population/test_update.py)."""
    import torch

    from harl.population.update import population_update
    from tests.population.test_update import members

    alone, together = (members("happo_mpe_torch_spread.toml", [1, 2], ["collector.n_envs=2",
                                                                       "collector.rollout_length=25"])
                       for _ in range(2))
    try:
        for m in alone:
            m.updater.update(m.buffer, progress=0.0)
        population_update([m.updater for m in together], [m.buffer for m in together], 0.0, batched=False)
        for a, b in zip(alone, together):
            for p, q in zip(a.policy.parameters(), b.policy.parameters()):
                assert torch.equal(p, q)
    finally:
        for m in (*alone, *together):
            m.close()


def test_jobs_split_the_seeds_into_populations_one_process_each(tmp_path: Path) -> None:
    """--vectorize --jobs 2: seeds 1-4 as populations {1, 2} and {3, 4} in two processes; the first
    is the one-process population of seeds 1-2, row for row."""
    assert main(["train", str(TORCH_MPE), "--seeds", "1-4", "--vectorize", "--jobs", "2", "--run-dir",
                 str(tmp_path / "two"), *sets()]) == 0
    assert main(["train", str(TORCH_MPE), "--seeds", "1-2", "--vectorize", "--run-dir", str(tmp_path / "one"),
                 *sets()]) == 0
    two = member_dirs(tmp_path / "two")
    assert [len(rows(d)) for d in two] == [4, 4, 4, 4]
    statuses = [r["status"] for r in csv.DictReader((tmp_path / "two" / "trials.csv").open())]
    assert statuses == ["finished"] * 4
    for a, b in zip(two[:2], member_dirs(tmp_path / "one")):
        assert rows(a) == rows(b)


def test_an_unbatchable_pipeline_leaves_no_sweep_directory(tmp_path: Path) -> None:
    """The refusal comes before the sweep directory is made, naming the pipeline file."""
    pipeline = ROOT / "pipelines" / "hatrpo_mpe_spread.toml"
    assert main(["train", str(pipeline), "--seeds", "1-2", "--vectorize", "--run-dir", str(tmp_path / "pop")]) == 2
    assert not (tmp_path / "pop").exists()
