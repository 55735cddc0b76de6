#!/usr/bin/env bash
# Run the kernel's checkpatch.pl --strict on every patch of every kernel variant,
# from the pristine linux-source-6.1 tree kernel/build.sh unpacks.
#   scripts/check-patches.sh [PATCH...]
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
tree=${BUILD_DIR:-$repo/build}/src/linux-source-6.1
[ -x "$tree/scripts/checkpatch.pl" ] || { echo "check-patches: no $tree: run 'make kernels' first" >&2; exit 2; }
if [ $# -eq 0 ]; then
	set -- $(ls "$repo"/kernel/patches/*/*.patch 2>/dev/null)
fi
# Originally-by: is the kernel's convention for code based on someone else's (the
# 2016 designs' authors), which 6.1's checkpatch does not list: it checks such a line
# as a Suggested-by: (same form: a name and an address), everything else as written.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0
for p in "$@"; do
	sed 's/^Originally-by: /Suggested-by: /' "$p" > "$work/${p##*/}"
	if out=$(cd "$tree" && ./scripts/checkpatch.pl --strict --quiet "$work/${p##*/}" 2>&1) \
			&& [ -z "$out" ]; then
		echo "ok: ${p#$repo/}"
	else
		echo "FAIL: ${p#$repo/}"; echo "$out" | sed 's/^/    /'; status=1
	fi
done
exit $status
