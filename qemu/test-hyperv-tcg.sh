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
#   REBOOT_WINDOW  at most this many seconds of the reboot loop, default 180
#
# synic: a bare-metal multiboot guest, 32-bit and then long mode (tests/synic-test/,
#   built here with gcc -m32), with QEMU's hyperv-testdev, checks:
#   - the Hyper-V CPUID leaves, the invariant TSC it asks for (+invtsc), the
#     hypercall page, VP index and reference time;
#   - HvPostMessage delivery to a SINT; a message that found its slot busy is
#     delivered after the guest writes EOM; a masked SINT; AutoEOI;
#   - #GP on read-only MSRs and on an unmasked SINT below vector 16, #UD for
#     VMCALL with the hypercall page disabled, and for VMCALL at CPL 3;
#   - the TLFS's error paths: with hv-enforce-cpuid, #GP for an MSR of an
#     enlightenment not offered (hv-frequencies), a read of the write-only EOI
#     MSR is #GP; a locked hypercall MSR ignores writes; reserved bits, a rep
#     count, a rep start or a variable header size in a simple call's input
#     value is HV_STATUS_INVALID_HYPERCALL_INPUT and does nothing;
#     HvNotifyLongSpinWait succeeds (hv-spinlocks);
#   - VMCALL in a nested guest (TCG's SVM: VMRUN, #UD intercepted): a #UD
#     exit at the VMCALL, never a hypercall to this hypervisor;
#   - HvSignalEvent (event flag + SINT);
#   - synthetic timer 0 in message mode: periodic (payloads: timer index,
#     delivery not before expiration, expirations one period apart), one-shot,
#     and a one-shot reprogrammed while its expiry waits for EOM in a busy
#     slot (the new expiry comes, and only it);
#   - the reference TSC page (its time between two reads of the time
#     reference counter);
#   - reference time against an independent clock, the ACPI PM timer (its
#     rate within 2 %), before the save and again after the restore;
#   - synthetic timer 1 in direct mode (hv-stimer-direct: interrupts on its
#     vector, its period, no message);
#   - save and restore with both timers running: the guest says "save now",
#     this script migrates QEMU to a file over QMP (qmp-action.py) and restores it in
#     a second QEMU (-incoming), whose extra fw_cfg file tells the guest where
#     it runs. There the Hyper-V MSRs read as saved (the TSC frequency MSR
#     too, though the restoring QEMU measures its own rate), reference time never went
#     back, both timers fire, hypercalls and messages work and the TSC page
#     agrees with the reference counter; the rest of the test runs there;
#   - a second vCPU (INIT-SIPI-SIPI): VP index 1, its own timer delivering to
#     its own SynIC and not the BSP's, and HvPostMessage across vCPUs both ways;
#     INIT again keeps its SynIC and timers; then it is unplugged (ACPI CPU
#     hotplug registers, eject) with its timer running, and QEMU runs on;
#   - a vCPU hot-added into the spare slot (the guest says "hot-add now", this
#     script sends QMP device_add): it reads the partition's guest OS id, hypercall
#     and reference TSC MSRs as VP 0 does, its VMCALL is a hypercall (not
#     #UD) and its HvPostMessage reaches VP 0; then it is ejected too;
#   - last, long mode and the 64-bit hypercall ABI (control in RCX, input in
#     RDX): HvPostMessage, and HvSignalEvent as a fast call.
#   The guest reports on COM1 and exits through isa-debug-exit.
# linux: boots $KERNEL on q35 with 2 vCPUs, -cpu qemu64 with hv-* flags and
#   -device vmbus-bridge, a busybox initramfs (busybox-static) that prints
#   /proc/interrupts twice, 2 s apart, every CPU's clock event device, the
#   clocksource and dmesg, twice: with message-mode synthetic timers and with
#   direct-mode ones (hv-stimer-direct, hv-vapic). Checks for "Hypervisor
#   detected: Microsoft Hyper-V", "hv_vmbus: Vmbus version:", the tick row
#   growing on every CPU (HYP in message mode, where vmbus_isr runs on every
#   synthetic timer message; HVS in direct mode, where HYP does not grow),
#   "Hyper-V clockevent" on every CPU and hyperv_clocksource_tsc_page.
# reboot: the same guest and flags, but the initramfs reboots (reboot -f) as soon
#   as it has printed the HYP row; QEMU runs until 3 boots have printed it (at
#   most REBOOT_WINDOW seconds) and is then stopped. Checks that QEMU survived the
#   resets (SynIC reset after the devices, with VMBus and timer routes live) and
#   that at least 3 boots brought VMBus up and counted HYP interrupts.
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
# A QEMU whose main loop is stuck does not act on SIGTERM: SIGKILL this long after.
kill_after_s=10
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

