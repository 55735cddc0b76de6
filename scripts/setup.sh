#!/usr/bin/env bash
# Bring a fresh Debian 12 machine to a working bench, idempotently:
# apt packages, libvirt's daemons (there is no systemd here), and nothing else.
# Kernel source is unpacked by kernel/build.sh; the patched QEMU by qemu/build.sh.
set -euo pipefail

step() { echo "==> [setup] $*" >&2; }
die() { echo "scripts/setup.sh: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || die "must run as root (apt-get, libvirtd)"
# Where libvirt's QEMU driver reads its configuration and where libvirtd's log
# goes: the host's own, unless a test points them elsewhere.
conf=${BENCH_QEMU_CONF:-/etc/libvirt/qemu.conf}
log_dir=${BENCH_LIBVIRT_LOG_DIR:-/var/log/libvirt}

packages=(
	linux-source-6.1 build-essential bc bison flex libelf-dev libssl-dev cpio xz-utils lz4 kmod ccache
	qemu-system-x86 seabios libvirt-daemon libvirt-daemon-driver-qemu libvirt-clients virtinst
	libxml2-utils python3-pytest python3-libvirt busybox-static gcc-multilib
	python3-matplotlib chromium chromium-driver python3-selenium python3-pytest-xdist
	python3-jsonschema mmdebstrap tini
)
missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	step "installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
		|| die "apt-get install failed for: ${missing[*]}"
fi

# libvirt runs QEMU as root with no security driver and no cgroups: this machine
# has neither systemd nor a writable cgroup hierarchy. QEMU writes its own log and
# the serial files itself (stdio_handler "file"): no virtlogd, one daemon fewer to
# start, and the files grow as QEMU writes them (no rotation at 2 MiB).
# This changes the host's libvirt configuration: say so, keep the original, replace
# an older version of our block, and restart a libvirtd that is already running so
# that it reads the change.
managed_block='# bench: managed (appended by the boot-time randomness bench'"'"'s scripts/setup.sh)
user = "root"
group = "root"
security_driver = "none"
cgroup_controllers = [ ]
stdio_handler = "file"'
restart_libvirtd=no
if [ "$(sed -n '/^# bench: managed/,$p' "$conf" 2>/dev/null)" != "$managed_block" ]; then
	backup=$conf.bench-backup.$(date +%Y%m%d-%H%M%S)
	[ -f "$conf" ] && cp -p "$conf" "$backup"
	step "changing the host's $conf (backup: $backup): QEMU runs as root, security_driver = \"none\", no cgroup controllers, stdio_handler = \"file\""
	[ -f "$conf" ] && sed -i '/^# bench: managed/,$d' "$conf"
	printf '%s\n' "$managed_block" >>"$conf"
	restart_libvirtd=yes
fi
getent group kvm >/dev/null || groupadd -r kvm
getent group libvirt >/dev/null || groupadd -r libvirt
getent group libvirt-qemu >/dev/null || groupadd -r libvirt-qemu
id libvirt-qemu >/dev/null 2>&1 || useradd -r -g libvirt-qemu -G kvm -d /var/lib/libvirt -s /usr/sbin/nologin libvirt-qemu
mkdir -p "$log_dir" /var/run/libvirt

# libvirtd runs under `tini -s`, a child subreaper that reaps at once: libvirt
# daemonizes each QEMU, so an exited QEMU is the child of init, and libvirt waits
# until it is reaped before it counts a domain as gone. This machine's PID 1
# reaps about every 2 s (measured: virDomainDestroy took 2.0 s, 0.22 s under
# tini), which every boot paid once at its end.
# (pgrep fails when there is none: under pipefail that must not end the script,
# as it did on every fresh machine.)
libvirtd_pid=$(pgrep -x libvirtd | head -n 1 || true)
under_reaper=no
if [ -n "$libvirtd_pid" ] && [ "$(ps -o comm= -p "$(ps -o ppid= -p "$libvirtd_pid" | tr -d ' ')")" = tini ]; then
	under_reaper=yes
fi
if [ -n "$libvirtd_pid" ] && { [ "$restart_libvirtd" = yes ] || [ "$under_reaper" = no ]; }; then
	step "restarting libvirtd (to read $conf, under tini -s)"
	pkill -x libvirtd
	for _ in $(seq 50); do pgrep -x libvirtd >/dev/null || break; sleep 0.2; done
fi
if ! pgrep -x libvirtd >/dev/null; then
	step "starting libvirtd under tini -s (log: $log_dir/libvirtd-bench.log)"
	setsid tini -s -- libvirtd </dev/null >>"$log_dir/libvirtd-bench.log" 2>&1 &
fi
for _ in $(seq 50); do
	virsh -c qemu:///system version >/dev/null 2>&1 && break
	sleep 0.2
done
if ! virsh -c qemu:///system version >/dev/null 2>&1; then
	tail -n 20 "$log_dir/libvirtd-bench.log" >&2 2>/dev/null || true
	die "libvirtd did not answer on qemu:///system within 10 s (its log: $log_dir/libvirtd-bench.log, last lines above)"
fi
step "ready: $(virsh -c qemu:///system version | sed -n 's/^Running hypervisor: //p')"
