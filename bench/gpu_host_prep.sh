#!/bin/bash
# Prepares the device call of bench/gpu_host.sh (issue 63: EnvPool Atari throughput on a GPU).
# From the project root; makes (git-ignored, under 64 MiB together):
#   .proj/     `git archive HEAD` of the project (what runs: committed code only)
#   .whlhost/  py3.12 wheels: envpool and what it imports, gymnax/distrax/... as gpu_prep.sh,
#              and site/envpool_assets with the Atari ROMs only (the full assets wheel is 62 MB)
# The device call: carry [".proj", ".whlhost"], command
#   OUT=$OUT bash .proj/bench/gpu_host.sh
set -euo pipefail
rm -rf .whlhost .proj; mkdir -p .whlhost/site .proj
wheels() {  # py3.12 manylinux wheels, no dependencies
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d "$1" "${@:2}"
}
wheels .whlhost envpool==1.2.5 dm-env==1.6 optree==0.20.0 glfw==2.11.0 \
  types-protobuf==7.35.1.20261122 dm-tree==0.1.10 gymnax==1.0.1 gymnasium==1.3.0 \
  Farama-Notifications==0.0.6 distrax==0.1.9 tfp-nightly==0.26.0.dev20261027 gast==0.7.0 \
  decorator==5.3.1 tensorboardX==2.6.5 dacite==1.9.2
tmp=$(mktemp -d)
wheels "$tmp" envpool-assets==0.3.0
python3 -m zipfile -e "$tmp"/envpool_assets-*.whl "$tmp/x"
mkdir -p .whlhost/site/envpool_assets
cp "$tmp/x/envpool_assets/__init__.py" .whlhost/site/envpool_assets/
cp -r "$tmp/x/envpool_assets/atari" .whlhost/site/envpool_assets/
rm -rf "$tmp"
git archive HEAD | tar -x -C .proj
du -sh .whlhost .proj
