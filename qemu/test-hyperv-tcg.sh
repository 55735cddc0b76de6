#!/usr/bin/env bash
# Tests of the patched QEMU's Hyper-V emulation under TCG (qemu/patches/).
#
# Usage:
#   qemu/test-hyperv-tcg.sh [synic|linux|reboot|all]        (default: all)
#
# Environment:
#   BUILD_DIR  default <repo>/build
#   QEMU       default $BUILD_DIR/qemu/qemu-system-x86_64   (qemu/build.sh makes it)
#   KERNEL     default $BUILD_DIR/kernel/stock/bzImage      (kernel/build.sh stock;
#              a Linux 6.1 bzImage with CONFIG_HYPERV=y and no CONFIG_KVM_GUEST)
#   TIMEOUT    seconds per QEMU run, default 120
#   REBOOT_WINDOW  seconds the reboot test lets the guest reboot in a loop, default 40
#
# synic: a bare-metal 32-bit multiboot guest (tests/synic-test/, built here with
#   gcc -m32) together with QEMU's hyperv-testdev checks the Hyper-V CPUID leaves,
#   the hypercall page, VP index and reference time MSRs, HvPostMessage delivery
#   to a SINT, re-delivery of a message that found its slot busy after the guest
#   writes EOM, HvSignalEvent (event flag + SINT), and synthetic timer 0 in
#   message mode (periodic and one-shot). The guest reports on COM1 and exits
#   through isa-debug-exit.
# linux: boots $KERNEL on q35 with 2 vCPUs, -cpu qemu64 with hv-* flags and
#   -device vmbus-bridge, a busybox initramfs (busybox-static) that prints
#   /proc/interrupts twice, 2 s apart, and dmesg; checks for
#   "Hypervisor detected: Microsoft Hyper-V", "hv_vmbus: Vmbus version:", the HYP
#   row of /proc/interrupts growing (vmbus_isr runs on every synthetic timer
#   message) and "Hyper-V clockevent" as the clock event device.
# reboot: the same guest and flags, but the initramfs reboots (reboot -f) as soon
#   as it has printed the HYP row; QEMU runs for REBOOT_WINDOW seconds and is then
#   stopped by timeout(1). Checks that QEMU survived the resets (SynIC reset with
#   VMBus and timer routes live) and that at least 3 boots brought VMBus up and
#   counted HYP interrupts.
#
# Ends with a line "N passed, N failed"; exits 1 when a check failed, 2 on a
# usage or setup error. Consoles and artefacts: $BUILD_DIR/qemu/test/.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
build_dir=${BUILD_DIR:-$repo/build}
qemu=${QEMU:-$build_dir/qemu/qemu-system-x86_64}
kernel=${KERNEL:-$build_dir/kernel/stock/bzImage}
timeout_s=${TIMEOUT:-120}
work=$build_dir/qemu/test
what=${1:-all}

die() { echo "test-hyperv-tcg.sh: $*" >&2; exit 2; }
step() { echo "==> [qemu-test] $*" >&2; }

passed=0
failed=0
check() {  # check OK|FAIL description
	if [ "$1" = OK ]; then
		passed=$((passed + 1))
		echo "ok   - $2"
	else
		failed=$((failed + 1))
		echo "FAIL - $2"
	fi
}
ok_if() { if "$@"; then echo OK; else echo FAIL; fi; }

case $what in
synic|linux|reboot|all) ;;
*) die "usage: $0 [synic|linux|reboot|all]" ;;
esac
[ -x "$qemu" ] || die "no QEMU at $qemu: run qemu/build.sh (or set QEMU)"
mkdir -p "$work"
qemu_base=("$qemu" -L /usr/share/seabios -L /usr/share/qemu -nic none -accel tcg
	-display none -monitor none)

