"""Sable's learning curves beside Mava's own Sable on SMAX 3m, 3 seeds a side (issue 57, item 2b).

Mava's side is Mava 73c4611's ``rec_sable`` system run as Mava runs it: its hydra config
(``mava/configs/default/rec_sable.yaml``), its ``run_experiment`` (its learner, its Anakin training
loop, its evaluator and its logger), in ``/work/mava-venv`` (jax 0.10.2) from the source in
``--mava-src`` (``git archive 73c4611 mava | tar -x``).  The config is composed with these overrides::

    env=smax env.scenario.task_name=3m            # the task (Mava's smax.yaml sets 2s3z)
    system.seed=S system.total_timesteps=N        # seed and budget
    arch.num_evaluation=N / 32,768                # logging: an evaluation every 8 updates (32,768 env steps)
    network.rec_config.use_chunkwise=true network.rec_config.timestep_chunk_size=32    # --chunk 32

``--chunk 32`` is the one change beyond seed, budget and logging, made for speed alone: Mava's
chunkwise form computes the parallel form's function over chunks of 32 timesteps, the retention
state carried between them (the replay's ``rec_chunk_pos`` case pins Mava's chunked form to harl's,
and ``tests/nets/test_retention.py`` harl's chunked form to its parallel one).  On this 2-core CPU
Mava's parallel form over the 128-step rollout did not finish its first update in 13 minutes (XLA's
program for the 128-step masks, as the replay's ``--speed`` found: 75 s per minibatch step); chunked,
it runs at 176 env-steps/s once compiled (its learner compiles twice: the second call's inputs are
the first's pmapped outputs).

Mava's source runs with the four one-line patches of ``sable_mava_replay.py`` (its ``PATCHES``,
applied to the text of ``retention.py``, ``discrete_trainer_executor.py`` and ``rec_sable.py`` as
they are imported; each must be found as often as listed), so the network and update trained are
the ones harl's replay test pins.  Mava imports more than its SMAX path uses; these modules are
stand-ins made here, each because nothing on the SMAX path calls it: ``neptune``, ``marl_eval``,
``tensorboard_logger`` (loggers the config switches off), ``brax``, ``jaxmarl.environments.mabrax``,
``gigastep``, ``matrax``, Mava's own ``mava.wrappers.jumanji`` and jumanji's connector generator
(other environments' wrappers, imported by ``mava.utils.make_env``; the released jumanji lacks the
``MaConnector`` of the fork Mava pins) and
``gymnax`` (its spaces appear in the jaxmarl wrapper's ``isinstance`` checks; SMAX's spaces are
jaxmarl's own).  Installed into the venv besides what the replay needed: ``jaxmarl==0.2.0
--no-deps`` (harl's SMAX version), ``jumanji==1.1.2 --no-deps`` (Mava pins a fork; SMAX needs its
``specs``, ``types`` and ``wrappers``) with its dependencies, ``hydra-core``, ``colorama``,
``pandas`` (the console logger's ``flatten_dict``), ``jaxtyping``, ``safetensors``, ``matplotlib``.
A recording logger is added to Mava's ``MultiLogger``: every logged event goes to
``OUT/metrics.jsonl``.

harl's side is ``harl train pipelines/sable_smax_3m.toml --set run.seed=S --set
run.total_env_steps=N --set evaluator.deterministic=false`` (Mava's Sable evaluator samples its
actions: ``make_rec_sable_act_fn`` calls ``get_actions``), into ``OUT``; a run stopped midway is
continued with ``harl train --resume OUT``; ``--set evaluator.every_iterations=8`` is its logging
change.  Both sides evaluate 32 episodes every 32,768 env steps.  Mava's loop evaluates the parameters it had *before* each block of training
(``rec_sable.py`` hands ``learner_state.params``, not the output's, to the evaluator) and logs the
result at the block's end; ``report`` plots each evaluation at the env steps its parameters were
trained for (``t - 32,768``), so Mava's first point is its initial policy and harl's first is after
32,768 steps.  Both sides run one CPU thread (XLA's Eigen pool off; harl's ``torch_threads = 1``).

::

    /work/mava-venv/bin/python benchmarks/sable_mava_learning.py mava --seed 1 --steps 327680 --chunk 32 --out /work/sable-parity/mava-s1
    /work/venv/bin/python benchmarks/sable_mava_learning.py harl --seed 1 --steps 327680 --out /work/sable-parity/harl-s1
    /work/venv/bin/python benchmarks/sable_mava_learning.py queue --steps 327680 --chunk 32    # all six, one at a time
    /work/venv/bin/python benchmarks/sable_mava_learning.py time --side mava --seconds 900 --chunk 32   # env-steps/s
    /work/venv/bin/python benchmarks/sable_mava_learning.py report --steps 327680              # table, JSON, figure

``queue`` runs harl-s1, mava-s1, harl-s2, ... one after another, skipping a run whose ``done.json``
exists (a stopped Mava run starts again from its beginning; a stopped harl run resumes from its
checkpoint).  ``report`` applies docs/learning-parity.md's rule at every tenth of the budget: each
run's first evaluation at or past the mark; |mean harl − mean Mava| ≤ the larger of the two
sides' standard deviations over seeds (population std); it prints the markdown table, writes
``benchmarks/results/sable_mava_learning.json`` and the figure
``docs/learning_parity_sable_smax_3m.png``.
"""

