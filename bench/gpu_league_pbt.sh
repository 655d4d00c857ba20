#!/bin/bash
# One GPU call for the accelerator targets of issues 19 (league) and 22 (PBT), in priority order
# under one deadline (BUDGET seconds, default 570), each step under its own timeout:
#   1. the soccer league, configs/soccer_selfplay.yaml at 4096 envs for LEAGUE_STEPS env steps,
#      alone on the card (SIGINT at LEAGUE_S seconds saves the chunk in flight): issue 19's
#      "one GPU, at most 5 minutes of training"; its TensorBoard figures (bench.research.run_report);
#   2. its last checkpoint against the RulePolicy: jaxrl.commands.tournament, 512 matches a team size
#      (Elo and win/draw/loss);
#   3. exploitability: jaxrl.commands.exploit, a best response from the agent's own weights for
#      EXPLOIT_STEPS env steps at each of 1v1, 2v2 and 3v3 (one program), 512 matches a pair;
#      meanwhile, in the background, soccer 1v1 against the RulePolicy: PBT and its grid
#      (configs/soccer_1v1_pbt.yaml, pbt.every_updates=0), seeds 0, 1 and 2 (six processes);
#   4. every member of those six runs against the RulePolicy, 512 matches (jaxrl.commands.evaluate);
#   5. what is left: CAGE2 training speed at 8192 envs (configs/cage2.yaml's network).
# With POP_S > 0 (default 0: skipped), step 1b trains the population league (issue 62,
# configs/soccer_league_population.yaml: 4 members that play each other, PBT on the league's
# Elo) at POP_ENVS envs per member, alone on the card, for at most POP_S seconds, then plays
# every member against the RulePolicy (jaxrl.commands.evaluate, EPISODES matches). For the population
# arm alone: LEAGUE_S=0 POP_S=230 (the single-run arm is step 1).
# The league's run (events, config, checkpoints) comes back as league_run.tgz.aa, .ab, ...
#
# Layout, from the project root (git-ignored): .proj/ = `git archive HEAD` (committed code only),
# .whl/ = py3.12 wheels the GPU image lacks (../shared/tools/device-prep.sh or bench/gpu_prep.sh).
# The device call: carry [".proj", ".whl"], command
#   OUT=$OUT BUDGET=570 bash .proj/bench/gpu_league_pbt.sh
# LEAGUE_ARGS='network.hidden_sizes=[256,256]' before it trains the league with the wider torsos
# (docs/results/soccer.md, "Levers tried": ahead per env step on the CPU early, behind per hour).
# CPU dry run of the plumbing (tiny sizes, no wheels installed):
#   TINY=1 BUDGET=1500 PY=$PWD/.venv/bin/python OUT=/tmp/gpuout bash .proj/bench/gpu_league_pbt.sh
set -u
TINY=${TINY:-0}
PY=${PY:-python3}
OUT=${OUT:-/tmp/gpuout}
BUDGET=${BUDGET:-570}
LEAGUE_ARGS=${LEAGUE_ARGS:-}  # extra config overrides of the league run (header)
POP_S=${POP_S:-0}  # seconds of the population league (step 1b); 0: skipped
mkdir -p "$OUT"
root=$PWD
log=$OUT/log.txt
t0=$(date +%s)
export PYTHONUNBUFFERED=1
left() { echo $(( BUDGET - ($(date +%s) - t0) )); }
step() { echo "== $(date +%T) [+$(( $(date +%s) - t0 ))s] $*" | tee -a "$log"; }
# run SECONDS CMD...: under min(SECONDS, time left - RESERVE); skipped when under 15 s are left
run() {
  local want=$1; shift; local l; l=$(( $(left) - ${RESERVE:-0} ))
  [ "$l" -lt 15 ] && { echo "skipped (time): $*" | tee -a "$log"; return; }
  [ "$want" -gt "$l" ] && want=$l
  [ "$want" -le 0 ] && { echo "skipped (0 s asked): $*" | tee -a "$log"; return; }
  timeout -k 20 -s INT "$want" "$@" || echo "exit $? : $*" | tee -a "$log"
}
if [ "$TINY" = 0 ]; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
  ENVS=4096; LEAGUE_STEPS=1200000000; LEAGUE_S=${LEAGUE_S:-230}; GAMES=512; EXPLOIT_STEPS=100000000
  POP_ENVS=1024; POP_STEPS=1200000000  # per member: 4 x 1024 envs, the single run's 4096
  POP=()
  PBT=(); SEEDS='0 1 2'; EPISODES=512; CAGE_ENVS=8192
else  # the plumbing on a CPU: tiny sizes, the same steps
  ENVS=64; LEAGUE_STEPS=16384; LEAGUE_S=${LEAGUE_S:-300}; GAMES=4; EXPLOIT_STEPS=8192
  POP_ENVS=16; POP_STEPS=16384
  POP=(pbt.every_updates=2 pbt.burn_in_updates=2 checkpoint.every_updates=2)
  PBT=(train.total_steps=40960 pbt.every_updates=2 checkpoint.every_updates=2); EPISODES=4
  SEEDS=0; CAGE_ENVS=64
