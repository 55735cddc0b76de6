#!/usr/bin/env bash
# Build Debian's QEMU 7.2 with the Hyper-V-under-TCG series in qemu/patches/.
#
#   qemu/build.sh               -> $BUILD_DIR/qemu/qemu-system-x86_64
#   qemu/build.sh --each-patch  the same, then the series checked to build at every
#                               patch: Debian's tree (ours reverted, last first),
#                               then each patch applied in turn, an incremental
#                               build after each (log: $BUILD_DIR/qemu/logs/each-*.log)
#
# Steps: add a deb-src entry for Debian's archive if there is none, install the
# build dependencies, fetch the qemu source package (`apt-get source`), unpack it
# with Debian's own patches into $BUILD_DIR/qemu/src, apply patches/series with
# `patch -p1`, configure x86_64-softmmu only (TCG + KVM, no default features, no -g),
# build qemu-system-x86_64 and install it at $BUILD_DIR/qemu/qemu-system-x86_64.
# Nothing is done when the fingerprint of (series, patch contents, Debian source
# version, configure options) matches the last successful build. BUILD_DIR defaults to build/ in the
# repository (gitignored). Logs: $BUILD_DIR/qemu/logs/.
#
# Run the binary with `-L /usr/share/seabios -L /usr/share/qemu` (firmware from
# Debian's seabios and qemu-system-data packages, which this script installs).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
build_dir=${BUILD_DIR:-$repo/build}
jobs=${JOBS:-$(nproc)}
out=$build_dir/qemu
logs=$out/logs
series=$here/patches/series

die() { echo "qemu/build.sh: $*" >&2; exit 1; }
step() { echo "==> [qemu] $*" >&2; }

each_patch=0
case "${1:-}" in
	"") ;;
	--each-patch) each_patch=1 ;;
	*) die "unknown argument '$1' (usage: qemu/build.sh [--each-patch])" ;;
esac

[ -f "$series" ] || die "no patch series at $series"
mapfile -t patches < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$series")
for p in "${patches[@]}"; do
	[ -f "$here/patches/$p" ] || die "series names '$p', which is not in $here/patches"
done
mkdir -p "$logs"

# 1. A deb-src entry, so that `apt-get source qemu` works.
srclist=/etc/apt/sources.list.d/qemu-build-deb-src.sources
have_deb_src() {
	grep -rqsE '^(Types:.*deb-src|deb-src )' /etc/apt/sources.list /etc/apt/sources.list.d/
}
if ! have_deb_src; then
	step "adding a deb-src entry ($srclist)"
	if [ -f /etc/apt/sources.list.d/debian.sources ]; then
		sed -e 's/^Types:.*/Types: deb-src/' /etc/apt/sources.list.d/debian.sources >"$srclist"
	else
		cat >"$srclist" <<-EOF
		Types: deb-src
		URIs: http://deb.debian.org/debian
		Suites: bookworm bookworm-updates
		Components: main
		Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
		EOF
	fi
	step "apt-get update"
	apt-get update >"$logs/apt-update.log" 2>&1 || die "apt-get update failed; log: $logs/apt-update.log"
fi

# 2. The Debian source version that `apt-get source qemu` would fetch.
dsc_name() {
	# --print-uris URL-encodes the name ('+' as %2b): decode what a version may hold.
	apt-get source --print-uris qemu 2>/dev/null | grep -o "qemu_[^' ]*\.dsc" | head -n 1 |
		sed -e 's/%2[bB]/+/g' -e 's/%3[aA]/:/g' -e 's/%7[eE]/~/g' || true
}
dsc=$(dsc_name)
if [ -z "$dsc" ]; then
	step "apt-get update (no qemu source package known yet)"
	apt-get update >"$logs/apt-update.log" 2>&1 || die "apt-get update failed; log: $logs/apt-update.log"
	dsc=$(dsc_name)
	[ -n "$dsc" ] || die "apt-get knows no 'qemu' source package even with a deb-src entry; log: $logs/apt-update.log"
