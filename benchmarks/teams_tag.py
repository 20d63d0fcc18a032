"""Predators against prey on MPE simple_tag, both learning: the curves and the capture test.

    harl train pipelines/happo-vs-mappo_mpe_tag.toml --set run.total_env_steps=400000 \\
        --set evaluator.every_iterations=5 --run-dir runs/tag-s1
    python benchmarks/teams_tag.py runs/tag-s1 --out docs/teams_tag.png

The figure: each team's training return and the evaluation's captures per episode against env
steps.  The capture test: the run's final predators against its final prey, frozen,
beside random predators (``scripted:random``) against the same prey, ``--episodes`` each; the
learned predators must capture at least twice as often.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from harl import api


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir")
    parser.add_argument("--out", default="teams_tag.png")
    parser.add_argument("--episodes", type=int, default=200)
    args = parser.parse_args()
    from matplotlib.figure import Figure

    rows = api.read_metrics(args.run_dir)
    steps = [r["env_steps"] for r in rows]
    figure = Figure(figsize=(10, 3.6), dpi=110, layout="constrained")
    left, right = figure.subplots(1, 2)
    for team, color in (("predators", "C3"), ("prey", "C0")):
        left.plot(steps, [r[f"{team}_train_return"] for r in rows], color=color, label=team)
    left.set_title("training return of each team")
    left.legend(loc="upper left")
    evaluated = [r for r in rows if r.get("eval_captures") is not None]
    right.plot([r["env_steps"] for r in evaluated], [r["eval_captures"] for r in evaluated], color="C2")
    right.set_title("evaluation: captures per episode")
    for ax in (left, right):
        ax.set_xlabel("env steps")
        ax.grid(True, alpha=0.3)
    figure.savefig(args.out)
    learned = api.play(args.run_dir, args.run_dir, args.episodes, team="predators")
    random = api.play(args.run_dir, "scripted:random", args.episodes, team="prey")
    a, b = learned.metrics["captures"], random.metrics["captures"]
    print(f"wrote {Path(args.out)}")
    print(f"learned predators vs the final prey: {a.show()} captures per episode ({args.episodes} episodes)")
    print(f"random predators  vs the final prey: {b.show()} captures per episode")
    print(f"ratio {a.mean / b.mean:.2f} (learned predators should capture at least twice as often: >= 2)")


if __name__ == "__main__":
    main()
