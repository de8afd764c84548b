#!/usr/bin/env bash
# Installs tinygrad 0.14.0 and numpy 2.4.6 from PyPI into a virtual environment,
# target/tinygrad/venv, for kfd-emu's tinygrad test (kfd-emu/tests/tinygrad.rs): tinygrad's
# AMD backend, unmodified, drives the emulated /dev/kfd of the mi300x preset, compiling its
# kernels with Debian's libLLVM 19 (package libllvm19), and numpy checks its tensors.
#
# pip installs pinned versions of binary wheels only, from the package registry; nothing
# outside the venv changes. Idempotent: a complete venv of these versions is kept as it is
# unless `--force` is given.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
out="$root/target/tinygrad"
tinygrad_version=0.14.0
numpy_version=2.4.6
stamp="tinygrad-$tinygrad_version numpy-$numpy_version"

if [[ "${1:-}" != "--force" && -f "$out/VERSION" && "$(cat "$out/VERSION")" == "$stamp" &&
    -x "$out/venv/bin/python" ]]; then
    echo "fetch-tinygrad: $stamp already in $out"
    exit 0
fi

rm -rf "$out"
mkdir -p "$out"
python3 -m venv "$out/venv"
"$out/venv/bin/python" -m pip install --quiet --disable-pip-version-check --only-binary=:all: \
    "tinygrad==$tinygrad_version" "numpy==$numpy_version"
echo "$stamp" >"$out/VERSION"
echo "fetch-tinygrad: $stamp -> $out/venv"
