#!/bin/bash
# One GPU call that measures everything issue 18 asks of an accelerator, in priority order under
# one deadline (BUDGET seconds, default 540), each step under its own timeout, JSON under $OUT:
#   1. CartPole FF at 4 and 4096 envs and GRU-128 at 4096 (bench.throughput train + device:
#      steps/s, busy fraction, kernels and copies per update, rollout share, peak memory), each
#      beside PureJaxRL's own ppo.py / ppo_rnn.py with the same hyperparameters;
#   2. MettaArena at the MettaGrid seed's batch (configs/metta_arena_gpu.yaml, train + device);
#   3. the soccer league (configs/soccer_selfplay.yaml) at 4096 envs, trained until the deadline
#      (SIGINT saves the chunk in flight), its TensorBoard figures, then a tournament of its
#      last checkpoint against the RulePolicy (in-graph Elo against the tournament's);
#   4. what is left: the GRU with its core's scan unrolled (a speed candidate, side by side).
# Non-JAX envs (issue 63, EnvPool Breakout through the actor-learner path) need envpool's
# wheels, which do not fit this call's carry: a call of their own, bench/gpu_host.sh.
#
# Layout, from the project root (`bash bench/gpu_prep.sh PUREJAXRL_GIT_DIR shared/tools/pjrl`
# makes it; all git-ignored):
#   .proj/  `git archive HEAD` of the project (what runs: committed code only)
#   .whl/   py3.12 wheels the GPU image lacks     .whl09/ gymnax 0.0.9 for PureJaxRL
#   .pj/    PureJaxRL's ppo.py, ppo_rnn.py, wrappers.py (luchris429/purejaxrl @ 31756b1) and
#           the driver pjrl_ppo.py + common.py (shared/tools/pjrl)
# The device call: carry [".proj", ".whl", ".whl09", ".pj"], command
#   OUT=$OUT BUDGET=540 bash .proj/bench/gpu_suite.sh
# CPU dry run of the plumbing (tiny sizes, no wheels installed):
#   TINY=1 SLOW=8 BUDGET=3000 PY=.venv/bin/python OUT=/tmp/gpuout bash .proj/bench/gpu_suite.sh
set -u
TINY=${TINY:-0}
PY=${PY:-python3}
OUT=${OUT:-/tmp/gpuout}
BUDGET=${BUDGET:-540}
SLOW=${SLOW:-1}  # multiplies every step's timeout (a CPU dry run: SLOW=8 BUDGET=3000)
mkdir -p "$OUT"
root=$PWD
log=$OUT/log.txt
t0=$(date +%s)
export PYTHONUNBUFFERED=1
left() { echo $(( BUDGET - ($(date +%s) - t0) )); }
step() { echo "== $(date +%T) [+$(( $(date +%s) - t0 ))s] $*" | tee -a "$log"; }
# run SECONDS CMD...: under min(SECONDS, time left - RESERVE); skipped when under 15 s are left
run() {
  local want=$(( $1 * SLOW )); shift; local l; l=$(( $(left) - ${RESERVE:-0} ))
  [ "$l" -lt 15 ] && { echo "skipped (time): $*" | tee -a "$log"; return; }
  [ "$want" -gt "$l" ] && want=$l
  timeout -k 20 -s INT "$want" "$@" >> "$log" 2>&1 || echo "exit $? : $*" | tee -a "$log"
}
install() { $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target "$1" "${@:2}"; }
install /tmp/site09 .whl09/*.whl || exit 1  # pure Python: the CPU dry run takes it too
if [ "$TINY" = 0 ]; then
  install /tmp/site .whl/*.whl || exit 1
  SMALL=4; BIG=4096; PJ_SMALL=5e5; PJ_BIG=5e7; PJ_RNN=1e7; METTA=(); SOCCER=4096; SOCCER_S=110
  GAMES=64; REPEATS=3
else  # the plumbing on a CPU: tiny sizes, the same steps
  SMALL=4; BIG=64; PJ_SMALL=2e4; PJ_BIG=1e5; PJ_RNN=5e4; SOCCER=64; SOCCER_S=150; GAMES=2
  METTA=(--train-envs 8 --set ppo.num_steps=32 --set ppo.num_minibatches=1
         --set network.hidden_sizes=[16] --set network.core_size=16)
  REPEATS=1
fi
GRU=(--set network.core=gru --set network.core_size=128 --set network.hidden_sizes=[128]
     --set network.shared_torso=true --set ppo.sequence_length=16)
{ nvidia-smi -L 2>&1; PYTHONPATH=/tmp/site $PY -c "import jax; print('jax', jax.__version__, jax.devices())"; } 2>&1 | tee -a "$log"

bench() {  # bench NAME SECONDS ARGS...: bench.throughput from .proj, JSON to $OUT/NAME.json
  local name=$1 want=$2; shift 2
  step "bench $name"
  (cd "$root/.proj" && PYTHONPATH=/tmp/site:$PWD run "$want" $PY -m bench.throughput \
    --repeats "$REPEATS" --json "$OUT/$name.json" "$@")
}
pjrl() {  # pjrl SECONDS ARGS...: PureJaxRL's own files, gymnax 0.0.9
  local want=$1; shift
  step "purejaxrl $*"
  (cd "$root/.pj" && PYTHONPATH=/tmp/site09:/tmp/site PUREJAXRL_DIR=$PWD \
    ANCHORS_OUT=$OUT/purejaxrl.jsonl run "$want" $PY pjrl_ppo.py "$@")
}
CP=(--config configs/cartpole.yaml)

# 1. CartPole: ours and PureJaxRL's, same card, same hyperparameters (128 steps, 4x4 minibatches)
bench ff_$SMALL 45 --only train "${CP[@]}" --train-envs $SMALL
pjrl 40 --num-envs $SMALL --total $PJ_SMALL
bench ff_$BIG 60 --only train,device "${CP[@]}" --train-envs $BIG
pjrl 40 --num-envs $BIG --total $PJ_BIG
bench gru_$BIG 70 --only train,device "${CP[@]}" "${GRU[@]}" --train-envs $BIG
pjrl 50 --rnn --num-envs $BIG --total $PJ_RNN

# 2. MettaArena at the seed's batch: training speed, busy, kernels, rollout share, peak memory
bench metta 110 --only train,device --config configs/metta_arena_gpu.yaml "${METTA[@]}"

# 3. Soccer league at 4096 envs until the deadline (SIGINT saves), then a tournament
sp=/tmp/runs/soccer_league; rm -rf "$sp"
step "soccer league, $SOCCER envs, ${SOCCER_S}s"
(cd "$root/.proj" && PYTHONPATH=/tmp/site:$PWD RESERVE=70 run "$SOCCER_S" $PY -m jaxrl.train \
  --config configs/soccer_selfplay.yaml env.num_envs=$SOCCER checkpoint.every_updates=100000 \
  --run-dir "$sp" --quiet)
(cd "$root/.proj" && PYTHONPATH=/tmp/site:$PWD $PY -m bench.research.run_report --run-dir "$sp" \
  --json "$OUT/soccer_league.json" >> "$log" 2>&1)
step "tournament"
(cd "$root/.proj" && PYTHONPATH=/tmp/site:$PWD run 60 $PY -m jaxrl.tournament --run-dir "$sp" \
  --players latest,rule --games $GAMES --json "$OUT/soccer_tournament.json")

# 4. Speed candidate, side by side with step 1's GRU: the core's scan unrolled over its sequence
bench gru_unroll16_$BIG 60 --only train "${CP[@]}" "${GRU[@]}" --set network.core_unroll=16 \
  --train-envs $BIG

step "done"
# The device tool brings back at most 8 files: the log and one archive of the JSON files.
(cd "$OUT" && tar -czf results.tgz --remove-files ./*.json ./*.jsonl 2>/dev/null)
grep -E "^(==|exit|skipped)|/sps:|busy|kernels_per|rollout_fraction|peak_memory|steps_per_s|selfplay/elo|elo" \
  "$log" | grep -v -i warning | tail -60
