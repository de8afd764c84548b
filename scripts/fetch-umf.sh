#!/usr/bin/env bash
# Fetches Intel UMF 1.2.0 as its `umf` wheel on PyPI ships it: the headers into
# target/umf/include and libumf into target/umf/lib, for the C ABI tests and bench of
# tools/umf. libumf needs libhwloc.so.15, which the wheel takes from its declared
# dependency `tcmlib`; that library is copied beside libumf (and nothing else of tcmlib).
#
# pip only downloads (`--no-deps`, pinned versions, binary wheels); nothing is installed into
# any Python environment. Idempotent: a complete target/umf of these versions is kept as it
# is unless `--force` is given.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
out="$root/target/umf"
umf_version=1.2.0
tcm_version=1.6.0
stamp="umf-$umf_version tcmlib-$tcm_version"

if [[ "${1:-}" != "--force" && -f "$out/VERSION" && "$(cat "$out/VERSION")" == "$stamp" &&
    -f "$out/include/umf/memory_provider_ops.h" && -f "$out/lib/libumf.so" &&
    -f "$out/lib/libhwloc.so.15" ]]; then
    echo "fetch-umf: $stamp already in $out"
    exit 0
fi

work="$out/download"
rm -rf "$work"
mkdir -p "$work"
python3 -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
    --dest "$work" "umf==$umf_version" "tcmlib==$tcm_version"

unpack() { # wheel-name-prefix destination
    local wheel
    wheel=$(ls "$work"/"$1"-*.whl | head -n 1)
    python3 -m zipfile -e "$wheel" "$2"
}
unpack "umf-$umf_version" "$work/umf"
unpack "tcmlib-$tcm_version" "$work/tcmlib"
umf_data="$work/umf/umf-$umf_version.data/data"
tcm_data="$work/tcmlib/tcmlib-$tcm_version.data/data"

rm -rf "$out/include" "$out/lib"
mkdir -p "$out/lib"
cp -r "$umf_data/include" "$out/include"
cp "$umf_data"/lib/libumf.so* "$out/lib/"
cp "$tcm_data"/lib/libhwloc.so* "$out/lib/"
cp "$umf_data/share/doc/umf/LICENSE.TXT" "$out/LICENSE-umf.txt"
echo "$stamp" >"$out/VERSION"
rm -rf "$work"
echo "fetch-umf: $stamp -> $out ($(ls "$out/lib" | tr '\n' ' '))"