test_synic() {
	local src=$here/tests/synic-test elf=$work/synic-test.elf log=$work/synic-test.console
	local cflags=(-m32 -ffreestanding -fno-pic -fno-pie -fno-stack-protector -nostdlib -O2
		-Wall -Wextra -Wno-unused-parameter)
	local rc=0

	step "building the bare-metal SynIC test guest"
	gcc "${cflags[@]}" -c "$src/boot.S" -o "$work/boot.o" \
		&& gcc "${cflags[@]}" -c "$src/synic-test.c" -o "$work/synic-test.o" \
		&& ld -m elf_i386 -T "$src/link.ld" -z noexecstack --no-warn-rwx-segments \
			-o "$elf" "$work/boot.o" "$work/synic-test.o" \
		|| die "building $elf failed (needs gcc with -m32 code generation and binutils)"

	step "running it (console: $log)"
	timeout "$timeout_s" "${qemu_base[@]}" -no-reboot -M pc -smp 2 -m 64 \
		-cpu qemu64,hv-vpindex,hv-synic,hv-time,hv-stimer,hv-runtime \
		-device hyperv-testdev -device isa-debug-exit,iobase=0xf4,iosize=4 \
		-serial "file:$log" -kernel "$elf" 2>"$work/synic-test.stderr" || rc=$?
	sed -i 's/\r$//' "$log"
	grep 'SYNIC-TEST: \(ok\|FAIL\)' "$log" | sed 's/^/    /' || true
	# isa-debug-exit: guest code 0 -> status 1
	check "$(ok_if [ "$rc" = 1 ])" "synic: guest exited with its pass code (QEMU status $rc, want 1)"
	check "$(ok_if grep -q 'SYNIC-TEST: PASS' "$log")" "synic: all guest checks passed"
}

hyp_sum() {  # sum of the HYP row in the block after marker $2 of console $1
	awk -v m="$2" '$0 ~ m {on=1; next} on && /^HYP:/ {s=0; for (i=2; i<=NF; i++) if ($i ~ /^[0-9]+$/) s+=$i; print s; exit}' "$1"
}

linux_cpu=qemu64,-rdrand,hv-relaxed,hv-spinlocks=0x1fff,hv-vpindex,hv-runtime,hv-synic,hv-stimer,hv-time,hv-frequencies

make_initramfs() {  # make_initramfs NAME: $work/NAME.gz with the init script on stdin
	local rootfs=$work/$1

	[ -f "$kernel" ] || die "no kernel at $kernel: run kernel/build.sh stock (or set KERNEL)"
	[ -x /bin/busybox ] || die "/bin/busybox missing: apt-get install busybox-static"
	command -v cpio >/dev/null || die "cpio missing: apt-get install cpio"
	rm -rf "$rootfs"
	mkdir -p "$rootfs"/{bin,proc,sys,dev}
	cp /bin/busybox "$rootfs/bin/busybox"
	cat >"$rootfs/init"
	chmod +x "$rootfs/init"
	(cd "$rootfs" && find . | cpio -o -H newc 2>/dev/null | gzip -1) >"$work/$1.gz"
}