# build_synic_test: $work/synic-test.elf from tests/synic-test/.
build_synic_test() {
	local src=$here/tests/synic-test
	local cflags=(-m32 -ffreestanding -fno-pic -fno-pie -fno-stack-protector -nostdlib -O2
		-Wall -Wextra -Wno-unused-parameter)

	step "building the bare-metal SynIC test guest"
	gcc "${cflags[@]}" -c "$src/boot.S" -o "$work/boot.o" \
		&& gcc "${cflags[@]}" -c "$src/synic-test.c" -o "$work/synic-test.o" \
		&& ld -m elf_i386 -T "$src/link.ld" -z noexecstack --no-warn-rwx-segments \
			-o "$work/synic-test.elf" "$work/boot.o" "$work/synic-test.o" \
		|| die "building $work/synic-test.elf failed (needs gcc with -m32 code generation and binutils)"
}

# run_saved_and_restored NAME QEMU-ARGS...: the guest runs until it says "save
# now"; this QEMU is then migrated to a file and a second one restores it
# (-incoming) with the fw_cfg file that tells the guest it runs there, and runs
# to the guest's exit; when the guest asks there ("hot-add now"), a vCPU is
# plugged in. Consoles: $work/NAME.console, $work/NAME-restored.console. Sets
# saved and added (yes/no) and rc (the last QEMU's exit status).
run_saved_and_restored() {
	local name=$1 pid
	shift
	local qmp=$work/$name.qmp state=$work/$name.vmstate log=$work/$name.console
	local restored_log=$work/$name-restored.console

	saved=no added=no rc=0
	step "running $name (console: $log, after the restore: $restored_log)"
	rm -f "$qmp" "$state" "$log" "$restored_log"
	timeout -k "$kill_after_s" "$timeout_s" "${qemu_base[@]}" "$@" \
		-qmp "unix:$qmp,server=on,wait=off" -serial "file:$log" 2>"$work/$name.stderr" &
	pid=$!
	if wait_for_line "$pid" 'SYNIC-TEST: save now' "$log"; then
		step "saving the running guest to $state"
		qmp "$qmp" save "$state" >&2 && saved=yes
	fi
	wait "$pid" || rc=$?
	if [ "$saved" = yes ]; then
		rc=0
		step "restoring it in a new QEMU"
		rm -f "$qmp"
		timeout -k "$kill_after_s" "$timeout_s" "${qemu_base[@]}" "$@" \
			-fw_cfg name=opt/synic-test/restored,string=1 -incoming "exec:cat $state" \
			-qmp "unix:$qmp,server=on,wait=off" -serial "file:$restored_log" \
			2>"$work/$name-restored.stderr" &
		pid=$!
		if wait_for_line "$pid" 'SYNIC-TEST: hot-add now' "$restored_log"; then
			step "hot-adding a vCPU"
			qmp "$qmp" hot-add >&2 && added=yes
		fi
		wait "$pid" || rc=$?
		sed -i 's/\r$//' "$restored_log"
	fi
	sed -i 's/\r$//' "$log"
	cat "$log" "$restored_log" 2>/dev/null | grep 'SYNIC-TEST: \(ok\|FAIL\)' | sed 's/^/    /' || true
}

test_synic() {
	local saved added rc
	build_synic_test
	# A spare vCPU slot (maxcpus=3) for the hot-add: QEMU 7.2's MTTCG never gives
	# an unplugged vCPU's TCG context back, and a vCPU added in its slot aborts.
	run_saved_and_restored synic-test -no-reboot -M pc -smp 2,maxcpus=3 -m 64 \
		-cpu qemu64,hv-vpindex,hv-synic,hv-time,hv-stimer,hv-stimer-direct,hv-runtime,hv-frequencies,hv-vapic,hv-spinlocks=0x1fff,hv-enforce-cpuid,+invtsc \
		-device hyperv-testdev -device isa-debug-exit,iobase=0xf4,iosize=4 \
		-kernel "$work/synic-test.elf"
	check "$(ok_if [ "$saved" = yes ])" "synic: the guest was saved while it ran (QMP migrate to a file)"
	check "$(ok_if [ "$added" = yes ])" "synic: a vCPU was hot-added while it ran (QMP device_add)"
	# isa-debug-exit: guest code 0 -> status 1
	check "$(ok_if [ "$rc" = 1 ])" "synic: guest exited with its pass code (QEMU status $rc, want 1)"
	check "$(ok_if grep -qs 'SYNIC-TEST: PASS' "$work/synic-test-restored.console")" \
		"synic: all guest checks passed, the last ones in the restored QEMU"
}

