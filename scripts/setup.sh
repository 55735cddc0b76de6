#!/usr/bin/env bash
# Bring a fresh Debian 12 machine to a working bench, idempotently:
# apt packages, libvirt's daemons (there is no systemd here), and nothing else.
# Kernel source is unpacked by kernel/build.sh; the patched QEMU by qemu/build.sh.
set -euo pipefail

step() { echo "==> [setup] $*" >&2; }
die() { echo "scripts/setup.sh: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || die "must run as root (apt-get, libvirtd)"

packages=(
	linux-source-6.1 build-essential bc bison flex libelf-dev libssl-dev cpio xz-utils kmod ccache
	qemu-system-x86 seabios libvirt-daemon libvirt-daemon-driver-qemu libvirt-clients virtinst
	libxml2-utils python3-pytest python3-pexpect python3-libvirt busybox-static gcc-multilib
	python3-matplotlib chromium chromium-driver python3-selenium python3-pytest-xdist
	python3-jsonschema mmdebstrap
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
# has neither systemd nor a writable cgroup hierarchy. This changes the host's
# libvirt configuration: say so, keep the original, and restart a libvirtd that
# is already running so that it reads the change.
conf=/etc/libvirt/qemu.conf
restart_libvirtd=no
if ! grep -q '^# bench: managed' "$conf" 2>/dev/null; then
	backup=$conf.bench-backup.$(date +%Y%m%d-%H%M%S)
	[ -f "$conf" ] && cp -p "$conf" "$backup"
	step "changing the host's $conf (backup: $backup): QEMU runs as root, security_driver = \"none\", no cgroup controllers"
	cat >>"$conf" <<'CONF'
# bench: managed (appended by the boot-time randomness bench's scripts/setup.sh)
user = "root"
group = "root"
security_driver = "none"
cgroup_controllers = [ ]
CONF
	restart_libvirtd=yes
fi
getent group kvm >/dev/null || groupadd -r kvm
getent group libvirt >/dev/null || groupadd -r libvirt
getent group libvirt-qemu >/dev/null || groupadd -r libvirt-qemu
id libvirt-qemu >/dev/null 2>&1 || useradd -r -g libvirt-qemu -G kvm -d /var/lib/libvirt -s /usr/sbin/nologin libvirt-qemu
mkdir -p /var/log/libvirt /var/run/libvirt

if ! pgrep -x virtlogd >/dev/null; then step "starting virtlogd"; virtlogd -d; fi
if [ "$restart_libvirtd" = yes ] && pgrep -x libvirtd >/dev/null; then
	step "restarting libvirtd to read $conf"
	pkill -x libvirtd
	for _ in $(seq 50); do pgrep -x libvirtd >/dev/null || break; sleep 0.2; done
fi
if ! pgrep -x libvirtd >/dev/null; then step "starting libvirtd"; libvirtd -d; fi
for _ in $(seq 50); do
	virsh -c qemu:///system version >/dev/null 2>&1 && break
	sleep 0.2
done
virsh -c qemu:///system version >/dev/null 2>&1 || die "libvirtd did not answer on qemu:///system"
step "ready: $(virsh -c qemu:///system version | sed -n 's/^Running hypervisor: //p')"