from __future__ import annotations

import argparse
import csv
import importlib.abc
import importlib.machinery
import json
import os
import subprocess
import sys
import time
import types
from pathlib import Path
from typing import Any

from parity_marks import at_tenths, compare, markdown  # this folder: a script's own, on sys.path

ROOT = Path(__file__).resolve().parent.parent
PIPELINE = ROOT / "pipelines" / "sable_smax_3m.toml"
OUT = Path("/work/sable-parity")
RESULTS = ROOT / "benchmarks" / "results" / "sable_mava_learning.json"
FIGURE = ROOT / "docs" / "learning_parity_sable_smax_3m.png"
MAVA_PYTHON = "/work/mava-venv/bin/python"
HARL = str(Path(sys.executable).with_name("harl"))
UPDATE_STEPS = 16 * 2 * 128  # Mava: num_envs x update_batch_size x rollout_length; harl: 32 envs x 128
EVAL_UPDATES = 8  # an evaluation every 8 updates on both sides: 32,768 env steps, a tenth of 327,680
EVAL_EVERY = EVAL_UPDATES * UPDATE_STEPS
SINGLE_THREAD_XLA = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"


def load() -> str:
    """The 1-, 5- and 15-minute load averages."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


# -- Mava's side (runs in /work/mava-venv) ----------------------------------------------------

class _Stub(types.ModuleType):
    """A stand-in module: every attribute asked for is a fresh class (never an instance's type)."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        value = type(name, (), {})
        setattr(self, name, value)
        return value


STUBS = ("neptune", "neptune.utils", "marl_eval", "marl_eval.json_tools", "tensorboard_logger", "brax",
         "brax.envs", "jaxmarl.environments.mabrax", "gigastep", "gigastep.gigastep_env", "matrax",
         "matrax.env", "gymnax", "gymnax.environments", "gymnax.environments.spaces", "mava.wrappers.jumanji",
         "jumanji.environments.routing.connector.generator")


def install_stubs() -> None:
    """Stand-ins for what Mava imports but its SMAX path never calls (the module docstring)."""
    for name in STUBS:
        sys.modules[name] = _Stub(name)
    for name in STUBS:
        parent, _, child = name.rpartition(".")
        if parent in sys.modules and isinstance(sys.modules[parent], _Stub):
            setattr(sys.modules[parent], child, sys.modules[name])


class _PatchedLoader(importlib.machinery.SourceFileLoader):
    """Mava's source with the replay's one-line patches made before it is compiled."""

    def __init__(self, fullname: str, path: str, key: str, patch: Any) -> None:
        super().__init__(fullname, path)
        self.key, self.patch = key, patch

    def get_code(self, fullname: str) -> Any:
        source = Path(self.path).read_text(encoding="utf-8")
        return compile(self.patch(source, self.key), self.path, "exec", dont_inherit=True)


class PatchingFinder(importlib.abc.MetaPathFinder):
    """Finds Mava's patched modules as usual and hands them to ``_PatchedLoader``."""

    def __init__(self, patch: Any, keys: dict[str, str]) -> None:
        self.patch, self.keys = patch, keys  # module name -> PATCHES key

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname not in self.keys:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.origin is None:
            return None
        spec.loader = _PatchedLoader(fullname, spec.origin, self.keys[fullname], self.patch)
        return spec


def mava_overrides(seed: int, steps: int, chunk: int = 0) -> list[str]:
    """The changes to Mava's rec_sable config: task, seed, budget, evaluation cadence; with ``chunk``
    also the chunkwise form of retention over chunks of that many timesteps (the same function)."""
    n_updates = steps // UPDATE_STEPS
    out = ["env=smax", "env.scenario.task_name=3m", f"system.seed={seed}", f"system.total_timesteps={steps}",
           f"arch.num_evaluation={n_updates // EVAL_UPDATES}"]
    if chunk:
        out += ["network.rec_config.use_chunkwise=true", f"network.rec_config.timestep_chunk_size={chunk}"]
    return out


def run_mava(src: Path, seed: int, steps: int, out: Path, evaluations: int | None = None, chunk: int = 0) -> None:
    """Mava's rec_sable on SMAX 3m through its own run_experiment, every log event recorded."""
    if steps % EVAL_EVERY and evaluations is None:
        raise SystemExit(f"--steps {steps}: use a multiple of {EVAL_EVERY} (an evaluation every {EVAL_UPDATES} updates)")
    os.environ.setdefault("XLA_FLAGS", SINGLE_THREAD_XLA)
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from sable_mava_replay import MAVA_COMMIT, PATCHES, patch  # the replay's patches, one list for both

    install_stubs()
    sys.meta_path.insert(0, PatchingFinder(patch, {
        "mava.networks.retention": "mava/networks/retention.py",
        "mava.networks.utils.sable.discrete_trainer_executor": "mava/networks/utils/sable/discrete_trainer_executor.py",
        "mava.systems.sable.anakin.rec_sable": "loss"}))
    assert set(PATCHES) == {"mava/networks/retention.py", "mava/networks/utils/sable/discrete_trainer_executor.py",
                            "loss"}, "a patch the finder does not apply"
    sys.path.insert(0, str(src))
    import jax
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    jax.config.update("jax_compilation_cache_dir", str(OUT / "jax-cache"))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 5.0)
    overrides = mava_overrides(seed, steps, chunk)
    if evaluations is not None:  # `time`: a short run, one update per evaluation
        overrides[4] = f"arch.num_evaluation={evaluations}"
    here = Path.cwd()
    os.chdir(src)  # rec_sable.yaml's searchpath is file://mava/configs, relative to Mava's root
    try:
        with initialize_config_dir(config_dir=str(src / "mava" / "configs" / "default"), version_base="1.2"):
            cfg = compose(config_name="rec_sable", overrides=overrides)
    finally:
        os.chdir(here)

    import mava.utils.logger as mava_logger
    out.mkdir(parents=True, exist_ok=True)
    record = out / "metrics.jsonl"
    record.write_text("", encoding="utf-8")
    per_eval = (steps // UPDATE_STEPS // cfg.arch.num_evaluation) * UPDATE_STEPS
    started = time.time()

    class Recorder(mava_logger.BaseLogger):
        """Every event Mava logs, as one JSON line: its env steps, and for evaluations the env
        steps the evaluated parameters were trained for (one block earlier: rec_sable.py
        evaluates ``learner_state.params`` before taking the block's output)."""

        def __init__(self) -> None:
            pass

        def log_stat(self, key: str, value: float, step: int, eval_step: int, event: Any) -> None:
            pass

        def log_dict(self, data: dict, step: int, eval_step: int, event: Any) -> None:
            flat = mava_logger.flatten_dict(data, sep="/")
            row = {"event": event.value, "t": int(step), "eval_step": int(eval_step),
                   "wall_s": round(time.time() - started, 1), "load": load()}
            if event.value in ("evaluator", "absolute"):
                row["params_steps"] = int(step) - per_eval if event.value == "evaluator" else None
            row.update({k: float(v) for k, v in flat.items()})
            with record.open("a", encoding="utf-8") as f:
                f.write(json.dumps(row) + "\n")

    make_multi = mava_logger._make_multi_logger

    def with_recorder(config: Any) -> Any:
        multi = make_multi(config)
        multi.loggers.append(Recorder())
        return multi

    mava_logger._make_multi_logger = with_recorder
    from mava.systems.sable.anakin import rec_sable

    OmegaConf.set_struct(cfg, False)  # as rec_sable.hydra_entry_point does
    cfg.logger.system_name = "rec_sable"
    (out / "config.yaml").write_text(OmegaConf.to_yaml(cfg), encoding="utf-8")
    meta = {"side": "mava", "mava_commit": MAVA_COMMIT, "seed": seed, "steps": steps, "overrides": overrides,
            "jax": jax.__version__, "xla_flags": os.environ.get("XLA_FLAGS", ""), "load_start": load()}
    performance = rec_sable.run_experiment(cfg)
    meta.update({"final_eval_win_rate": float(performance), "wall_s": round(time.time() - started, 1),
                 "load_end": load()})
    if evaluations is None:
        (out / "done.json").write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(meta))


