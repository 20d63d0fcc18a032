#!/bin/bash
# The CUDA path in one short script, for a machine with an NVIDIA GPU and a CUDA torch but no
# network (wheels of the pure-Python dependencies it lacks are passed in WHEELS).
#
#     WHEELS=.devwheels OUT=/tmp/out bash benchmarks/cuda_check.sh            # about 6 minutes
#     FULL=1 WHEELS=.devwheels OUT=/tmp/out bash benchmarks/cuda_check.sh     # + the whole suite, HASAC/HATRPO, curves
#
# 1. tests/test_cuda.py (both families train on cuda and resume exactly; a GPU run acts on the
#    CPU) and the stacked actors on cuda against the per-agent loop (issue 37);
# 2. raw env-steps/s of the torch MPE on the GPU, from 1k to 256k worlds;
# 3. issue 37's GPU rows: training env-steps/s of HAPPO on the torch MPE, worlds and learner on
#    the GPU, at 1,024 worlds x 16 steps (happo_mpe_torch_spread_fast.toml), interleaved with
#    [policy] batch_agents and compile and MAPPO with batched agents (throughput.py --variant);
#    ATen ops per env step (ops_count.py); one whole run of the fast pipeline to 2M env steps
#    (steady rate, first eval >= -60); a population of 16 seeds (--vectorize, batched update);
# 3b. issue 49: the compiled collection step (env step, acting, buffer write as one graph) under
#    CUDA graphs against eager, collection env-steps/s and the first rollout's agreement;
# 4. (FULL=1) the whole test suite with run.device="auto" resolving to cuda, the learning curve
#    at 2,048 worlds, HASAC and HATRPO iterations and a resume, time to eval >= -60 (3 seeds).
set -u
OUT=${OUT:-/tmp/cuda_check}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
PY=${PY:-python3}
log() { echo "== $(date -u +%T) $*" | tee -a "$OUT/steps.log"; }