test_linux() {
	local initrd=$work/initramfs.gz log=$work/linux.console rc=0
	local h1 h2

	step "making the busybox initramfs"
	make_initramfs initramfs <<-'EOF'
	#!/bin/busybox sh
	/bin/busybox --install -s /bin
	export PATH=/bin
	mount -t proc proc /proc
	mount -t sysfs sysfs /sys
	echo "PROBE: interrupts-1"
	cat /proc/interrupts
	sleep 2
	echo "PROBE: interrupts-2"
	cat /proc/interrupts
	echo "PROBE: vmbus devices"
	ls /sys/bus/vmbus/devices
	echo "PROBE: clockevent"
	cat /sys/devices/system/clockevents/clockevent0/current_device
	echo "PROBE: clocksource"
	cat /sys/devices/system/clocksource/clocksource0/current_clocksource
	echo "PROBE: dmesg"
	dmesg | grep -i -E 'hv|hyper-?v|vmbus'
	echo "PROBE: done"
	poweroff -f
	EOF

	step "booting $kernel (console: $log)"
	timeout "$timeout_s" "${qemu_base[@]}" -no-reboot -M q35 -smp 2 -m 512 \
		-cpu "$linux_cpu" -device vmbus-bridge -serial "file:$log" \
		-kernel "$kernel" -initrd "$initrd" -append 'console=ttyS0 panic=-1' \
		2>"$work/linux.stderr" || rc=$?
	sed -i 's/\r$//' "$log"
	grep -E 'Hypervisor detected|hv_vmbus: Vmbus version|^HYP:|^ *LOC:|PROBE: (interrupts|clockevent)|clockevent$' "$log" \
		| sed 's/^/    /' || true

	check "$(ok_if [ "$rc" = 0 ])" "linux: QEMU exited normally after poweroff (status $rc)"
	check "$(ok_if grep -q 'PROBE: done' "$log")" "linux: the initramfs probe ran to the end"
	check "$(ok_if grep -q 'Hypervisor detected: Microsoft Hyper-V' "$log")" \
		"linux: 'Hypervisor detected: Microsoft Hyper-V'"
	check "$(ok_if grep -q 'hv_vmbus: Vmbus version:' "$log")" "linux: 'hv_vmbus: Vmbus version:'"
	h1=$(hyp_sum "$log" 'PROBE: interrupts-1')
	h2=$(hyp_sum "$log" 'PROBE: interrupts-2')
	check "$(ok_if [ -n "$h1" ] && [ -n "$h2" ] && [ "$h2" -gt "$h1" ])" \
		"linux: HYP interrupts grow over 2 s (${h1:-none} -> ${h2:-none})"
	check "$(ok_if grep -qx 'Hyper-V clockevent' "$log")" \
		"linux: clock events come from the synthetic timer ('Hyper-V clockevent')"
}

test_reboot() {
	local log=$work/reboot.console window=${REBOOT_WINDOW:-40} rc=0 boots hyp

	step "making the rebooting initramfs"
	make_initramfs initramfs-reboot <<-'EOF'
	#!/bin/busybox sh
	/bin/busybox --install -s /bin
	export PATH=/bin
	mount -t proc proc /proc
	sleep 1
	echo "PROBE: boot"
	grep '^HYP:' /proc/interrupts
	reboot -f
	EOF

	step "booting $kernel in a reboot loop for $window s (console: $log)"
	timeout "$window" "${qemu_base[@]}" -M q35 -smp 2 -m 512 \
		-cpu "$linux_cpu" -device vmbus-bridge -serial "file:$log" \
		-kernel "$kernel" -initrd "$work/initramfs-reboot.gz" -append 'console=ttyS0 panic=-1' \
		2>"$work/reboot.stderr" || rc=$?
	sed -i 's/\r$//' "$log"
	boots=$(grep -c 'hv_vmbus: Vmbus version:' "$log" || true)
	hyp=$(awk '/^PROBE: boot/ {on=1; next} on && /^HYP:/ {s=0; for (i=2; i<=NF; i++) if ($i ~ /^[0-9]+$/) s+=$i; if (s > 0) n++; on=0} END {print n+0}' "$log")
	echo "    boots with VMBus up: $boots, boots with HYP interrupts: $hyp, QEMU status $rc"
	grep -i 'assert\|abort' "$work/reboot.stderr" | sed 's/^/    /' || true
	check "$(ok_if [ "$rc" = 124 ])" "reboot: QEMU ran until stopped by timeout (status $rc, want 124)"
	check "$(ok_if [ "$boots" -ge 3 ])" "reboot: VMBus came up in $boots boots (want >= 3)"
	check "$(ok_if [ "$hyp" -ge 3 ])" "reboot: HYP interrupts counted in $hyp boots (want >= 3)"
}

case $what in
synic) test_synic ;;
linux) test_linux ;;
reboot) test_reboot ;;
all) test_synic; test_linux; test_reboot ;;
esac

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
