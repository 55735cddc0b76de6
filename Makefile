# The boot-time randomness bench.
#
#   make run     set up, build every kernel variant, boot the profile matrix, report
#   make test    set up, build, run the test suite
#
# Both start from a fresh Debian 12 machine: scripts/setup.sh installs packages and
# starts libvirt's daemons; builds go to build/ (gitignored), reports to results/.

PYTHON := /usr/bin/python3
VARIANTS := $(notdir $(patsubst %/series,%,$(wildcard kernel/patches/*/series)))
RUN_ARGS ?=
PYTEST_ARGS ?=

.PHONY: all setup build kernels fixtures qemu tools distro-kernel images run test cloud-test soak debug-test irqsoff-kernels irqsoff irqsoff-test overhead check-patches clean

all: build

setup:
	@scripts/setup.sh

kernels: setup
	@for v in $(VARIANTS); do kernel/build.sh $$v || exit 1; done

fixtures: setup
	@$(MAKE) -s -C fixtures $(if $(BUILD_DIR),OUT=$(abspath $(BUILD_DIR))/fixtures)

# QEMU 7.2 from Debian's source with qemu/patches: Hyper-V SynIC/VMBus under TCG.
qemu: setup
	@qemu/build.sh

# Host tools: the SP800-90B min-entropy assessor (tools/ea/README.md).
tools:
	@$(MAKE) -s -C tools/ea

build: kernels fixtures qemu tools

# Debian 12's cloud kernel package, downloaded (never installed) for the
# distro-kernel tests and `make cloud-test`.
DISTRO_DEB := build/distro/linux-image-cloud-amd64.deb
distro-kernel: setup
	@scripts/fetch-distro-kernel.sh

# The image tests' root (vm-definitions/images/debian-12-cloud.toml): a Debian 12
# userspace built once with mmdebstrap from Debian's registry, cached under
# build/images/roots (benchlib/images/images.py). `make test` builds it beside the kernels.
IMAGES ?= debian-12-cloud
images: setup
	@PYTHONPATH=$(CURDIR) $(PYTHON) -m benchlib.images.images $(IMAGES)

# The bench's commands run from the directory make was called from (with -C: the
# repository), benchlib on PYTHONPATH: a relative path in RUN_ARGS, SOAK_ARGS or
# PYTEST_ARGS is the caller's. Each command checks its arguments first
# (benchlib/commands/options.py), so that a bad one costs seconds, not a 35-minute build;
# then the build, then the boots.
BENCH := PYTHONPATH=$(CURDIR)$${PYTHONPATH:+:$$PYTHONPATH} $(PYTHON) -m

# These preview (the plan, the lists): they change nothing on the host, so they run
# without the set-up (apt, qemu.conf, libvirtd) and without root.
RUN_PREVIEWS := $(filter --dry-run --list-profiles --list-images --help -h,$(RUN_ARGS))
# These build nothing: the previews, and a run of the kernels as built.
RUN_BUILDS_NOTHING := $(strip $(RUN_PREVIEWS) $(filter --no-build,$(RUN_ARGS)))

run: $(if $(RUN_PREVIEWS),,setup)
	$(BENCH) benchlib.commands.run --check-only $(RUN_ARGS)
	$(if $(RUN_BUILDS_NOTHING),,@$(MAKE) --no-print-directory build)
	$(BENCH) benchlib.commands.run $(if $(RUN_PREVIEWS),,--no-build) $(RUN_ARGS)

# The ini file and rootdir are pinned: an option value such as "--kernel /boot/X"
# must not make pytest take /boot as its rootdir (and miss conftest.py); -p loads
# the options before pytest first reads the command line (bench_options.py).
PYTEST := $(PYTHON) -m pytest -c tox.ini --rootdir=. -p bench_options

# The time-to-ready budgets, judged by `make test` (test_budgets.py) as by `make run`
# and `make cloud-test`; a --budget in PYTEST_ARGS comes later and wins.
BUDGET := vm-definitions/budgets.toml

# The image's root downloads and unpacks packages while the kernels compile: -j2.
test: setup
	$(PYTEST) --budget $(BUDGET) --check-args $(PYTEST_ARGS)
	@$(MAKE) --no-print-directory -j2 build distro-kernel images
	$(PYTEST) --budget $(BUDGET) $(PYTEST_ARGS)

# The suite on Debian's cloud kernel, as shipped: its modules packed per profile,
# the tests of the bench's own kernels deselected, the default budgets judged,
# skips only where its config lacks an option.
cloud-test: build distro-kernel
	$(PYTEST) --kernel-deb $(DISTRO_DEB) \
		--budget $(BUDGET) $(PYTEST_ARGS)

# Flake rate: every TCG profile × stock and crng, 20 boots each (about 30 minutes).
SOAK_ARGS ?=
soak: setup
	$(BENCH) benchlib.commands.soak --check-only $(SOAK_ARGS)
	@$(MAKE) --no-print-directory build
	$(BENCH) benchlib.commands.soak $(SOAK_ARGS)

# Debug kernels (kernel/configs/flavours/debug.config: lockdep, KASAN, ...) of every
# variant but the test-only ones, and the test that boots them with CPU hotplug
# under parallel getrandom() readers. Not part of `make test`: each KASAN kernel is
# a full build (see README for the time).
DEBUG_VARIANTS := $(filter-out test-%,$(VARIANTS))
debug-test: build
	@for v in $(DEBUG_VARIANTS); do kernel/build.sh $$v+debug || exit 1; done
	$(PYTEST) --debug-kernels -k debug_kernel $(PYTEST_ARGS)

# Interrupts-off sections (kernel/configs/flavours/irqsoff.config: the irqsoff
# tracer) of stock, crng and lrng: `make irqsoff` is the benchmark (several boots
# of each, a report in results/irqsoff-*/, exit 1 on a variant over ten times
# stock's), `make irqsoff-test` the opt-in test (lrng against stock, and the 2016
# DRBG output path as its control). Not part of `make test`: the stock irqsoff
# kernel is a full build (the others build on its tree).
IRQSOFF_VARIANTS := stock crng lrng
IRQSOFF_ARGS ?=
irqsoff-kernels: build
	@for v in $(IRQSOFF_VARIANTS); do kernel/build.sh $$v+irqsoff || exit 1; done
irqsoff: irqsoff-kernels
	$(BENCH) benchlib.commands.irqsoff $(IRQSOFF_ARGS)
irqsoff-test: irqsoff-kernels
	$(PYTEST) --irqsoff-kernels -k irqsoff $(PYTEST_ARGS)

# The harness's per-boot cost against bare QEMU (benchlib/commands/overhead.py): pairs of
# boots, same kernel, initramfs and command line; figures in results/overhead-*/.
OVERHEAD_ARGS ?=
overhead: setup
	@$(MAKE) --no-print-directory kernels fixtures
	$(BENCH) benchlib.commands.overhead $(OVERHEAD_ARGS)
check-patches:
	@scripts/check-patches.sh

clean:
	rm -rf build/kernel build/fixtures
