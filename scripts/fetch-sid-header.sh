#!/usr/bin/env bash
# Fetches the newest uapi `linux/kfd_ioctl.h` (and the `drm/` headers it includes) from Debian
# sid's `linux-libc-dev` into target/uapi-sid/include.
#
# The archive URI is read from this machine's own apt configuration; only the suite is switched
# to `sid`. apt runs with its own state, cache and list directories under target/, so the
# system's apt state is untouched.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
out="$root/target/uapi-sid"
hdr="$out/include/linux/kfd_ioctl.h"

if [[ -f "$hdr" && "${1:-}" != "--force" ]]; then
    echo "fetch-sid-header: $hdr already present"
    exit 0
fi

# The first Debian archive URI (not the security one) from the deb822 or one-line sources.
uri=""
for f in /etc/apt/sources.list.d/*.sources; do
    [[ -f "$f" ]] || continue
    while read -r key value _; do
        if [[ "$key" == "URIs:" && "$value" != *security* && "$value" == */debian ]]; then
            uri="$value"
            break 2
        fi
    done <"$f"
done
if [[ -z "$uri" && -f /etc/apt/sources.list ]]; then
    uri=$(awk '$1 == "deb" && $2 !~ /security/ && $2 ~ /\/debian\/?$/ { print $2; exit }' /etc/apt/sources.list)
fi
if [[ -z "$uri" ]]; then
    echo "fetch-sid-header: no Debian archive URI in the apt configuration" >&2
    exit 1
fi
keyring=/usr/share/keyrings/debian-archive-keyring.gpg

work="$out/apt"
rm -rf "$work"
mkdir -p "$work/etc/sources.list.d" "$work/etc/preferences.d" "$work/state/lists/partial" \
    "$work/cache/archives/partial" "$work/pkg"
cat >"$work/etc/sources.list.d/sid.sources" <<SRC
Types: deb
URIs: $uri
Suites: sid
Components: main
Signed-By: $keyring
SRC
: >"$work/state/status"

apt_opts=(
    -o "Dir::Etc::SourceList=/dev/null"
    -o "Dir::Etc::SourceParts=$work/etc/sources.list.d"
    -o "Dir::Etc::Preferences=/dev/null"
    -o "Dir::Etc::PreferencesParts=$work/etc/preferences.d"
    -o "Dir::State=$work/state"
    -o "Dir::State::Lists=$work/state/lists"
    -o "Dir::State::status=$work/state/status"
    -o "Dir::Cache=$work/cache"
    -o "Dir::Cache::Archives=$work/cache/archives"
    -o "Debug::NoLocking=1"
    -o "APT::Sandbox::User=root"
    -o "Acquire::Languages=none"
)

apt-get "${apt_opts[@]}" update -qq
(cd "$work/pkg" && apt-get "${apt_opts[@]}" download -qq linux-libc-dev)
deb=$(ls "$work/pkg"/linux-libc-dev_*.deb | head -n 1)
rm -rf "$out/extract"
mkdir -p "$out/extract"
dpkg-deb -x "$deb" "$out/extract"
mkdir -p "$out/include"
rm -rf "$out/include/linux" "$out/include/drm" "$out/include/asm" "$out/include/asm-generic"
cp -r "$out/extract/usr/include/linux" "$out/extract/usr/include/drm" "$out/extract/usr/include/asm-generic" "$out/include/"
# The arch-specific asm headers live under the multiarch triplet.
arch_asm=$(find "$out/extract/usr/include" -maxdepth 2 -type d -name asm | head -n 1)
[[ -n "$arch_asm" ]] && cp -r "$arch_asm" "$out/include/asm"
basename "$deb" >"$out/VERSION"
rm -rf "$out/extract" "$work"
grep -E '^#define KFD_IOCTL_(MAJOR|MINOR)_VERSION' "$hdr"
echo "fetch-sid-header: $(cat "$out/VERSION") -> $hdr"
