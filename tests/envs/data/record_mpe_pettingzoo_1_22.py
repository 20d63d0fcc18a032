"""Record pettingzoo 1.22 MPE steps for tests/envs/test_mpe_legacy.py.

Made with (pettingzoo 1.22 does not install beside mpe2, so in a separate venv):

    python -m venv /tmp/pz122 && /tmp/pz122/bin/pip install pettingzoo==1.22.3 pygame "numpy<2"
    /tmp/pz122/bin/python tests/envs/data/record_mpe_pettingzoo_1_22.py tests/envs/data/mpe_pettingzoo_1_22.json

Each scenario: one seeded episode of 12 steps with continuous actions drawn in [-0.3, 1.3]
(so some fall outside the Box and are clipped) and rounded to 4 decimals before stepping,
so the stored actions are exactly the ones played.
"""

import importlib
import json
import sys

import numpy as np
import pettingzoo
from pettingzoo.utils.env_logger import EnvLogger

MODULES = {"simple_spread": "simple_spread_v2", "simple_reference": "simple_reference_v2",
           "simple_speaker_listener": "simple_speaker_listener_v3"}
STEPS = 12


def record(scenario: str, seed: int) -> dict:
    env = importlib.import_module("pettingzoo.mpe." + MODULES[scenario]).parallel_env(
        continuous_actions=True, max_cycles=25)
    obs = env.reset(seed=seed)
    agents = list(env.agents)
    rng = np.random.default_rng(seed)
    steps = []
    for _ in range(STEPS):
        actions = {a: np.round(rng.uniform(-0.3, 1.3, env.action_space(a).shape), 4).astype(np.float32)
                   for a in agents}
        obs, rewards, _, _, _ = env.step(actions)
        steps.append({"actions": [actions[a].tolist() for a in agents],
                      "rewards": [round(float(rewards[a]), 7) for a in agents],
                      "obs": [np.round(obs[a].astype(np.float64), 6).tolist() for a in agents]})
    return {"module": "pettingzoo.mpe." + MODULES[scenario], "seed": seed, "steps": steps}


if __name__ == "__main__":
    EnvLogger.suppress_output()  # one warning per clipped action otherwise
    data = {"pettingzoo": pettingzoo.__version__,
            "scenarios": {name: record(name, seed) for seed, name in enumerate(MODULES, start=5)}}
    with open(sys.argv[1], "w") as f:
        json.dump(data, f, separators=(",", ":"))