# -- harl's side -------------------------------------------------------------------------------

def harl_command(seed: int, steps: int, out: Path) -> list[str]:
    """``harl train`` of the shipped pipeline (a new run), or ``--resume`` where one was begun."""
    if (out / "checkpoints").is_dir() and any((out / "checkpoints").iterdir()):
        return [HARL, "train", "--resume", str(out), "--set", f"run.total_env_steps={steps}"]
    return [HARL, "train", str(PIPELINE), "--set", f"run.seed={seed}", "--set", f"run.total_env_steps={steps}",
            "--set", "evaluator.deterministic=false", "--set", f"evaluator.every_iterations={EVAL_UPDATES}",
            "--run-dir", str(out)]


def run_harl(seed: int, steps: int, out: Path) -> None:
    started, load_start, command, commit = time.time(), load(), harl_command(seed, steps, out), git_head()
    subprocess.run(command, check=True)
    meta = {"side": "harl", "seed": seed, "steps": steps, "command": " ".join(command[1:]), "commit": commit,
            "wall_s": round(time.time() - started, 1), "load_start": load_start, "load_end": load()}
    (out / "done.json").write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(meta))


def git_head() -> str:
    return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True, check=False).stdout.strip()


# -- the queue, timing ----------------------------------------------------------------------

def side_command(side: str, seed: int, steps: int, out: Path, src: Path, chunk: int = 0) -> list[str]:
    python = MAVA_PYTHON if side == "mava" else sys.executable
    cmd = [python, str(Path(__file__).resolve()), side, "--seed", str(seed), "--steps", str(steps), "--out", str(out)]
    return cmd + (["--mava-src", str(src), "--chunk", str(chunk)] if side == "mava" else [])