fi
export PYTHONPATH=/tmp/site:$root/.proj
cd "$root/.proj"
{ nvidia-smi -L 2>&1; $PY -c "import jax; print('jax', jax.__version__, jax.devices())"; } 2>&1 | tee -a "$log"
runs=/tmp/runs; rm -rf "$runs"; mkdir -p "$runs"

# 1. The league, alone on the card
step "soccer league, $ENVS envs, $LEAGUE_STEPS steps, at most ${LEAGUE_S}s"
# shellcheck disable=SC2086  # LEAGUE_ARGS: config overrides, split on spaces
run "$LEAGUE_S" $PY -m jaxrl.train --config configs/soccer_selfplay.yaml env.num_envs=$ENVS \
  train.total_steps=$LEAGUE_STEPS --run-dir "$runs/league" --quiet $LEAGUE_ARGS >> "$log" 2>&1
$PY -m bench.research.run_report --run-dir "$runs/league" --json "$OUT/league_report.json" >> "$log" 2>&1

# 1b. The population league, alone on the card (POP_S > 0)
if [ "$POP_S" -gt 0 ]; then
  step "soccer population league, 4 x $POP_ENVS envs, $POP_STEPS steps a member, at most ${POP_S}s"
  run "$POP_S" $PY -m jaxrl.train --config configs/soccer_league_population.yaml \
    env.num_envs=$POP_ENVS train.total_steps=$POP_STEPS "${POP[@]}" --run-dir "$runs/population" \
    --quiet \
    >> "$log" 2>&1
  run 120 $PY -m jaxrl.evaluate --run-dir "$runs/population" --episodes $EPISODES \
    --opponent rule --json > "$OUT/eval_population.json" 2>> "$log"
fi
# From here several programs share the card: each takes memory as it needs it.
export XLA_PYTHON_CLIENT_PREALLOCATE=false

# 3b. In the background: soccer 1v1 PBT and its grid, three seeds each
pids=()
for seed in $SEEDS; do
  for arm in pbt grid; do
    extra=(); [ "$arm" = grid ] && extra=(pbt.every_updates=0)
    step "background: soccer 1v1 $arm seed $seed"
    ( RESERVE=75 run 600 $PY -m jaxrl.train --config configs/soccer_1v1_pbt.yaml seed=$seed \
        "${extra[@]}" "${PBT[@]}" --run-dir "$runs/${arm}_s$seed" --quiet \
        > "$OUT/train_${arm}_s$seed.txt" 2>&1
      step "background: soccer 1v1 $arm seed $seed ended" ) &
    pids+=($!)
  done
done

# 2. The league's last checkpoint against the RulePolicy
step "tournament, latest vs rule, $GAMES matches a size"
run 90 $PY -m jaxrl.tournament --run-dir "$runs/league" --players latest,rule --games $GAMES \
  --json "$OUT/tournament.json" >> "$log" 2>&1

# 3a. Exploitability of the league's last checkpoint
step "exploit, $EXPLOIT_STEPS env steps a size, 1v1 2v2 3v3"
RESERVE=70 run 400 $PY -m jaxrl.exploit --run-dir "$runs/league" --budget $EXPLOIT_STEPS \
  --team-size 1,2,3 --games $GAMES --out "$runs/exploit" --json > "$OUT/exploit.json" 2>> "$log"

step "waiting for the PBT runs"
wait "${pids[@]}"

# 4. Every member of the PBT and grid runs against the RulePolicy
epids=()
for d in "$runs"/pbt_s* "$runs"/grid_s*; do
  name=$(basename "$d")
  step "evaluate $name"
  member=$(ls -d "$d"/*seed* | head -1)  # one member's events: speed and win rate in training
  $PY -m bench.research.run_report --run-dir "$member" --tags perf/sps,rollout/outcome/win \
    --json "$OUT/report_$name.json" >> "$log" 2>&1
  run 120 $PY -m jaxrl.evaluate --run-dir "$d" --episodes $EPISODES --opponent rule --json \
    > "$OUT/eval_$name.json" 2>> "$log" &
  epids+=($!)
done
wait "${epids[@]}"

# 5. What is left: CAGE2 training speed with the defender's network
step "bench CAGE2 train, $CAGE_ENVS envs"
run 80 $PY -m bench.throughput --only train --config configs/cage2.yaml --train-envs $CAGE_ENVS \
  --repeats 3 --json "$OUT/cage2_train.json" >> "$log" 2>&1

step "done"
# At most 8 files come back: the log, the league's run (and the population's) and one archive
# of the rest.
# (in parts of 15 MB: a file over 16 MiB does not come back; `cat league_run.tgz.* | tar -xz`)
tar -czf - -C "$runs" league 2>> "$log" | split -b 15M - "$OUT/league_run.tgz."
[ -d "$runs/population" ] && tar -czf - -C "$runs" population 2>> "$log" \
  | split -b 15M - "$OUT/population_run.tgz."
(cd "$OUT" && tar -czf results.tgz --remove-files ./*.json ./train_*.txt 2>/dev/null)
ls -la "$OUT" | tee -a "$log"
grep -E "^(==|exit|skipped)" "$log"
