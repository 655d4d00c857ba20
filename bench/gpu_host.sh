#!/bin/bash
# Issue 63 on a GPU: EnvPool Breakout training env steps/s of jaxrl's actor-learner path (sync
# and async; the policy and the learner on the GPU, EnvPool on the host's cores), with its time
# split (env, policy, transfer, update), then the same at 64 envs. JSON and log under $OUT.
# Prepare with `bash bench/gpu_host_prep.sh` (carry [".proj", ".whlhost"]); then
#   OUT=$OUT bash .proj/bench/gpu_host.sh
# CPU dry run of the plumbing (tiny sizes, wheels already installed here):
#   TINY=1 PY=.venv/bin/python OUT=/tmp/gpuhost bash bench/gpu_host.sh
set -u
TINY=${TINY:-0}
PY=${PY:-python3}
OUT=${OUT:-/tmp/gpuhost}
mkdir -p "$OUT"
root=$PWD
proj=$root/.proj; [ -d "$proj" ] || proj=$root  # the dry run uses the working tree
log=$OUT/log.txt
export PYTHONUNBUFFERED=1
site=$root/.whlhost/site
if [ -d "$root/.whlhost" ] && [ "$TINY" = 0 ]; then
  $PY -m pip install -q --no-deps --target /tmp/site "$root"/.whlhost/*.whl >> "$log" 2>&1
  site=/tmp/site:$root/.whlhost/site
fi
size=(); [ "$TINY" = 1 ] && size=(--tiny ppo.num_steps=16 network.hidden_sizes=[64])
limit=${LIMIT:-240}  # seconds per measurement
nvidia-smi -L >> "$log" 2>&1
lscpu | grep -E "Model name|^CPU\(s\)" >> "$log" 2>&1
for envs in 8 64; do
  echo "== breakout, $envs envs" | tee -a "$log"
  (cd "$proj" && PYTHONPATH=$site:$proj timeout "$limit" $PY -m bench.host_throughput --only atari \
    --repeats 1 --json "$OUT/host_breakout_$envs.json" "${size[@]}" "env.num_envs=$envs" \
    >> "$log" 2>&1) || echo "exit $? (breakout $envs envs)" | tee -a "$log"
  [ "$TINY" = 1 ] && break
done
grep -E "^==|exit|env steps/s" "$log" | tail -20