fi
version=${dsc#qemu_}
version=${version%.dsc}

# x86_64-softmmu only (TCG + KVM, no default features). No debug information: the
# bench reads no QEMU symbols, and -g costs about a fifth of the compile time of
# files measured here (hw/acpi/aml-build.c: 6.4 s with it, 4.7 s without).
configure_options=(--target-list=x86_64-softmmu --without-default-features
	--disable-docs --disable-install-blobs --disable-debug-info --enable-tcg --enable-kvm
	--meson=meson)

fingerprint=$( {
	echo "$version"
	echo "${configure_options[*]}"
	cat "$series"
	for p in "${patches[@]}"; do cat "$here/patches/$p"; done
} | sha256sum | cut -d' ' -f1)

src=$out/src
tree=$src/qemu-$version
obj=$out/obj

# 7 (with --each-patch). The tree and its build are the whole series': revert our
# patches, last first, and build Debian's tree; then apply each in turn and build.
# Only the files a patch touches change, so each build after the first is a few
# seconds to two minutes. The tree ends as it began, the whole series.
build_each_patch() {
	local i p log
	[ -d "$tree" ] && [ -f "$obj/build.ninja" ] || die "no built tree at $tree to check patch by patch"
	# Until the tree is whole again, no fingerprint: a check stopped half-way
	# leaves the next build.sh a fresh tree to make.
	rm -f "$out/fingerprint"
	: >"$logs/each-revert.log"
	for ((i = ${#patches[@]} - 1; i >= 0; i--)); do
		patch -d "$tree" -p1 -R --quiet --no-backup-if-mismatch <"$here/patches/${patches[i]}" \
			>>"$logs/each-revert.log" 2>&1 || die "patch '${patches[i]}' does not revert; log: $logs/each-revert.log"
	done
	log=$logs/each-0000-debian.log
	step "building Debian's tree, our patches reverted (log: $log)"
	ninja -C "$obj" -j"$jobs" qemu-system-x86_64 >"$log" 2>&1 || die "Debian's tree does not build; log: $log"
	for p in "${patches[@]}"; do
		log=$logs/each-${p%.patch}.log
		patch -d "$tree" -p1 --quiet --forward --no-backup-if-mismatch <"$here/patches/$p" >"$log" 2>&1 \
			|| die "patch '$p' does not apply on the ones before it; log: $log"
		ninja -C "$obj" -j"$jobs" qemu-system-x86_64 >>"$log" 2>&1 || die "the series does not build at '$p'; log: $log"
		step "builds at $p"
	done
	echo "$fingerprint" >"$out/fingerprint"
	step "the series builds at every one of its ${#patches[@]} patch(es)"
}

if [ -x "$out/qemu-system-x86_64" ] && [ "$(cat "$out/fingerprint" 2>/dev/null)" = "$fingerprint" ]; then
	step "up to date ($out/qemu-system-x86_64, Debian qemu $version + ${#patches[@]} patch(es))"
	[ "$each_patch" = 0 ] || build_each_patch
	exit 0
fi

# 3. Build dependencies (and the firmware the binary is run with).
deps=(build-essential dpkg-dev ninja-build meson pkg-config python3 python3-venv
	libglib2.0-dev libpixman-1-dev libfdt-dev zlib1g-dev flex bison
	seabios qemu-system-data)
missing=()
for d in "${deps[@]}"; do
	dpkg-query -W -f='${Status}' "$d" 2>/dev/null | grep -q 'install ok installed' || missing+=("$d")
done
if [ ${#missing[@]} -gt 0 ]; then
	step "installing build dependencies: ${missing[*]}"
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" \
		>"$logs/apt-install.log" 2>&1 || die "installing build dependencies failed; log: $logs/apt-install.log"
fi

# 4. The source package, downloaded once per version.
mkdir -p "$src"
if [ ! -f "$src/$dsc" ]; then
	step "apt-get source qemu ($version)"
	(cd "$src" && apt-get source --download-only qemu) >"$logs/source.log" 2>&1 \
		|| die "apt-get source qemu failed; log: $logs/source.log"
	[ -f "$src/$dsc" ] || die "apt-get source did not fetch $dsc; log: $logs/source.log"
fi

# 5. A fresh tree: Debian's patches (dpkg-source), then ours.
step "unpacking $dsc with Debian's patches"
rm -rf "$tree" "$out/qemu-system-x86_64" "$out/fingerprint"
dpkg-source --no-check -x "$src/$dsc" "$tree" >"$logs/source.log" 2>&1 \
	|| die "dpkg-source -x $dsc failed; log: $logs/source.log"
for p in "${patches[@]}"; do
	step "applying $p"
	patch -d "$tree" -p1 --quiet --forward --no-backup-if-mismatch <"$here/patches/$p" \
		>>"$logs/source.log" 2>&1 || die "patch '$p' does not apply to Debian qemu $version; log: $logs/source.log"
done

# 6. Configure and build qemu-system-x86_64 only.
rm -rf "$obj"
mkdir -p "$obj"
step "configuring x86_64-softmmu (TCG + KVM, no default features, no debug information)"
(cd "$obj" && "$tree/configure" "${configure_options[@]}") >"$logs/configure.log" 2>&1 \
	|| die "configure failed; log: $logs/configure.log"
step "building qemu-system-x86_64 with $jobs jobs (several minutes on 2 cores; log: $logs/build.log)"
start=$(date +%s)
ninja -C "$obj" -j"$jobs" qemu-system-x86_64 >"$logs/build.log" 2>&1 \
	|| die "build failed; log: $logs/build.log"
"$obj/qemu-system-x86_64" -device help 2>/dev/null | grep -q '"vmbus-bridge"' \
	|| die "the built qemu-system-x86_64 has no vmbus-bridge device; log: $logs/build.log"
install -m 0755 "$obj/qemu-system-x86_64" "$out/qemu-system-x86_64"
echo "$fingerprint" >"$out/fingerprint"
step "built $out/qemu-system-x86_64 in $(( $(date +%s) - start )) s (Debian qemu $version + ${#patches[@]} patch(es))"
[ "$each_patch" = 0 ] || build_each_patch
