#!/usr/bin/env bash
# Build one kernel variant: Debian's linux-source-6.1 + patches/<variant>/series,
# configured as `make tinyconfig` + configs/base.config + configs/userspace.config
# (+ configs/<variant>.config).
#
#   kernel/build.sh VARIANT                 -> $BUILD_DIR/kernel/VARIANT/bzImage
#   kernel/build.sh VARIANT+FLAVOUR[+...]   -> $BUILD_DIR/kernel/VARIANT+FLAVOUR/bzImage
#   kernel/build.sh --fingerprint TARGET    print the inputs' fingerprint, build nothing
#
# A flavour is a config fragment that can be added to any variant, last:
# configs/flavours/FLAVOUR.config (e.g. `crng+debug`: lockdep, KASAN, ...).
#
# A variant may name a parent variant in patches/<variant>/parent (one name, e.g.
# `crng`; test-only variants do): the parent's series is applied first (and its
# parent's before it, recursively), then the variant's own, and the configuration
# merges the parent's fragment (configs/<parent>.config) before the variant's own
# configs/<variant>.config, if any.
#
# A variant with a parent but no patch or fragment of its own is its parent's
# kernel: the parent's bzImage is linked, not built again. One with patches but no
# fragment of its own (the test-only variants) is built incrementally on an overlay
# of its parent's built tree: its own patches, then only what they touch (about
# half a minute on 2 cores, instead of a minute from ccache).
#
# A variant may also name a base variant in patches/<variant>/base (`crng` and
# `lrng` name `stock`): a build-tree relation only, with no effect on what is built.
# Its tree is an overlay on the base's built tree, with its own whole series applied
# and configured as a whole tree is; kbuild then compiles only what its patches and
# the options it changes touch (a minute or two instead of 6-12 on 2 cores, where a
# changed option invalidates every ccache entry). The finished tree is flattened
# into a whole one (hard links to the base's unchanged files, copies of the rest),
# so that its own children overlay it as they would any tree.
#
# A variant whose inputs (source tarball, series, parent, patches and fragments of
# the variant and all its ancestors) are unchanged since its last successful build
# is not rebuilt. Otherwise the tree is prepared afresh and built with ccache (cache
# in $BUILD_DIR/ccache, at most 5G), so a variant that differs from an already built
# one in a few files rebuilds in about a minute. The bzImage is installed atomically
# (copied to a temporary name beside it, then renamed) and its fingerprint file is
# written only after it: a kernel being booted is never seen half-written, and one
# without a matching fingerprint is rebuilt. A failed build removes the old bzImage.
# BUILD_DIR defaults to build/ in the repository (gitignored).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
build_dir=${BUILD_DIR:-$repo/build}
tarball=${LINUX_TARBALL:-/usr/src/linux-source-6.1.tar.xz}
jobs=${JOBS:-$(nproc)}
die() { echo "kernel/build.sh: $*" >&2; exit 1; }
step() { echo "==> [$target] $*" >&2; }
# First name in a file, ignoring comments and blank lines.
first_name() { sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$1" | head -n 1 | tr -d '[:space:]'; }

print_fingerprint=no
if [ "${1:-}" = "--fingerprint" ]; then print_fingerprint=yes; shift; fi
[ $# -eq 1 ] || die "usage: kernel/build.sh [--fingerprint] VARIANT[+FLAVOUR...]"
target=$1
variant=${target%%+*}
flavours=()
if [ "$target" != "$variant" ]; then IFS=+ read -ra flavours <<<"${target#*+}"; fi
for f in "${flavours[@]}"; do
	[ -n "$f" ] && [ -f "$here/configs/flavours/$f.config" ] \
		|| die "unknown flavour '$f' in '$target' (known: $(cd "$here/configs/flavours" && ls *.config | sed 's/\.config$//' | tr '\n' ' '))"
done
[ -f "$here/patches/$variant/series" ] \
	|| die "unknown variant '$variant': no $here/patches/$variant/series (known: $(ls "$here/patches" | tr '\n' ' '))"
[ -f "$tarball" ] || die "kernel source '$tarball' is missing: run 'make setup' (apt-get install linux-source-6.1)"

# The variant and its ancestors, the root first: benchlib/core/variants.py reads the
# parent files (the first name in each, comments and blank lines ignored), for
# this script and for the harness alike, and names an unknown parent or a cycle.
chain_names=$(PYTHONPATH="$repo" /usr/bin/python3 -m benchlib.core.variants chain "$variant") \
	|| die "the parents of variant '$variant' (see the line above)"
mapfile -t chain <<<"$chain_names"

# Patches named by each series, in order; blank lines and comments are skipped.
patches=()
declare -A patch_count
for v in "${chain[@]}"; do
	mapfile -t names < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$here/patches/$v/series")
	patch_count[$v]=${#names[@]}
	for p in "${names[@]}"; do
		[ -f "$here/patches/$v/$p" ] || die "series of '$v' names '$p', which is not in $here/patches/$v"
		patches+=("$here/patches/$v/$p")
	done
done

fragments=("$here/configs/base.config" "$here/configs/userspace.config")
for v in "${chain[@]}"; do
	if [ -f "$here/configs/$v.config" ]; then fragments+=("$here/configs/$v.config"); fi
done
for f in "${flavours[@]}"; do fragments+=("$here/configs/flavours/$f.config"); done

# The inputs' fingerprint decides whether anything needs doing.
fingerprint=$( {
	stat -c '%s %Y' "$tarball"
	for v in "${chain[@]}"; do
		echo "variant $v"
		cat "$here/patches/$v/series"
		if [ -f "$here/patches/$v/parent" ]; then cat "$here/patches/$v/parent"; fi
	done
	if [ -f "$here/patches/$variant/base" ]; then echo "base"; cat "$here/patches/$variant/base"; fi
	for p in "${patches[@]}"; do cat "$p"; done
	# A fragment's options only: its comments (the reasons) do not change the kernel.
	for f in "${fragments[@]}"; do
		echo "fragment ${f##*/}"
		grep -E '^(CONFIG_[A-Za-z0-9_]+=|# CONFIG_[A-Za-z0-9_]+ is not set$)' "$f" || true
	done
} | sha256sum | cut -d' ' -f1)
if [ "$print_fingerprint" = yes ]; then echo "$fingerprint"; exit 0; fi

# One build at a time per build directory: variants share the pristine tree and
# the cache, and two runs must not both prepare the same variant.
mkdir -p "$build_dir"
exec 9>"$build_dir/.build.lock"
if ! flock -n 9; then
	step "waiting for another kernel build in $build_dir to finish"
	flock 9
fi

out=$build_dir/kernel/$target
# The System.map beside the bzImage is part of the output: the crng tests' trace
# set reads kernel data at its symbols' addresses (benchlib/boot/guest.py).
if [ -f "$out/bzImage" ] && [ -f "$out/System.map" ] \
	&& [ "$(cat "$out/fingerprint" 2>/dev/null)" = "$fingerprint" ]; then
	step "up to date ($out/bzImage)"
	exit 0
fi

# A variant that adds nothing to its parent's kernel (no patch, no fragment of its
# own: it differs in its variant.toml only) is its parent's kernel: the parent is
# built (if it is not up to date) and its bzImage linked, not built again.
if [ -f "$here/patches/$variant/parent" ] && [ "${patch_count[$variant]}" -eq 0 ] \
	&& [ ! -f "$here/configs/$variant.config" ]; then
	parent_target=${chain[-2]}${target#"$variant"}
	flock -u 9
	"$0" "$parent_target"
	flock 9
	parent_out=$build_dir/kernel/$parent_target
	[ "$(cat "$parent_out/fingerprint" 2>/dev/null)" = "$("$0" --fingerprint "$parent_target")" ] \
		|| die "parent '$parent_target' changed while '$target' was being linked to it; run again"
	mkdir -p "$out"
	rm -f "$out/fingerprint"
	for f in bzImage config System.map; do
		ln -f "$parent_out/$f" "$out/.$f.tmp.$$"
		mv -f "$out/.$f.tmp.$$" "$out/$f"
	done
	echo "$fingerprint" >"$out/.fingerprint.tmp.$$"
	mv -f "$out/.fingerprint.tmp.$$" "$out/fingerprint"
	step "no patch or fragment of its own: linked the kernel of '$parent_target' ($out/bzImage)"
	exit 0
fi

# From here on, a failure leaves no bzImage that does not match the inputs.
mkdir -p "$out"
rm -f "$out/fingerprint"
# Every tree is built at one fixed path, mounted there (a bind mount of the variant's
# own tree, or an overlay on its parent's): kbuild's tools (objtool) record absolute
# paths, and a tree built at another path would rebuild them, and with them every
# object. Without the right to mount, each tree is built where it is.
build_at=$build_dir/kernel/.tree
cleanup() {
	local status=$?
	if mountpoint -q "$build_at"; then umount "$build_at" || true; fi
	rm -f "$out"/.*.tmp.$$
	[ $status -eq 0 ] || rm -f "$out/bzImage" "$out/config" "$out/System.map"
}
trap cleanup EXIT
mkdir -p "$build_at"
# A mount left behind by a build that was killed (we hold the lock).
if mountpoint -q "$build_at"; then umount "$build_at"; fi

# Copy to a temporary name in the destination's directory, then rename: atomic.
install_atomic() {
	local tmp
	tmp="$(dirname "$2")/.$(basename "$2").tmp.$$"
	cp "$1" "$tmp"
	mv -f "$tmp" "$2"
}

# Pristine source, unpacked once and shared (hard links) by all variant trees.
pristine=$build_dir/src/linux-source-6.1
if [ ! -f "$pristine/.unpacked" ]; then
	step "unpacking $tarball"
	rm -rf "$pristine"
	mkdir -p "$build_dir/src"
	tar -C "$build_dir/src" -xJf "$tarball"
	touch "$pristine/.unpacked"
fi

# ccache, if installed (scripts/setup.sh installs it): the cache is shared by all
# variants. Paths under the kernel trees are hashed relative to the tree, so
# identical files of two variants' trees share cache entries.
cc=gcc
stats_log=$out/ccache-stats.log
rm -f "$stats_log"
if command -v ccache >/dev/null; then
	export CCACHE_DIR=$build_dir/ccache CCACHE_MAXSIZE=5G
	export CCACHE_BASEDIR=$build_dir/kernel CCACHE_STATSLOG=$stats_log
	# On a miss, compile what ccache has already preprocessed (run_second_cpp =
	# false) instead of preprocessing again: a kernel file's preprocessing is a fifth
	# of its compile (kernel/fork.c: 0.45 s of 2.0 s), and a cold build misses on all
	# 1,500. The objects are the same; only some warnings can read differently.
	export CCACHE_NOCPP2=true
	cc="ccache gcc"
else
	step "ccache is not installed (run 'make setup'): building without it"
fi
kmake() { make -C "$tree" CC="$cc" "$@"; }
# apply_patch FILE ONTO: one patch of the series onto $tree (ONTO names it in errors)
apply_patch() {
	step "applying ${1#"$here/patches/"}"
	patch -d "$tree" -p1 --quiet --forward --no-backup-if-mismatch < "$1" \
		|| die "patch '${1#"$here/patches/"}' (variant '$variant') does not apply to $2"
}

# configure: the whole configuration of $tree, tinyconfig + the fragments; every
# option a fragment asks for must survive dependency resolution (the last fragment
# to name an option decides it, as merge_config.sh does: lrng's turns on the
# self-tests that base.config turns off).
configure() {
	local missing

	step "configuring (tinyconfig + ${fragments[*]##*/})"
	kmake -s tinyconfig >/dev/null
	"$tree/scripts/kconfig/merge_config.sh" -m -O "$tree" "$tree/.config" "${fragments[@]}" >"$out/merge_config.log"
	kmake -s olddefconfig >/dev/null
	missing=$(grep -hE '^(CONFIG_[A-Za-z0-9_]+=.*|# CONFIG_[A-Za-z0-9_]+ is not set)$' "${fragments[@]}" \
		| awk '{ name = $0; sub(/^# /, "", name); sub(/[= ].*/, "", name); last[name] = $0 }
			END { for (name in last) print last[name] }' \
		| sort | while read -r line; do grep -qxF -- "$line" "$tree/.config" || echo "$line"; done)
	[ -z "$missing" ] || die "config options did not survive olddefconfig: $(echo $missing)"
}

# built_tree TARGET: the whole built tree of TARGET (built first if it is not up to
# date), or nothing when it has none for its current inputs.
built_tree() {
	local of_out=$build_dir/kernel/$1 of_fingerprint

	flock -u 9
	"$0" "$1" >&2
	flock 9
	of_fingerprint=$("$0" --fingerprint "$1")
	[ "$(cat "$of_out/fingerprint" 2>/dev/null)" = "$of_fingerprint" ] \
		|| die "'$1' changed while '$target' was being built on it; run again"
	if [ "$(cat "$of_out/linux/.bench-fingerprint" 2>/dev/null)" = "$of_fingerprint" ]; then
		echo "$of_out/linux"
	fi
}

# flatten LOWER UPPER DEST: DEST becomes the whole tree the overlay showed, LOWER's
# files that UPPER left alone hard-linked (nothing ever writes into a finished
# tree), UPPER's own files copied. A whiteout (a character device 0:0) is a file
# the build removed; an opaque directory (trusted.overlay.opaque) hides LOWER's.
flatten() {
	local lower=$1 upper=$2 dest=$3 path
	local -a hidden

	mapfile -d '' -t hidden < <(cd "$upper" && /usr/bin/python3 -c '
import os, stat, sys
for top, dirs, files in os.walk("."):
    for name in dirs + files:
        path = os.path.join(top, name)
        mode = os.lstat(path).st_mode
        try:
            opaque = stat.S_ISDIR(mode) and os.getxattr(path, "trusted.overlay.opaque") == b"y"
        except OSError:
            opaque = False
        if stat.S_ISCHR(mode) or opaque:
            sys.stdout.write(path + "\0")
')
	cp -al "$lower" "$dest"
	rm -f "$dest/.bench-fingerprint"
	for path in "${hidden[@]}"; do rm -rf "${dest:?}/$path"; done
	cp -a --remove-destination "$upper/." "$dest/"
	# the whiteouts came along as device nodes: the files stay removed
	for path in "${hidden[@]}"; do
		if [ -c "$upper/$path" ]; then rm -f "$dest/$path"; fi
	done
}

# A variant with a parent, patches of its own and no config fragment of its own
# (the test-only variants) is built incrementally: an overlay on the parent's built
# tree, its own patches applied, the parent's configuration kept, and only what
# they touch rebuilt. The parent is built first if it is not up to date.
parent_tree=""
if [ -f "$here/patches/$variant/parent" ] && [ ! -f "$here/configs/$variant.config" ]; then
	parent_target=${chain[-2]}${target#"$variant"}
	parent_tree=$(built_tree "$parent_target")
fi
# A variant with a base (and no parent) is built on an overlay of the base's tree.
base_tree=""
if [ ! -f "$here/patches/$variant/parent" ] && [ -f "$here/patches/$variant/base" ]; then
	base_target=$(first_name "$here/patches/$variant/base")${target#"$variant"}
	[ -f "$here/patches/${base_target%%+*}/series" ] \
		|| die "variant '$variant' names base '${base_target%%+*}', which has no series"
	[ "${base_target%%+*}" != "$variant" ] || die "variant '$variant' names itself as its base"
	base_tree=$(built_tree "$base_target")
fi

# overlay_on LOWER: mount an overlay on the built tree LOWER at $build_at and make
# it $tree; without the right to mount, say so and leave $tree empty.
overlay_on() {
	mkdir -p "$out/overlay/upper" "$out/overlay/work"
	if mount -t overlay overlay -o "lowerdir=$1,upperdir=$out/overlay/upper,workdir=$out/overlay/work" \
		"$build_at" 2>"$out/mount.log"; then
		tree=$build_at
	else
		step "cannot mount an overlay ($(head -n 1 "$out/mount.log")): building the whole tree"
		rm -rf "$out/overlay"
	fi
}

tree=""
rm -rf "$out/linux" "$out/overlay"
if [ -n "$parent_tree" ]; then
	overlay_on "$parent_tree"
	if [ -n "$tree" ]; then
		step "preparing source tree: an overlay on the built tree of '$parent_target'"
		for p in "${patches[@]}"; do
			case "$p" in "$here/patches/$variant/"*) apply_patch "$p" "'$parent_target'" ;; esac
		done
		step "configuration: the parent's (no fragment of its own)"
	fi
elif [ -n "$base_tree" ]; then
	overlay_on "$base_tree"
	if [ -n "$tree" ]; then
		step "preparing source tree: an overlay on the built tree of '$base_target', its whole series applied"
		for p in "${patches[@]}"; do apply_patch "$p" "the tree of '$base_target'"; done
		configure
	fi
fi

if [ -z "$tree" ]; then
	summary=""
	for v in "${chain[@]}"; do summary+="${summary:+ + }$v (${patch_count[$v]} patch(es))"; done
	step "preparing source tree: $summary"
	# patch(1) replaces files rather than writing through links, so hard links are safe.
	cp -al "$pristine" "$out/linux"
	rm -f "$out/linux/.unpacked"
	tree=$out/linux
	if mount --bind "$out/linux" "$build_at" 2>"$out/mount.log"; then
		tree=$build_at
	else
		step "cannot bind-mount the tree at $build_at ($(head -n 1 "$out/mount.log")): building it in place"
	fi
	for p in "${patches[@]}"; do apply_patch "$p" "$(basename "$tarball")"; done
	configure
fi

if [ "$tree" = "$build_at" ] && [ -d "$out/overlay" ]; then
	expect="on an overlay: only what differs, under a minute to about 6"
else
	expect="a whole tree: 20-26 minutes on 2 cores with a cold cache (measured 2026-12-05), a few warm"
fi
step "building bzImage with $jobs jobs, CC='$cc' ($expect)"
start=$(date +%s)
if ! kmake -j"$jobs" bzImage >"$out/build.log" 2>&1; then
	tail -n 30 "$out/build.log" >&2
	die "build failed; full log: $out/build.log"
fi
elapsed=$(( $(date +%s) - start ))
install_atomic "$tree/.config" "$out/config"
install_atomic "$tree/arch/x86/boot/bzImage" "$out/bzImage"
install_atomic "$tree/System.map" "$out/System.map"
if mountpoint -q "$build_at"; then umount "$build_at"; fi
if [ -n "$base_tree" ] && [ -d "$out/overlay/upper" ]; then
	step "flattening the tree for its children (hard links to the tree of '$base_target')"
	flatten "$base_tree" "$out/overlay/upper" "$out/linux"
fi
if [ -d "$out/linux" ]; then
	# The tree a child variant may overlay: built whole, for these inputs. Written
	# to a new file: a flattened tree shares its base's files.
	echo "$fingerprint" >"$out/linux/.bench-fingerprint.tmp"
	mv -f "$out/linux/.bench-fingerprint.tmp" "$out/linux/.bench-fingerprint"
fi
rm -rf "$out/overlay"
echo "$fingerprint" >"$out/.fingerprint.tmp.$$"
mv -f "$out/.fingerprint.tmp.$$" "$out/fingerprint"
cache=""
if [ -f "$stats_log" ]; then
	# "Hits: H / N (P%)" of this build's compilations only.
	cache=$(ccache --show-log-stats 2>/dev/null | sed -n 's/^ *Hits: *\([0-9]* \/ *[0-9]*\).*/, ccache hits \1 compilations/p' | head -n 1)
fi
step "built $out/bzImage in $elapsed s${cache}"