# test_synic_only: the SynIC without the timers (hv-synic alone, so no
# cpu/hyperv_tcg migration subsection): a SINT with AutoEOI across save and
# restore (the guest's synic_only_test()); without hv-enforce-cpuid, MSRs of
# enlightenments not offered are no fault, as under KVM.
test_synic_only() {
	local saved added rc
	build_synic_test
	run_saved_and_restored synic-only -no-reboot -M pc -smp 1 -m 64 \
		-cpu qemu64,hv-vpindex,hv-synic -fw_cfg name=opt/synic-test/synic-only,string=1 \
		-device hyperv-testdev -device isa-debug-exit,iobase=0xf4,iosize=4 \
		-kernel "$work/synic-test.elf"
	check "$(ok_if [ "$saved" = yes ])" "synic-only: the guest was saved while it ran"
	check "$(ok_if [ "$rc" = 1 ])" "synic-only: guest exited with its pass code (QEMU status $rc, want 1)"
	check "$(ok_if grep -qs 'SYNIC-TEST: PASS' "$work/synic-only-restored.console")" \
		"synic-only: all guest checks passed, the last ones in the restored QEMU"
}

# wait_for_line PID LINE LOG: wait while the QEMU of PID runs until LOG has LINE;
# false if that QEMU ended first.
wait_for_line() {
	while kill -0 "$1" 2>/dev/null && ! grep -qs "$2" "$3"; do
		sleep 0.2
	done
	kill -0 "$1" 2>/dev/null
}

