#!/bin/bash
# Prepares, in the project root, the git-ignored folders bench/gpu_suite.sh reads on the GPU:
#   .proj/  `git archive HEAD` (commit first: only committed code travels this way)
#   .whl/   py3.12 wheels the GPU image lacks (its image has jax, flax, optax, chex, orbax,
#           tensorboard, tqdm, PyYAML)           .whl09/ gymnax 0.0.9 (PureJaxRL's API)
#   .pj/    PureJaxRL's ppo.py, ppo_rnn.py, wrappers.py and the side-by-side driver
# Usage: bash bench/gpu_prep.sh PUREJAXRL_GIT_DIR PJRL_DRIVER_DIR
#   PUREJAXRL_GIT_DIR: git directory of a luchris429/purejaxrl snapshot (measured at 31756b1)
#   PJRL_DRIVER_DIR: the folder holding pjrl_ppo.py and common.py (shared/tools/pjrl)
set -euo pipefail
pj_git=${1:?give the git directory of a luchris429/purejaxrl snapshot}
driver=${2:?give the folder of pjrl_ppo.py and common.py}
root=$(git rev-parse --show-toplevel); cd "$root"
mkdir -p .git/info
for d in .whl .whl09 .proj .pj; do
  grep -qx "/$d/" .git/info/exclude 2>/dev/null || echo "/$d/" >> .git/info/exclude
done
rm -rf .whl .whl09 .proj .pj; mkdir -p .whl .whl09 .proj .pj
wheels() {  # wheels DIR SPEC...: py3.12 manylinux wheels, no dependencies
  local dir=$1; shift
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d "$dir" "$@"
}
wheels .whl gymnax==1.0.1 gymnasium==1.3.0 Farama-Notifications==0.0.6 distrax==0.1.9 \
  tfp-nightly==0.26.0.dev20261027 dm-tree==0.1.10 gast==0.7.0 decorator==5.3.1 \
  tensorboardX==2.6.5 dacite==1.9.2
wheels .whl09 gymnax==0.0.9
git archive HEAD | tar -x -C .proj
for f in ppo.py ppo_rnn.py wrappers.py; do git -C "$pj_git" show "HEAD:purejaxrl/$f" > ".pj/$f"; done
cp "$driver/pjrl_ppo.py" "$driver/common.py" .pj/
du -sh .whl .whl09 .proj .pj
