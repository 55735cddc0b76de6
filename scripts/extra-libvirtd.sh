#!/bin/bash
# A second libvirt daemon on this machine, on a socket of its own, for testing the
# bench's spread over several hosts without a second machine.
#
#   scripts/extra-libvirtd.sh start DIR   -> prints its URI; its files live in DIR
#   scripts/extra-libvirtd.sh stop DIR    -> destroys its domains, stops it
#
# A second privileged QEMU driver would share the first one's state folders
# (/run/libvirt, /var/lib/libvirt: each daemon would adopt the other's guests), so
# this one runs in a mount namespace of its own where those folders, and
# /etc/libvirt, are DIR's. Its socket is DIR/sock/libvirt-sock, outside the
# private mounts; it logs QEMU's output to files (no virtlogd); and it has a
# storage pool "bench" in DIR/images for the kernels and initramfs the bench
# uploads to it, as to any remote host.
set -euo pipefail

die() { echo "extra-libvirtd: $*" >&2; exit 1; }
[ $# -eq 2 ] || die "usage: $0 start|stop DIR"
action=$1 dir=$2
[ "$(id -u)" -eq 0 ] || die "must run as root (a privileged QEMU driver, mount namespace)"
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
sock=$dir/sock/libvirt-sock
uri="qemu+unix:///system?socket=$sock"
# How long the daemon may take to answer, and to go.
WAIT_S=30

case "$action" in
start)
	for sub in sock run lib cache log etc images; do mkdir -p "$dir/$sub"; done
	cp -a /etc/libvirt/. "$dir/etc/"
	# None of the host's own networks, pools or domains: they are the first daemon's.
	rm -rf "$dir/etc/qemu/networks/autostart" "$dir/etc/storage" "$dir/etc/qemu/"*.xml
	# The host's qemu.conf as setup.sh left it: QEMU as root, no security driver,
	# no cgroups, no virtlogd (stdio_handler "file").
	cat >"$dir/etc/libvirtd.conf" <<CONF
unix_sock_dir = "$dir/sock"
unix_sock_rw_perms = "0700"
auth_unix_rw = "none"
auth_unix_ro = "none"
CONF
	# The daemon's own namespace: private /run/libvirt, /var/lib/libvirt,
	# /var/cache/libvirt, /var/log/libvirt and /etc/libvirt.
	unshare --mount --propagation private -- sh -c '
		set -e
		d=$1
		mount --bind "$d/run" /run/libvirt
		mount --bind "$d/lib" /var/lib/libvirt
		mkdir -p /var/cache/libvirt && mount --bind "$d/cache" /var/cache/libvirt
		mount --bind "$d/log" /var/log/libvirt
		mount --bind "$d/etc" /etc/libvirt
		# Under a reaper that reaps at once, as scripts/setup.sh starts the main one.
		setsid tini -s -- libvirtd -f /etc/libvirt/libvirtd.conf -p "$d/libvirtd.pid" \
			</dev/null >>"$d/log/libvirtd-bench.log" 2>&1 &
	' extra-libvirtd "$dir"
	for _ in $(seq $((WAIT_S * 5))); do
		virsh -q -c "$uri" version >/dev/null 2>&1 && break
		sleep 0.2
	done
	virsh -q -c "$uri" version >/dev/null 2>&1 || die "the daemon in $dir did not answer on $uri"
	if ! virsh -q -c "$uri" pool-info bench >/dev/null 2>&1; then
		virsh -q -c "$uri" pool-define-as bench dir --target "$dir/images" >/dev/null
		virsh -q -c "$uri" pool-start bench >/dev/null
	fi
	echo "$uri"
	;;
stop)
	[ -f "$dir/libvirtd.pid" ] || exit 0
	pid=$(cat "$dir/libvirtd.pid")
	# A daemon that stopped answering must not hang the stop: every call is bounded.
	for dom in $(timeout 10 virsh -q -c "$uri" list --name 2>/dev/null); do
		timeout 10 virsh -q -c "$uri" destroy "$dom" >/dev/null 2>&1 || true
	done
	# Its QEMUs, whether or not it could destroy them (their pid files are its own).
	for qemu_pid in "$dir"/run/qemu/*.pid; do
		[ -f "$qemu_pid" ] && kill -9 "$(cat "$qemu_pid")" 2>/dev/null || true
	done
	kill "$pid" 2>/dev/null || true
	for _ in $(seq $((WAIT_S * 5))); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
	if kill -0 "$pid" 2>/dev/null; then
		echo "extra-libvirtd: libvirtd $pid (in $dir) ignored SIGTERM: killed" >&2
		kill -9 "$pid" 2>/dev/null || true
	fi
	rm -f "$dir/libvirtd.pid"
	;;
*)
	die "unknown action '$action' (start or stop)"
	;;
esac
