#!/usr/bin/env bash
# Build one kernel variant: Debian's linux-source-6.1 + patches/<variant>/series,
# configured as `make tinyconfig` + configs/base.config (+ configs/<variant>.config).
#
#   kernel/build.sh VARIANT        -> $BUILD_DIR/kernel/VARIANT/bzImage
#
# A variant whose inputs (source tarball, series, patches, fragments) are unchanged
# since its last successful build is not rebuilt. BUILD_DIR defaults to build/ in
# the repository (gitignored).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
build_dir=${BUILD_DIR:-$repo/build}
tarball=${LINUX_TARBALL:-/usr/src/linux-source-6.1.tar.xz}
jobs=${JOBS:-$(nproc)}

die() { echo "kernel/build.sh: $*" >&2; exit 1; }
step() { echo "==> [$variant] $*" >&2; }

[ $# -eq 1 ] || die "usage: kernel/build.sh VARIANT"
variant=$1
patch_dir=$here/patches/$variant
series=$patch_dir/series
[ -f "$series" ] || die "unknown variant '$variant': no $series (known: $(ls "$here/patches" | tr '\n' ' '))"
[ -f "$tarball" ] || die "kernel source '$tarball' is missing: run 'make setup' (apt-get install linux-source-6.1)"

# Patches named by the series, in order; blank lines and comments are skipped.
mapfile -t patches < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$series")
for p in "${patches[@]}"; do
	[ -f "$patch_dir/$p" ] || die "series of '$variant' names '$p', which is not in $patch_dir"
done

fragments=("$here/configs/base.config")
[ -f "$here/configs/$variant.config" ] && fragments+=("$here/configs/$variant.config")

# The inputs' fingerprint decides whether anything needs doing.
fingerprint=$( {
	stat -c '%s %Y' "$tarball"
	cat "$series"
	for p in "${patches[@]}"; do cat "$patch_dir/$p"; done
	cat "${fragments[@]}"
} | sha256sum | cut -d' ' -f1)

out=$build_dir/kernel/$variant
if [ -f "$out/bzImage" ] && [ "$(cat "$out/fingerprint" 2>/dev/null)" = "$fingerprint" ]; then
	step "up to date ($out/bzImage)"
	exit 0
fi

# Pristine source, unpacked once and shared (hard links) by all variant trees.
pristine=$build_dir/src/linux-source-6.1
if [ ! -f "$pristine/.unpacked" ]; then
	step "unpacking $tarball"
	rm -rf "$pristine"
	mkdir -p "$build_dir/src"
	tar -C "$build_dir/src" -xJf "$tarball"
	touch "$pristine/.unpacked"
fi

tree=$out/linux
step "preparing source tree ${#patches[@]} patch(es)"
rm -rf "$tree" "$out/bzImage" "$out/fingerprint"
mkdir -p "$out"
# patch(1) replaces files rather than writing through links, so hard links are safe.
cp -al "$pristine" "$tree"
rm -f "$tree/.unpacked"
for p in "${patches[@]}"; do
	step "applying $p"
	patch -d "$tree" -p1 --quiet --forward --no-backup-if-mismatch < "$patch_dir/$p" \
		|| die "patch '$p' of variant '$variant' does not apply to $(basename "$tarball")"
done

step "configuring (tinyconfig + ${fragments[*]##*/})"
make -C "$tree" -s tinyconfig >/dev/null
"$tree/scripts/kconfig/merge_config.sh" -m -O "$tree" "$tree/.config" "${fragments[@]}" >"$out/merge_config.log"
make -C "$tree" -s olddefconfig >/dev/null
# Every option a fragment asks for must have survived dependency resolution.
missing=$(grep -hE '^(CONFIG_[A-Za-z0-9_]+=.*|# CONFIG_[A-Za-z0-9_]+ is not set)$' "${fragments[@]}" \
	| sort -u | while read -r line; do grep -qxF -- "$line" "$tree/.config" || echo "$line"; done)
[ -z "$missing" ] || die "config options did not survive olddefconfig: $(echo $missing)"

step "building bzImage with $jobs jobs (about 3 minutes on 2 cores)"
start=$(date +%s)
if ! make -C "$tree" -j"$jobs" bzImage >"$out/build.log" 2>&1; then
	tail -n 30 "$out/build.log" >&2
	die "build failed; full log: $out/build.log"
fi
cp "$tree/arch/x86/boot/bzImage" "$out/bzImage"
cp "$tree/.config" "$out/config"
echo "$fingerprint" >"$out/fingerprint"
step "built $out/bzImage in $(( $(date +%s) - start )) s"
