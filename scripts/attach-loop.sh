#!/usr/bin/env bash
# Runs the attach-mode test binaries (kfd-emu's attach_deadlock, model_attach, supervisor;
# kfd-provider's provider and provider_fork) in a loop, several copies at once, each run under
# a timeout, and counts passes, failures and hangs. A hang is a run killed by the timeout.
#
#   scripts/attach-loop.sh [LOOPS [PARALLEL [TIMEOUT_S]]]     (default 200 4 300)
#   ATTACH_LOOP_TESTS="provider_fork supervisor" scripts/attach-loop.sh   (a subset)
#
# Each loop runs every binary once; PARALLEL loops run at a time. The logs of failed or hung
# runs are kept under target/attach-loop/ (or $ATTACH_LOOP_OUT: give each of two loops running
# at once its own). Exits non-zero if any run failed or hung.
set -euo pipefail

loops=${1:-200}
parallel=${2:-4}
limit=${3:-300}
root=$(cd "$(dirname "$0")/.." && pwd)
out="${ATTACH_LOOP_OUT:-$root/target/attach-loop}"
rm -rf "$out"
mkdir -p "$out"

tests=${ATTACH_LOOP_TESTS:-attach_deadlock model_attach supervisor provider provider_fork}
test_args=()
for t in $tests; do
    test_args+=(--test "$t")
done

# Build once; the binaries are run directly.
mapfile -t bins < <(
    cd "$root" &&
        cargo test -p kfd-emu -p kfd-provider "${test_args[@]}" \
            --no-run --message-format=json 2>/dev/null |
        grep -o '"executable":"[^"]*/deps/[^"]*"' | cut -d'"' -f4
)
want=$(wc -w <<<"$tests")
if [[ ${#bins[@]} -ne $want ]]; then
    echo "attach-loop: expected $want test binaries, built ${#bins[@]}" >&2
    exit 1
fi
# Copies: a build while the loop runs does not replace the binaries under it.
mkdir -p "$out/bin"
for i in "${!bins[@]}"; do
    cp "${bins[$i]}" "$out/bin/"
    bins[i]="$out/bin/$(basename "${bins[$i]}")"
done

# One loop: every binary once, each under the timeout. Prints one status word per binary.
one_loop() {
    local i=$1 bin name log
    for bin in "${bins[@]}"; do
        name=$(basename "$bin")
        log="$out/$i-$name.log"
        # --kill-after: a binary that ignores SIGTERM is killed.
        if (cd "$root" && timeout --kill-after=10 "$limit" "$bin" >"$log" 2>&1); then
            echo "pass"
            rm -f "$log"
        else
            local rc=$?
            if [[ $rc -eq 124 || $rc -eq 137 ]]; then
                echo "hang $name (loop $i, log $log)"
            else
                echo "fail $name (loop $i, rc $rc, log $log)"
            fi
        fi
    done
}
export -f one_loop
export out limit root
export bins_list="${bins[*]}"

started=$(date +%s)
results=$(seq 1 "$loops" | xargs -P "$parallel" -I{} bash -c \
    'bins=($bins_list); one_loop {}')
elapsed=$(($(date +%s) - started))

passes=$(grep -c '^pass' <<<"$results" || true)
fails=$(grep -c '^fail' <<<"$results" || true)
hangs=$(grep -c '^hang' <<<"$results" || true)
grep -v '^pass' <<<"$results" || true
echo "attach-loop: $loops loops x ${#bins[@]} binaries, $parallel at a time, ${elapsed} s:" \
    "$passes passed, $fails failed, $hangs hung"
[[ $fails -eq 0 && $hangs -eq 0 ]]