log setup
[ -n "${WHEELS:-}" ] && $PY -m pip install -q --no-deps --no-index "$WHEELS"/*.whl 2>&1 | tail -2
nvidia-smi -L
$PY -c "import torch, harl; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), torch.cuda.get_device_name(0))"

log "tests/test_cuda.py"
timeout 150 $PY -m pytest -q -p no:cacheprovider -n 7 --tb=short -rfE tests/test_cuda.py > "$OUT/test_cuda.log" 2>&1
echo "test_cuda rc=$?"; tail -3 "$OUT/test_cuda.log"

log "stacked actors on cuda against the per-agent loop (float rounding)"
timeout 60 $PY - <<'PYEOF' 2>&1 | tee "$OUT/stacked_cuda.txt"
import numpy as np, torch
from gymnasium import spaces
from harl.nets.stacked import StackedActors
from harl.policy.on_policy import Actor, PolicyConfig
torch.manual_seed(0)
for space in (spaces.Box(0, 1, (5,), np.float32), spaces.Discrete(5)):
    team = [Actor(18, space, PolicyConfig()).cuda() for _ in range(3)]
    stack = StackedActors(team)
    obs = torch.randn(3, 1024, 18, device="cuda")
    acts = torch.stack([a.act(obs[i], None, True)[0] for i, a in enumerate(team)])
    lp, ent = stack.evaluate(stack.params(grad=True), obs, acts, None)
    worst = max(float((lp[i] - a.evaluate(obs[i], acts[i], None)[0]).detach().abs().max()) for i, a in enumerate(team))
    lp.sum().backward()
    print(type(space).__name__, "max |log-prob difference| vs the loop:", worst, "ok" if worst < 1e-4 else "FAIL")
PYEOF

log "issue 49: the compiled collection step on cuda (CUDA graphs) against eager, interleaved"
if ! $PY -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)"; then
    echo "skipped: torch sees no CUDA device" | tee "$OUT/compiled_collect_skipped.txt"
else for pipe in happo_mpe_torch_spread ippo_mpe_spread_jaxmarl; do
    timeout 300 $PY benchmarks/compiled_collect.py pipelines/$pipe.toml --device ${DEV:-cuda} --rounds 3 \
        2>&1 | tail -6 | tee "$OUT/compiled_collect_$pipe.txt"
done; fi

log "raw torch MPE on cuda"
timeout 60 $PY benchmarks/mpe_torch_throughput.py --only raw --device cuda --no-mpe2 \
    --envs 1024,8192,65536,262144 2>&1 | tee "$OUT/raw_cuda.jsonl"

CUDA_SET="--set env.device=${DEV:-cuda} --set run.device=${DEV:-cuda}"
log "issue 37: HAPPO fast pipeline on cuda, interleaved variants (medians of 2 rounds)"
timeout 420 $PY benchmarks/throughput.py pipelines/happo_mpe_torch_spread_fast.toml --rounds 2 --iterations 4 \
    $CUDA_SET --set evaluator.every_iterations=1000000 --variant policy.batch_agents=true \
    --variant policy.batch_agents=true,policy.compile=true --variant updater.kind=simultaneous \
    --variant updater.kind=simultaneous,policy.batch_agents=true 2>&1 | tee "$OUT/variants_cuda.txt"

log "issue 37: ATen ops per env step on cuda (each a kernel launch or a host op)"
timeout 120 $PY benchmarks/ops_count.py pipelines/happo_mpe_torch_spread_fast.toml $CUDA_SET \
    --variant policy.batch_agents=true --variant updater.kind=simultaneous,policy.batch_agents=true 2>&1 \
    | tail -5 | tee "$OUT/ops_cuda.txt"

log "issue 37: one run of the fast pipeline on cuda to 2M env steps, batched agents"
timeout 150 $PY -m harl train pipelines/happo_mpe_torch_spread_fast.toml --quiet --run-dir "$OUT/fast_cuda" $CUDA_SET \
    --set policy.batch_agents=true --set run.total_env_steps=2000000 --set evaluator.every_iterations=5 2>&1 | tail -3
$PY - "$OUT/fast_cuda/metrics.csv" <<'PYEOF'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
t, s = [float(r["wall_time"]) for r in rows], [float(r["env_steps"]) for r in rows]
k = len(rows) // 4
print(f"steady training env-steps/s: {(s[-1] - s[k]) / (t[-1] - t[k]):,.0f} over {s[-1] - s[k]:,.0f} steps")
hit = next((r for r in rows if r.get("eval_return") and float(r["eval_return"]) >= -60), None)
print("first eval >= -60:", "none" if hit is None else f"{hit['env_steps']} env steps at {float(hit['wall_time']):.1f} s")
PYEOF

if [ -n "${FULL:-}" ]; then
log "pytest (device auto = cuda)"
timeout 200 $PY -m pytest -q -p no:cacheprovider -n 12 --timeout 60 --tb=line -rfE \
    --continue-on-collection-errors tests/ > "$OUT/pytest.log" 2>&1
echo "pytest rc=$?"; tail -5 "$OUT/pytest.log"

log "training iterations on cuda (learner; torch MPE worlds on cuda too)"
timeout 100 $PY benchmarks/mpe_torch_throughput.py --only train --device cuda --iterations 3 2>&1 \
    | tee "$OUT/train_cuda.jsonl"

log "HAPPO torch MPE, 2,048 worlds on cuda, 1M env steps, learning curve"
timeout 100 $PY -m harl train pipelines/happo_mpe_torch_spread.toml --quiet --run-dir "$OUT/happo_torch_cuda" \
    --set env.device=${DEV:-cuda} --set run.device=${DEV:-cuda} --set collector.n_envs=2048 --set collector.rollout_length=25 \
    --set run.total_env_steps=1000000 --set evaluator.every_iterations=4 --set checkpoint.every_iterations=10 2>&1 | tail -5
cp "$OUT/happo_torch_cuda/metrics.csv" "$OUT/happo_torch_cuda_metrics.csv" 2>/dev/null

log "HASAC (mpe2 on CPU, learner on cuda), HATRPO, resume"
timeout 45 $PY -m harl train pipelines/hasac_mpe_spread.toml --quiet --run-dir "$OUT/hasac" \
    --set run.device=${DEV:-cuda} --set run.total_env_steps=6000 2>&1 | tail -3
timeout 45 $PY -m harl train pipelines/hatrpo_mpe_spread.toml --quiet --run-dir "$OUT/hatrpo" \
    --set run.device=${DEV:-cuda} --set run.total_env_steps=12000 --set checkpoint.every_iterations=1 2>&1 | tail -3
sed -i "s/^total_env_steps = .*/total_env_steps = 16000/" "$OUT/hatrpo/pipeline.toml"
timeout 45 $PY -m harl train --resume "$OUT/hatrpo" --quiet 2>&1 | tail -3
for r in hasac hatrpo; do echo "$r: $(tail -1 "$OUT/$r/metrics.csv" 2>/dev/null | cut -c1-160)"; done

fi

log "population: 16 seeds x 1,024 worlds of HAPPO torch MPE on cuda, batched update"
timeout 150 $PY -m harl train pipelines/happo_mpe_torch_spread.toml --seeds 1-16 --vectorize --quiet \
    --run-dir "$OUT/population" --set env.device=${DEV:-cuda} --set run.device=${DEV:-cuda} \
    --set collector.n_envs=1024 --set collector.rollout_length=32 --set run.total_env_steps=2000000 \
    --set evaluator.every_iterations=20 --set checkpoint.every_iterations=1000 2>&1 | tail -4
$PY -c "import sys, pathlib; sys.path.insert(0, 'benchmarks'); from population import steady_rate; \
runs = sorted(p for p in pathlib.Path('$OUT/population').iterdir() if p.is_dir()); \
print(f'population aggregate training env-steps/s (steady): {steady_rate(runs, 0):,.0f}')"

[ -n "${FULL:-}" ] && {
log "time to eval >= -60 (mpe2 scale), fast pipeline on cuda, median of 3 seeds"
timeout 150 $PY benchmarks/time_to_return.py harl pipelines/happo_mpe_torch_spread_fast.toml --target -60 \
    --seeds 1,2,3 --limit 45 --set env.device=${DEV:-cuda} --set run.device=${DEV:-cuda} 2>&1 | tee "$OUT/ttr_cuda.txt"
}
log done
