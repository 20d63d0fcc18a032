"""An exported MPE team driven by onnxruntime alone (no torch): ``harl eval``'s episodes, replayed.

    harl export RUN_DIR --format onnx --out spread-onnx
    python examples/onnx_spread.py spread-onnx 20      # mean return == harl eval RUN_DIR --episodes 20

The envs are seeded as harl's evaluator seeds them (run.seed * 1000 + 500 + k for env k,
then unseeded resets) and stepped together, so the episodes are the same ones.
"""

import json
import sys

import numpy as np
import onnxruntime as ort
import tomllib

from harl.envs.mpe import MPEConfig, make_mpe_env  # numpy + mpe2 only: no torch

folder, wanted = sys.argv[1], int(sys.argv[2])
manifest = json.load(open(f"{folder}/policy.json"))
pipeline = tomllib.loads(manifest["pipeline"])
sessions = [ort.InferenceSession(f"{folder}/{a['file']}") for a in manifest["agents"]]
envs = [make_mpe_env(MPEConfig(**pipeline["env"])) for _ in range(pipeline["evaluator"]["n_envs"])]
obs = [env.reset(seed=pipeline["run"]["seed"] * 1000 + 500 + k)[0] for k, env in enumerate(envs)]
returns, running = [], np.zeros(len(envs))
while len(returns) < wanted:
    actions = [s.run(None, {"obs": np.stack([o[i] for o in obs])})[0] for i, s in enumerate(sessions)]
    for k, env in enumerate(envs):
        step = env.step([a[k] for a in actions])
        running[k] += step.rewards.mean(dtype=np.float64)
        obs[k] = step.obs
        if step.terminated or step.truncated:
            returns.append(running[k])
            running[k], obs[k] = 0.0, env.reset()[0]
print(f"{wanted} episodes, mean return {float(np.mean(returns[:wanted]))!r}; torch loaded: {'torch' in sys.modules}")
