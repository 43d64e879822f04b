# The two commands a user runs on a fresh Debian machine (as root, or with sudo available):
#   make demo   install what the build needs, build the sluice CLI (Release), run the main job
#   make test   the same set-up, then every test (also the sanitizer and clang builds in CI)
# Other targets: build, sanitize, check-clang, format, tidy, install, uninstall, bench, clean.
# Warnings are errors here (the presets set SLUICE_WERROR); a plain CMake build only warns.

SHELL := /bin/bash
BUILD ?= build
JOBS ?= $(shell nproc)
PREFIX ?= /usr/local

# Debian packages: what configuring the release build and building the CLI need (make demo), and
# what the tests, the other compilers' builds, the Python package and the benchmarks add.
DEB_CORE := build-essential cmake pkg-config g++ \
  liburing-dev libfmt-dev libcli11-dev nlohmann-json3-dev libhwloc-dev libxxhash-dev \
  libgtest-dev libgmock-dev libbenchmark-dev e2fsprogs util-linux python3 openmpi-bin libopenmpi-dev \
  libcurl4-openssl-dev
DEB_MORE := clang clang-format clang-tidy libclang-rt-14-dev fio chromium python3-numpy \
  python3-dev pybind11-dev libdlpack-dev python3-pytest python3-torch python3-venv python3-pip \
  python3-setuptools nginx-light python3-boto3 awscli rclone python3-awscrt
DEB_PACKAGES := $(DEB_CORE) $(DEB_MORE)

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# npm fetches the charting library of `sluice report` at build time: Debian's npm package, unless
# an npm is already there (nodesource's nodejs ships its own and conflicts with Debian's).
NPM_PACKAGE := $(shell command -v npm >/dev/null 2>&1 || echo npm)

.PHONY: all deps deps-core configure build demo test test-release sanitize sanitize-asan sanitize-tsan check-clang fuzz format tidy install uninstall bench clean

all: build

# Installs only what is missing of the packages given, so a second run costs one dpkg query.
define install_missing
	@missing=""; for p in $(1); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing >/dev/null; \
	fi
endef

deps:
	$(call install_missing,$(DEB_PACKAGES) $(NPM_PACKAGE))

# make demo's share: no compilers besides g++, no Python package, browser or fio (the release
# tree's configure leaves the Python package out without them, and a later make build, which
# installs them, configures it in).
deps-core:
	$(call install_missing,$(DEB_CORE) $(NPM_PACKAGE))

configure: deps
	cmake --preset release -B $(BUILD)/release >/dev/null

build: configure
	cmake --build $(BUILD)/release -j $(JOBS)

# Only what tools/demo.sh runs (the CLI), not the test programs: a few minutes on a fresh machine.
demo: deps-core
	cmake --preset release -B $(BUILD)/release >/dev/null
	cmake --build $(BUILD)/release -j $(JOBS) --target sluice_cli
	@bash tools/demo.sh $(BUILD)/release/bin/sluice

# Ends with the list of what the three test runs skipped, and why (tests/list-skips.sh); a failed
# run prints its own list before make stops. SLUICE_TEST_STRICT=1 (.ci/run sets it) turns a skip
# for want of something make deps installs, or of a failed set-up step, into a failure.
test: deps test-release sanitize fuzz check-clang
	@bash tests/list-skips.sh $(BUILD)/release $(BUILD)/asan $(BUILD)/tsan

test-release: build
	ctest --test-dir $(BUILD)/release --output-on-failure -j $(JOBS) --timeout 600 || \
	  { bash tests/list-skips.sh $(BUILD)/release; exit 1; }

sanitize: sanitize-asan sanitize-tsan

# intercept_tls_get_addr=0: GCC 12's LeakSanitizer guesses where a thread's dynamic TLS block
# starts from its address alone, and one that lands 16 bytes past a page boundary (ASan's heap
# places them anywhere) makes it scan a garbage range at exit and crash ("Tracer caught signal
# 11"), failing a test that passed. The blocks stay reachable from each thread's static TLS, which
# LeakSanitizer scans, so no leak goes unseen. docs/build.md says more.
sanitize-asan: deps
	cmake --preset asan -B $(BUILD)/asan >/dev/null
	cmake --build $(BUILD)/asan -j $(JOBS)
	ASAN_OPTIONS="intercept_tls_get_addr=0 $${ASAN_OPTIONS:-}" ctest --test-dir $(BUILD)/asan --output-on-failure -j $(JOBS) --timeout 600 -LE "slow|install"

sanitize-tsan: deps
	cmake --preset tsan -B $(BUILD)/tsan >/dev/null
	cmake --build $(BUILD)/tsan -j $(JOBS) --target concurrency_programs
	TSAN_OPTIONS="suppressions=$(CURDIR)/tests/tsan.supp $${TSAN_OPTIONS:-}" ctest --test-dir $(BUILD)/tsan --output-on-failure -j $(JOBS) --timeout 600 -L concurrency

# Another compiler's warnings: clang builds libsluice, libsluice_cufile and the CLI (no tests) with
# -Werror, so a change that only GCC accepts fails here rather than on a user's machine. At -O0
# (the preset): clang's warnings all come from its front end, so optimising finds none more; the
# step took 4.5 minutes at -O2, 2.5-3.2 at -O0 (docs/build.md).
check-clang: deps
	cmake --preset clang -B $(BUILD)/clang >/dev/null
	cmake --build $(BUILD)/clang -j $(JOBS)

# libFuzzer targets for the safetensors, .npy, Megatron .idx and tar parsers, FUZZ_SECONDS each
# (tests/fuzz/run.sh).
FUZZ_SECONDS ?= 30
fuzz: deps
	bash tests/fuzz/run.sh $(BUILD)/fuzz $(FUZZ_SECONDS)

format:
	git ls-files '*.cpp' '*.hpp' '*.h' '*.c' | xargs clang-format -i

tidy: build
	git ls-files 'src/*.cpp' 'tools/*.cpp' | xargs clang-tidy -p $(BUILD)/release --quiet

# What cmake/SluiceInstall.cmake and capi/ install; the installed sluice finds its libraries
# through an $ORIGIN-relative RUNPATH, and ldconfig runs after a root install into a folder the
# loader searches (docs/build.md). uninstall removes what the last install into PREFIX put down.
# The Python package goes to PREFIX/lib/python3.X/dist-packages (docs/python.md).
install: configure
	cmake --build $(BUILD)/release -j $(JOBS) --target sluice_installables
	cmake --install $(BUILD)/release --prefix $(PREFIX)

uninstall:
	cmake -DPREFIX=$(PREFIX) -P cmake/SluiceUninstall.cmake

bench: build
	bash bench/host-vs-fio.sh

clean:
	rm -rf $(BUILD)