# qmp SOCKET save FILE | qmp SOCKET hot-add: qemu/qmp-action.py, through QEMU's
# own QMP library from the source tree qemu/build.sh unpacked.
qmp() {
	BUILD_DIR=$build_dir /usr/bin/python3 "$here/qmp-action.py" "$@"
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

row_per_cpu() {  # row_per_cpu CONSOLE MARKER ROW: the row's counts, one per CPU, space-separated
	awk -v m="$2" -v r="^ *$3:" '$0 ~ m {on=1; next} on && $0 ~ r {s=""; for (i=2; i<=NF && $i ~ /^[0-9]+$/; i++) s=s (s ? " " : "") $i; print s; exit}' "$1"
}

grew_on_every_cpu() {  # grew_on_every_cpu "BEFORE..." "AFTER...": every CPU's count grew
	local -a b=($1) a=($2)
	local i
	[ ${#a[@]} -ge 2 ] && [ ${#a[@]} = ${#b[@]} ] || return 1
	for i in "${!a[@]}"; do [ "${a[$i]}" -gt "${b[$i]}" ] || return 1; done
}

# test_linux [message|direct]: message mode ticks through vmbus_isr (HYP), direct
# mode (hv-stimer-direct, with hv-vapic) on their own vector (HVS); both with the
# reference TSC page (hv-time) as the clocksource.
test_linux() {
	local mode=${1:-message}
	local initrd=$work/initramfs.gz log=$work/linux-$mode.console rc=0
	local h1 h2 row cpu=$linux_cpu

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
	for c in /sys/devices/system/clockevents/clockevent[0-9]*; do
		echo "${c##*/} $(cat "$c/current_device")"
	done
	echo "PROBE: clocksource"
	cat /sys/devices/system/clocksource/clocksource0/current_clocksource
	echo "PROBE: dmesg"
	dmesg | grep -i -E 'hv|hyper-?v|vmbus'
	echo "PROBE: done"
	poweroff -f
	EOF

	row=HYP
	if [ "$mode" = direct ]; then
		cpu=$cpu,hv-stimer-direct,hv-vapic
		row=HVS
	fi
	step "booting $kernel, $mode-mode timers (console: $log)"
	timeout -k "$kill_after_s" "$timeout_s" "${qemu_base[@]}" -no-reboot -M q35 -smp 2 -m 512 \
		-cpu "$cpu" -device vmbus-bridge -serial "file:$log" \
		-kernel "$kernel" -initrd "$initrd" -append 'console=ttyS0 panic=-1' \
		2>"$work/linux-$mode.stderr" || rc=$?
	sed -i 's/\r$//' "$log"
	grep -E 'Hypervisor detected|hv_vmbus: Vmbus version|^HYP:|^HVS:|^ *LOC:|PROBE: (interrupts|clockevent)|clockevent$' "$log" \
		| sed 's/^/    /' || true

	check "$(ok_if [ "$rc" = 0 ])" "linux/$mode: QEMU exited normally after poweroff (status $rc)"
	check "$(ok_if grep -q 'PROBE: done' "$log")" "linux/$mode: the initramfs probe ran to the end"
	check "$(ok_if grep -q 'Hypervisor detected: Microsoft Hyper-V' "$log")" \
		"linux/$mode: 'Hypervisor detected: Microsoft Hyper-V'"
	check "$(ok_if grep -q 'hv_vmbus: Vmbus version:' "$log")" "linux/$mode: 'hv_vmbus: Vmbus version:'"
	h1=$(row_per_cpu "$log" 'PROBE: interrupts-1' $row)
	h2=$(row_per_cpu "$log" 'PROBE: interrupts-2' $row)
	check "$(ok_if grew_on_every_cpu "$h1" "$h2")" \
		"linux/$mode: $row interrupts grow over 2 s on every CPU (${h1:-none} -> ${h2:-none})"
	check "$(ok_if [ "$(grep -c '^clockevent[0-9]* Hyper-V clockevent$' "$log")" -ge 2 ])" \
		"linux/$mode: every CPU's clock events come from the synthetic timer ('Hyper-V clockevent')"
	check "$(ok_if grep -qx 'hyperv_clocksource_tsc_page' "$log")" \
		"linux/$mode: the clocksource is the reference TSC page"
	if [ "$mode" = direct ]; then
		h1=$(row_per_cpu "$log" 'PROBE: interrupts-1' HYP)
		h2=$(row_per_cpu "$log" 'PROBE: interrupts-2' HYP)
		check "$(ok_if [ "$h1" = "$h2" ])" \
			"linux/$mode: no ticks through vmbus_isr: HYP unchanged (${h1:-none} -> ${h2:-none})"
	fi
}

test_reboot() {
	local log=$work/reboot.console window=${REBOOT_WINDOW:-180} rc=0 boots hyp pid

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

	step "booting $kernel in a reboot loop until 3 boots printed HYP, at most $window s (console: $log)"
	: >"$log"
	timeout -k "$kill_after_s" "$window" "${qemu_base[@]}" -M q35 -smp 2 -m 512 \
		-cpu "$linux_cpu" -device vmbus-bridge -serial "file:$log" \
		-kernel "$kernel" -initrd "$work/initramfs-reboot.gz" -append 'console=ttyS0 panic=-1' \
		2>"$work/reboot.stderr" &
	pid=$!
	# Count boots, not seconds: on a loaded host a boot under TCG takes longer.
	while kill -0 "$pid" 2>/dev/null && [ "$(grep -c '^HYP:' "$log" || true)" -lt 3 ]; do
		sleep 1
	done
	# Still running after its resets: stop it as the window would (status 124).
	if kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid"
		wait "$pid" || true
		rc=124
	else
		wait "$pid" || rc=$?
	fi
	sed -i 's/\r$//' "$log"
	boots=$(grep -c 'hv_vmbus: Vmbus version:' "$log" || true)
	hyp=$(awk '/^PROBE: boot/ {on=1; next} on && /^HYP:/ {s=0; for (i=2; i<=NF; i++) if ($i ~ /^[0-9]+$/) s+=$i; if (s > 0) n++; on=0} END {print n+0}' "$log")
	echo "    boots with VMBus up: $boots, boots with HYP interrupts: $hyp, QEMU status $rc"
	grep -i 'assert\|abort' "$work/reboot.stderr" | sed 's/^/    /' || true
	check "$(ok_if [ "$rc" = 124 ])" "reboot: QEMU ran until stopped (status $rc, want 124)"
	check "$(ok_if [ "$boots" -ge 3 ])" "reboot: VMBus came up in $boots boots (want >= 3)"
	check "$(ok_if [ "$hyp" -ge 3 ])" "reboot: HYP interrupts counted in $hyp boots (want >= 3)"
}

case $what in
synic|all) qmp --check-library || exit 2 ;;
esac
case $what in
synic) test_synic; test_synic_only ;;
linux) test_linux message; test_linux direct ;;
reboot) test_reboot ;;
all) test_synic; test_synic_only; test_linux message; test_linux direct; test_reboot ;;
esac

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