def queue(seeds: list[int], steps: int, root: Path, src: Path, sides: list[str], chunk: int = 0) -> None:
    """Every (seed, side) run one after another, each in its own process, its output in
    ``root/<side>-s<seed>/`` (``log.txt`` the process's output); finished runs are skipped."""
    for seed in seeds:
        for side in sides:
            out = root / f"{side}-s{seed}"
            if (out / "done.json").exists():
                continue
            out.mkdir(parents=True, exist_ok=True)
            with (out / "log.txt").open("a", encoding="utf-8") as log:
                log.write(f"# {time.strftime('%Y-%m-%d %H:%M:%S')} start, load {load()}\n")
                log.flush()
                rc = subprocess.run(side_command(side, seed, steps, out, src, chunk), stdout=log, stderr=subprocess.STDOUT,
                                    check=False).returncode
                log.write(f"# {time.strftime('%Y-%m-%d %H:%M:%S')} exit {rc}, load {load()}\n")


def time_side(side: str, seconds: float, src: Path, root: Path, chunk: int = 0) -> None:
    """A short run of one side, stopped after ``seconds``: its env-steps/s past the first block
    (Mava: one update per block, the compiled program reused; harl: its own steps/s)."""
    out = root / (f"time-{side}" + (f"-chunk{chunk}" if chunk and side == "mava" else ""))
    steps = 21 * UPDATE_STEPS  # Mava: 20 blocks of one update (its loop needs more updates than blocks)
    cmd = side_command(side, 1, steps, out, src, chunk)
    if side == "mava":
        cmd += ["--evaluations", "20"]
    else:
        cmd = [HARL, "train", str(PIPELINE), "--set", "run.seed=1", "--set", f"run.total_env_steps={steps}",
               "--set", "evaluator.every_iterations=0", "--run-dir", str(out)]
        if out.exists():
            import shutil
            shutil.rmtree(out)
    before = load()
    started = time.time()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        proc.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        proc.terminate()
        proc.wait()
    wall = time.time() - started
    if side == "mava":
        rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if line]
        acts = [r for r in rows if r["event"] == "actor" and "steps_per_second" in r]
        rates = [r["steps_per_second"] for r in acts[1:]]
        first = acts[0]["wall_s"] if acts else None
    else:
        with (out / "metrics.csv").open() as f:
            its = list(csv.DictReader(f))
        rates = [float(r["steps_per_s"]) for r in its[1:]]
        first = float(its[0]["wall_time"]) if its else None
    rate = sum(rates) / len(rates) if rates else float("nan")
    print(json.dumps({"side": side, "wall_s": round(wall, 1), "first_block_s": first, "blocks_after_first": len(rates),
                      "env_steps_per_s": round(rate, 1), "rates": [round(r, 1) for r in rates],
                      "load_before": before, "load_after": load()}))


