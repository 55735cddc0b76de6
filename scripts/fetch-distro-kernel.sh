#!/usr/bin/env bash
# Fetch Debian 12's cloud kernel package (linux-image-cloud-amd64's current
# linux-image-6.1.0-N-cloud-amd64) into build/distro/, without installing it: the
# distro-kernel tests boot it with --kernel-deb, as a cloud image team would bring
# it. build/distro/linux-image-cloud-amd64.deb links to the version fetched. Idempotent:
# a package already there is kept until the archive has a newer one.
set -euo pipefail

step() { echo "==> [distro] $*" >&2; }
die() { echo "scripts/fetch-distro-kernel.sh: $*" >&2; exit 1; }

out=${BUILD_DIR:-$(cd "$(dirname "$0")/.." && pwd)/build}/distro
meta=linux-image-cloud-amd64
mkdir -p "$out"
package=$(apt-cache depends "$meta" 2>/dev/null | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
[ -n "$package" ] || die "apt-cache knows no '$meta' (is bookworm in the apt sources? apt-get update?)"
version=$(apt-cache policy "$package" | awk '/Candidate:/ {print $2}')
deb=$out/${package}_${version}_amd64.deb
if [ ! -s "$deb" ]; then
	step "downloading $package $version (not installed: unpacked by the tests)"
	(cd "$out" && apt-get download -q "$package=$version" >/dev/null 2>"$out/download.err") \
		|| die "apt-get download $package=$version failed: $(cat "$out/download.err")"
	[ -s "$deb" ] || die "apt-get download left no $deb"
	rm -f "$out/download.err"
fi
ln -sfn "$(basename "$deb")" "$out/$meta.deb"
step "$out/$meta.deb -> $(basename "$deb")"
