#!/usr/bin/env bash
# The README's test command: installs or fetches what the tests need on a fresh machine of this
# kind, then runs every test — the workspace's tests and the Miri subset — so that nothing is
# silently skipped. Under CI=true a test whose prerequisite is still missing fails.
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian packages the tests use:
#   libdrm-dev     <drm/drm.h> for the 6.1 system kfd_ioctl.h in the layout proof
#   libhsakmt-dev  the C client that kfd-emu must run unmodified
#   rocminfo       the ROCr client that kfd-emu must run unmodified
need=()
for pkg in libdrm-dev libhsakmt-dev rocminfo; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || need+=("$pkg")
done
if ((${#need[@]})); then
    sudo=""
    [[ $(id -u) -eq 0 ]] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
fi

# The newest uapi header (KFD 1.23) from Debian sid's linux-libc-dev, into target/.
bash scripts/fetch-sid-header.sh
# Intel UMF 1.2.0 (libumf and headers from its PyPI wheel), into target/, for tools/umf.
bash scripts/fetch-umf.sh

# Every test, with the prerequisites in place: a missing one is a failure, not a skip.
CI=true cargo test --workspace

# The Miri subset: the pure-Rust parts that parse or index memory a peer controls — the SPSC
# ring's cores, header and claims over heap memory, capacity math; kfd-ioctl's ABI helpers,
# errors and retry policy; the SMI parser and stream decoder, the SVM attribute builder.
# (Tests that need mmap, memfds or the emulator's seccomp are `cfg_attr(miri, ignore)`.)
# The topology parser runs under Miri by hand, it takes ~5 minutes:
#   MIRIFLAGS=-Zmiri-disable-isolation cargo +nightly miri test -p kfd-ioctl --test topology \
#     -- from_a_string lines_that_are_not_key blank_lines a_32_bit_field unknown_keys_are_kept
rustup component add --toolchain nightly miri rust-src >/dev/null 2>&1 ||
    rustup toolchain install nightly --profile minimal --component miri,rust-src >/dev/null || {
        echo "test-all: Miri needs the nightly toolchain with miri and rust-src; install failed" >&2
        exit 1
    }
cargo +nightly miri setup >/dev/null 2>&1
cargo +nightly miri test -p kfd-ring --lib
cargo +nightly miri test -p kfd-ioctl --lib -- error:: sys:: abi::
cargo +nightly miri test -p kfd-svm --lib -- smi:: stream:: attrs:: location:: error::