# -- the report --------------------------------------------------------------------------------

Curve = list[tuple[int, float]]


def mava_curves(run: Path) -> dict[str, Curve]:
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line]
    evals = [r for r in rows if r["event"] == "evaluator"]
    return {"win": [(r["params_steps"], r["win_rate"] / 100.0) for r in evals],
            "return": [(r["params_steps"], r["episode_return/mean"]) for r in evals]}


def harl_curves(run: Path) -> dict[str, Curve]:
    with (run / "metrics.csv").open() as f:
        rows = [r for r in csv.DictReader(f) if r.get("eval_win")]
    return {"win": [(int(r["env_steps"]), float(r["eval_win"])) for r in rows],
            "return": [(int(r["env_steps"]), float(r["eval_return"])) for r in rows]}


def report(steps: int, root: Path, seeds: list[int]) -> None:
    import numpy as np
    curves: dict[str, dict[int, dict[str, Curve]]] = {"mava": {}, "harl": {}}
    status: dict[str, str] = {}
    for side, read in (("mava", mava_curves), ("harl", harl_curves)):
        for seed in seeds:
            run = root / f"{side}-s{seed}"
            name = "metrics.jsonl" if side == "mava" else "metrics.csv"
            if not (run / name).exists():
                continue
            c = read(run)
            if c["win"]:
                curves[side][seed] = c
                last = max(t for t, _ in c["win"])
                status[f"{side}-s{seed}"] = "finished" if (run / "done.json").exists() else f"partial, to {last:,}"
    result: dict[str, Any] = {"budget": steps, "runs": status, "tables": {}}
    for metric, label in (("win", "win rate"), ("return", "return")):
        tenths = {side: [at_tenths(c[metric], steps) for c in runs.values()] for side, runs in curves.items()}
        rows = compare(tenths["mava"], tenths["harl"], steps, ("mava", "harl"))
        result["tables"][metric] = rows
        print(f"\nEvaluation {label} (32 sampled episodes; each run's first evaluation at or past the mark):\n")
        print("\n".join(markdown(rows, ("mava", "harl"), ("Mava rec_sable", "harl"), digits=3)))
    print("\nruns:", json.dumps(status))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6.0, 3.6))
    for side, label, color in (("harl", "harl sable", "tab:blue"), ("mava", "Mava 73c4611 rec_sable", "tab:orange")):
        runs = curves[side]
        if not runs:
            continue
        marks = sorted({t for c in runs.values() for t, _ in c["win"]})
        mean, std, xs = [], [], []
        for t in marks:
            vals = [dict(c["win"])[t] for c in runs.values() if t in dict(c["win"])]
            xs.append(t)
            mean.append(float(np.mean(vals)))
            std.append(float(np.std(vals)))
        m, s = np.array(mean), np.array(std)
        ax.plot(xs, m, color=color, marker="o", ms=2.5, label=f"{label} ({len(runs)} seeds)")
        ax.fill_between(xs, m - s, m + s, color=color, alpha=0.2)
    ax.set_xlabel("env steps (of the evaluated parameters)")
    ax.set_ylabel("evaluation win rate")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title("Sable on SMAX 3m: mean ± std over seeds", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    fig.savefig(FIGURE, dpi=120)
    print(f"wrote {FIGURE.relative_to(ROOT)} and {RESULTS.relative_to(ROOT)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    for name in ("mava", "harl"):
        p = sub.add_parser(name, help=f"one run of {name}'s Sable")
        p.add_argument("--seed", type=int, required=True)
        p.add_argument("--steps", type=int, required=True)
        p.add_argument("--out", type=Path, required=True)
        if name == "mava":
            p.add_argument("--mava-src", type=Path, default=Path("/work/mava-src"))
            p.add_argument("--evaluations", type=int, default=None, help="(time) this many blocks instead")
            p.add_argument("--chunk", type=int, default=0, help="Mava's chunkwise retention over this many timesteps")
    q = sub.add_parser("queue", help="every run, one at a time, finished ones skipped")
    q.add_argument("--steps", type=int, required=True)
    q.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    q.add_argument("--sides", nargs="+", default=["harl", "mava"], choices=["mava", "harl"])
    q.add_argument("--root", type=Path, default=OUT)
    q.add_argument("--mava-src", type=Path, default=Path("/work/mava-src"))
    q.add_argument("--chunk", type=int, default=0, help="Mava's chunkwise retention over this many timesteps")
    t = sub.add_parser("time", help="env-steps/s of one side over a short run")
    t.add_argument("--side", choices=["mava", "harl"], required=True)
    t.add_argument("--seconds", type=float, default=120.0)
    t.add_argument("--root", type=Path, default=OUT)
    t.add_argument("--mava-src", type=Path, default=Path("/work/mava-src"))
    t.add_argument("--chunk", type=int, default=0, help="Mava's chunkwise retention over this many timesteps")
    r = sub.add_parser("report", help="the parity table, JSON and figure")
    r.add_argument("--steps", type=int, required=True)
    r.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    r.add_argument("--root", type=Path, default=OUT)
    args = parser.parse_args()
    if args.cmd == "mava":
        run_mava(args.mava_src, args.seed, args.steps, args.out, args.evaluations, args.chunk)
    elif args.cmd == "harl":
        run_harl(args.seed, args.steps, args.out)
    elif args.cmd == "queue":
        queue(args.seeds, args.steps, args.root, args.mava_src, args.sides, args.chunk)
    elif args.cmd == "time":
        time_side(args.side, args.seconds, args.mava_src, args.root, args.chunk)
    else:
        report(args.steps, args.root, args.seeds)


if __name__ == "__main__":
    main()
