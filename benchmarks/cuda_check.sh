#!/bin/bash
# The CUDA path in one short script, for a machine with an NVIDIA GPU and a CUDA torch but no
# network (wheels of the pure-Python dependencies it lacks are passed in WHEELS).
#
#     WHEELS=.devwheels OUT=/tmp/out bash benchmarks/cuda_check.sh
#
# 1. tests/test_cuda.py (both families train on cuda and resume exactly; a GPU run acts on the
#    CPU), then the whole test suite with run.device="auto" resolving to cuda (tests that pin CPU numbers may
#    differ in the last bits on a GPU: the log says which failed and how);
# 2. raw env-steps/s of the torch MPE on the GPU, from 1k to 256k worlds;
# 3. training on cuda: HAPPO on the torch MPE with worlds and learner on the GPU (learning
#    curve), the shipped mpe2 pipeline with a GPU learner, HASAC and HATRPO iterations, a resume;
# 4. a population of 16 seeds in one process (--vectorize, batched update) and its aggregate
#    training env-steps/s; time to eval >= -60 of the fast pipeline, median of 3 seeds.
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

log "pytest (device auto = cuda)"
timeout 200 $PY -m pytest -q -p no:cacheprovider -n 12 --timeout 60 --tb=line -rfE \
    --continue-on-collection-errors tests/ > "$OUT/pytest.log" 2>&1
echo "pytest rc=$?"; tail -5 "$OUT/pytest.log"

log "raw torch MPE on cuda"
timeout 60 $PY benchmarks/mpe_torch_throughput.py --only raw --device cuda --no-mpe2 \
    --envs 1024,8192,65536,262144 2>&1 | tee "$OUT/raw_cuda.jsonl"

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

log "population: 16 seeds x 1,024 worlds of HAPPO torch MPE on cuda, batched update"
timeout 150 $PY -m harl train pipelines/happo_mpe_torch_spread.toml --seeds 1-16 --vectorize --quiet \
    --run-dir "$OUT/population" --set env.device=${DEV:-cuda} --set run.device=${DEV:-cuda} \
    --set collector.n_envs=1024 --set collector.rollout_length=32 --set run.total_env_steps=3000000 \
    --set evaluator.every_iterations=20 --set checkpoint.every_iterations=1000 2>&1 | tail -4
$PY -c "import sys, pathlib; sys.path.insert(0, 'benchmarks'); from population import steady_rate; \
runs = sorted(p for p in pathlib.Path('$OUT/population').iterdir() if p.is_dir()); \
print(f'population aggregate training env-steps/s (steady): {steady_rate(runs, 0):,.0f}')"

log "time to eval >= -60 (mpe2 scale), fast pipeline on cuda, median of 3 seeds"
timeout 150 $PY benchmarks/time_to_return.py harl pipelines/happo_mpe_torch_spread_fast.toml --target -60 \
    --seeds 1,2,3 --limit 45 --set env.device=${DEV:-cuda} --set run.device=${DEV:-cuda} 2>&1 | tee "$OUT/ttr_cuda.txt"
log done
