"""Cost of checking env outputs, as a share of one vector step.

    python benchmarks/check_cost.py [--envs 8] [--repeat 200]

On MPE simple_spread (the cheapest shipped env, so the largest relative cost) this times,
each as the best of ``--repeat`` runs so that load from other processes drops out:
one ``InlineVectorEnv.step`` (checks included as they run by default after the first
steps), the full protocol check of one vector step's ``EnvStep`` results
(``EnvOutputCheck.step`` for every env), and the finite check of the stacked batch
(``check_finite`` on obs, state and rewards, which runs on every step).
"""

from __future__ import annotations

import argparse
import timeit

import numpy as np

from harl.envs.checks import check_finite
from harl.envs.mpe import MPEConfig
from harl.envs.vector import InlineVectorEnv


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args()
    venv = InlineVectorEnv(MPEConfig(continuous_actions=True), args.envs, seed=0)
    rng = np.random.default_rng(0)
    actions = [rng.uniform(0, 1, (args.envs, *s.shape)).astype(np.float32) for s in venv.action_spaces]
    venv.reset(seed=0)
    check = venv._check
    check.steps_left = 0  # the default after the first steps: finite check only

    def best(fn: object, number: int) -> float:
        return min(timeit.repeat(fn, number=number, repeat=args.repeat)) / number  # type: ignore[arg-type]

    step_s = best(lambda: venv.step(actions), 5)
    steps = [env.step([a[k] for a in actions]) for k, env in enumerate(venv.envs)]
    full_s = best(lambda: [check.step(k, s) for k, s in enumerate(steps)], 20)
    batch = venv.step(actions)

    def finite() -> None:
        for i, o in enumerate(batch.obs):
            check_finite("mpe env", "obs", o, i)
        check_finite("mpe env", "state", batch.state)
        check_finite("mpe env", "rewards", batch.rewards)

    finite_s = best(finite, 50)
    venv.close()
    print(f"MPE simple_spread, {args.envs} envs, inline (best of {args.repeat}):")
    print(f"  vector step                {step_s * 1e6:8.1f} us")
    print(f"  finite check (every step)  {finite_s * 1e6:8.1f} us = {100 * finite_s / step_s:.2f} % of a step")
    print(f"  full protocol check        {full_s * 1e6:8.1f} us = {100 * full_s / step_s:.2f} % of a step")


if __name__ == "__main__":
    main()
