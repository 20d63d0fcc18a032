"""Bad-input corpus of issue 38: sizes that cannot fit, run names that are no directory name,
resume edits that would not continue the run.  Each case is a real ``harl`` process:

    python benchmarks/bad_inputs.py [--out DIR] [--only sizes,names,resume]

A case is clean when it exits 2 with one paragraph on stderr (one line starting ``harl: ``, no
traceback) and wrote nothing: every file under the work folder (lock files aside) is the same,
byte for byte, before and after.  Prints one line per case and the count.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).parents[1]
sys.path.insert(0, str(ROOT))

from tests.fakes.bad_env import write_pipeline  # noqa: E402

HAPPO = ROOT / "pipelines" / "happo_mpe_spread.toml"
HASAC = ROOT / "pipelines" / "hasac_mpe_spread.toml"
ISSUE = ["--set", "collector.n_envs=100000", "--set", "collector.rollout_length=100000"]
NAMES = ['"../../escape"', '"a/b"', '"a\\\\b"', '"x\\"]\\n[foo"', '".."', '""', '"tab\\there"', '"what?"',
         '".hidden"', '"trailing "', f'"{"n" * 201}"', '"nul\\u0000x"']
EDITS = ["run.seed=2", 'env.kwargs={mode="ok",sleep=0.0}', "collector.n_envs=4", "collector.rollout_length=20",
         "policy.hidden_sizes=[16]", "critic.hidden_sizes=[16]", 'updater.objective.kind="a2c"', "evaluator.n_envs=2",
         'critic.state_type="FP"', "buffer.fp_advantage_norm=false", 'updater.kind="simultaneous"']


def harl(args: list[str]) -> tuple[int, str, float]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "harl", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600, check=False)
    return done.returncode, done.stderr, time.monotonic() - started


def snapshot(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file() and p.name != ".lock"}


def cases(out: Path, only: set[str]) -> list[tuple[str, str, list[str]]]:
    logs = ["--set", f'logging.dir="{out / "logs"}"']
    found: list[tuple[str, str, list[str]]] = []
    if "sizes" in only:
        found += [
            ("sizes", "check collector.n_envs=1e9", ["check", str(HAPPO), "--set", "collector.n_envs=1_000_000_000"]),
            ("sizes", "check evaluator.n_envs=1e9", ["check", str(HAPPO), "--set", "evaluator.n_envs=1_000_000_000"]),
            ("sizes", "check rollout_length=1e9", ["check", str(HAPPO), "--set", "collector.rollout_length=1_000_000_000"]),
            ("sizes", "check issue 38's case", ["check", str(HAPPO), *ISSUE]),
            ("sizes", "train issue 38's case", ["train", str(HAPPO), *ISSUE, *logs]),
            ("sizes", "train issue 38's case, inline", ["train", str(HAPPO), *ISSUE, "--set", 'collector.backend="inline"',
                                                         *logs]),
            ("sizes", "check buffer.capacity=1e12", ["check", str(HASAC), "--set", "buffer.capacity=1_000_000_000_000"]),
            ("sizes", "train buffer.capacity=1e9", ["train", str(HASAC), "--set", "buffer.capacity=1_000_000_000", *logs]),
            ("sizes", "train collector.n_envs=1e7 (hasac)", ["train", str(HASAC), "--set", "collector.n_envs=10_000_000",
                                                             *logs]),
        ]
    if "names" in only:
        pipeline = out / "p.toml"
        for name in NAMES:
            for command in ("check", "train"):
                found.append(("names", f"{command} run.name={name[:24]}",
                              [command, str(pipeline), "--set", f"run.name={name}", *logs]))
    if "resume" in only:
        run = out / "run"
        for edit in EDITS:
            found.append(("resume", f"--resume --set {edit}", ["train", "--resume", str(run), "--set", edit]))
            found.append(("resume", f"--resume --set {edit} (longer)", ["train", "--resume", str(run), "--set", edit,
                                                                        "--set", "run.total_env_steps=80"]))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--only", default="sizes,names,resume")
    args = parser.parse_args(argv)
    out = args.out or Path(tempfile.mkdtemp(prefix="harl-bad-inputs-"))
    out.mkdir(parents=True, exist_ok=True)
    write_pipeline(out / "p.toml")
    if not (out / "run" / "metrics.csv").is_file():
        code, err, _ = harl(["train", str(out / "p.toml"), "--run-dir", str(out / "run"), "--quiet"])
        assert code == 0, err
    started, clean, tried = time.monotonic(), 0, 0
    for group, label, command in cases(out, set(args.only.split(","))):
        before = snapshot(out)
        code, err, seconds = harl(command)
        lines = err.strip().splitlines()
        ok = (code == 2 and len(lines) == 1 and lines[0].startswith("harl: ") and "Traceback" not in err
              and snapshot(out) == before)
        tried, clean = tried + 1, clean + ok
        print(f"{'clean' if ok else 'NOT CLEAN':9} {group:6} {seconds:5.1f} s  exit {code}  {label}"
              + ("" if ok else f"\n          {err.strip()[:600]}"), flush=True)
    print(f"{clean} of {tried} clean in {time.monotonic() - started:.0f} s; load {os.getloadavg()[0]:.2f}")
    return 0 if clean == tried else 1


if __name__ == "__main__":
    sys.exit(main())
