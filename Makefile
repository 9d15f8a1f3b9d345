# spool -- top-level driver.
#
#   make run    install deps, build (release), start spoold on http://127.0.0.1:8080/ $(ARGS)
#   make demo   install deps, build (release), run build/release/examples/spool-demo $(ARGS)
#   make test   install deps, make lint, then build + ctest in build/release,
#               build/tsan (ThreadSanitizer), build/asan (ASan+UBSan), all three -Werror, and
#               finally the install/consumer test (tests/install/run.sh)
#   make lint   clang-format --dry-run over every C/C++ file, clang-tidy (.clang-tidy) over the
#               library, server and queue sources; fails on any deviation or finding
#   make cluster                  a fleet in the background: HAProxy on http://127.0.0.1:8080/,
#                                 NODES spoold nodes, Redis primary + 2 replicas, 3 Sentinels;
#                                 NETNS=1: each part in a network namespace of its own (root)
#   make cluster-status / cluster-rolling-restart / cluster-down   (cluster/README.md)
#
# Other targets: deps build test-release tsan asan install-test format clean help
# Knobs: ARGS="..." (for run), NODES=3 NETNS=1 (for cluster), CTEST_JOBS=2, TSAN_JOBS=2, ASAN_JOBS=2,
#        LINT_JOBS=<cores>, WERROR=ON, CTEST_ARGS="-R pattern", SPOOL_SKIP_DEPS=1, BUILD_ROOT=build

SHELL       := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
# Stages must run one after another (in prerequisite order), even under make -j.
.NOTPARALLEL:
.DEFAULT_GOAL := build

CMAKE      ?= cmake
CTEST      ?= ctest
GENERATOR  ?= Ninja
WERROR     ?= ON
CTEST_JOBS ?= 2
TSAN_JOBS  ?= 2
ASAN_JOBS  ?= 2
LINT_JOBS  ?= $(shell nproc 2>/dev/null || echo 2)
CTEST_ARGS ?=
ARGS       ?=
NODES      ?= 3
NETNS      ?=
PYTHON3    ?= python3
FLEET      := $(PYTHON3) cluster/fleet.py

BUILD_ROOT  ?= build
RELEASE_DIR ?= $(BUILD_ROOT)/release
TSAN_DIR    ?= $(BUILD_ROOT)/tsan
ASAN_DIR    ?= $(BUILD_ROOT)/asan
INSTALL_DIR ?= $(BUILD_ROOT)/install-test

RELEASE_FLAGS := -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSPOOL_SANITIZE= -DSPOOL_WERROR=$(WERROR)
TSAN_FLAGS    := -DCMAKE_BUILD_TYPE=Debug -DSPOOL_SANITIZE=thread -DSPOOL_WERROR=$(WERROR)
ASAN_FLAGS    := -DCMAKE_BUILD_TYPE=Debug -DSPOOL_SANITIZE=address -DSPOOL_WERROR=$(WERROR)

CTEST_COMMON := --output-on-failure --no-tests=error $(CTEST_ARGS)

# $(call banner,text)
banner = @printf '\n%s\n==> %s\n%s\n' \
  "================================================================================" \
  "$(1)" \
  "================================================================================"

# $(call configure,dir,flags)
configure = $(CMAKE) -S . -B $(1) -G "$(GENERATOR)" $(2)

.PHONY: help deps run demo build test test-release tsan asan install-test lint format clean \
        cluster cluster-down cluster-status cluster-rolling-restart

help:
	@echo "spool make targets:"
	@echo "  make run [ARGS=...]  install deps, build release, start spoold (port 8080, demo site)"
	@echo "  make demo [ARGS=...] install deps, build release, run examples/spool-demo"
	@echo "  make test            install deps; lint; release + tsan + asan ctest; install test"
	@echo "  make lint            clang-format check (all C/C++), clang-tidy (src server queue)"
	@echo "  make deps            install missing Debian packages (scripts/install-deps.sh)"
	@echo "  make build           configure + build $(RELEASE_DIR)"
	@echo "  make test-release    build + ctest in $(RELEASE_DIR)"
	@echo "  make tsan            build + ctest in $(TSAN_DIR) (ThreadSanitizer)"
	@echo "  make asan            build + ctest in $(ASAN_DIR) (AddressSanitizer + UBSan)"
	@echo "  make install-test    tests/install/run.sh (cmake --install + consumers)"
	@echo "  make cluster [NODES=3] [NETNS=1]  HAProxy on :8080 + spoold nodes + Redis/Sentinel"
	@echo "  make cluster-status     what the fleet runs; cluster-rolling-restart; cluster-down"
	@echo "  make format          clang-format every C/C++ file of the tree (if installed)"
	@echo "  make clean           remove $(BUILD_ROOT)/"

deps:
	$(call banner,Dependencies (scripts/install-deps.sh))
	@scripts/install-deps.sh

# ----------------------------------------------------------------------------
run: deps
	$(call banner,Build: release ($(RELEASE_DIR)) -- spoold)
	$(call configure,$(RELEASE_DIR),$(RELEASE_FLAGS))
	$(CMAKE) --build $(RELEASE_DIR) --target spoold
	$(call banner,Run: $(RELEASE_DIR)/server/spoold $(ARGS)  (Ctrl-C stops it))
	$(RELEASE_DIR)/server/spoold $(ARGS)

demo: deps
	$(call banner,Build: release ($(RELEASE_DIR)) -- spool-demo)
	$(call configure,$(RELEASE_DIR),$(RELEASE_FLAGS))
	$(CMAKE) --build $(RELEASE_DIR) --target spool-demo
	$(call banner,Run: $(RELEASE_DIR)/examples/spool-demo $(ARGS))
	$(RELEASE_DIR)/examples/spool-demo $(ARGS)

build: deps
	$(call banner,Build: release ($(RELEASE_DIR)))
	$(call configure,$(RELEASE_DIR),$(RELEASE_FLAGS))
	$(CMAKE) --build $(RELEASE_DIR)

# ----------------------------------------------------------------------------
# A fleet on loopback addresses (cluster/fleet.py, cluster/README.md). Everything runs in the
# background after `make cluster` returns; its state, logs and pid files are in cluster/run/.
cluster: deps
	$(call banner,Build: release ($(RELEASE_DIR)) -- spoold)
	$(call configure,$(RELEASE_DIR),$(RELEASE_FLAGS))
	$(CMAKE) --build $(RELEASE_DIR) --target spoold
	$(call banner,Fleet: $(NODES) spoold nodes behind HAProxy on Redis with Sentinel)
	$(FLEET) up --nodes $(NODES) $(if $(NETNS),--netns) --spoold $(RELEASE_DIR)/server/spoold

cluster-down:
	$(FLEET) down

cluster-status:
	$(FLEET) status

cluster-rolling-restart:
	$(FLEET) rolling-restart

# ----------------------------------------------------------------------------
test: deps lint test-release tsan asan install-test
	$(call banner,ALL TESTS PASSED (lint, release, tsan, asan, install))

test-release: build
	$(call banner,Test: release ($(RELEASE_DIR)))
	$(CTEST) --test-dir $(RELEASE_DIR) $(CTEST_COMMON) -j $(CTEST_JOBS)

tsan: deps
	$(call banner,Build: ThreadSanitizer ($(TSAN_DIR)))
	$(call configure,$(TSAN_DIR),$(TSAN_FLAGS))
	$(CMAKE) --build $(TSAN_DIR)
	$(call banner,Test: ThreadSanitizer ($(TSAN_DIR)))
	scripts/sanitizer-env.sh thread $(CTEST) --test-dir $(TSAN_DIR) $(CTEST_COMMON) -j $(TSAN_JOBS)

asan: deps
	$(call banner,Build: AddressSanitizer + UBSan ($(ASAN_DIR)))
	$(call configure,$(ASAN_DIR),$(ASAN_FLAGS))
	$(CMAKE) --build $(ASAN_DIR)
	$(call banner,Test: AddressSanitizer + UBSan ($(ASAN_DIR)))
	scripts/sanitizer-env.sh address $(CTEST) --test-dir $(ASAN_DIR) $(CTEST_COMMON) -j $(ASAN_JOBS)

install-test: deps
	$(call banner,Test: install + CMake/pkg-config consumers (tests/install/run.sh))
	SPOOL_INSTALL_BUILD_DIR="$(INSTALL_DIR)" tests/install/run.sh

# ----------------------------------------------------------------------------
# Every C/C++ file of the tree: the library, its tests and examples, the server, the queue, the
# benchmarks. Build trees, the fleet's run folder and git's own are left out.
SOURCE_FILES = $(shell find . \( -path ./.git -o -path './$(BUILD_ROOT)' -o -path ./build \
  -o -path './build-*' -o -path ./out -o -path ./cluster/run -o -name .cache \) -prune -o \
  -type f \( -name '*.h' -o -name '*.hpp' -o -name '*.c' -o -name '*.cpp' \) -print \
  | sed 's|^\./||' | LC_ALL=C sort)

# The translation units clang-tidy checks: those of the library, the server and the queue in
# $(RELEASE_DIR)'s compile_commands.json (their headers too, by .clang-tidy's HeaderFilterRegex).
TIDY_DIRS := src server queue
tidy_units = grep -o '"file": *"[^"]*"' $(RELEASE_DIR)/compile_commands.json \
  | sed 's/^"file": *"//; s/"$$//' \
  | grep -E '^$(CURDIR)/($(subst $(eval) ,|,$(TIDY_DIRS)))/' | LC_ALL=C sort -u

lint: deps
	$(call banner,Lint: clang-format over every C/C++ file ($(words $(SOURCE_FILES)) files))
	@echo "clang-format --dry-run -Werror <$(words $(SOURCE_FILES)) files>"
	@clang-format --dry-run -Werror $(SOURCE_FILES)
	$(call banner,Lint: clang-tidy over $(TIDY_DIRS) ($(RELEASE_DIR)/compile_commands.json))
	$(call configure,$(RELEASE_DIR),$(RELEASE_FLAGS)) >/dev/null
	units="$$($(tidy_units))"; test -n "$$units"; \
	  echo "clang-tidy: $$(wc -l <<<"$$units") translation units, $(LINT_JOBS) at a time"; \
	  xargs -P $(LINT_JOBS) -n 1 clang-tidy -p $(RELEASE_DIR) --quiet <<<"$$units" 2>&1 \
	  | { grep -Ev '^[0-9]+ warnings? generated\.$$' || true; }

format:
	@if command -v clang-format >/dev/null 2>&1; then \
	  echo "clang-format -i <$(words $(SOURCE_FILES)) files>"; \
	  clang-format -i $(SOURCE_FILES); \
	else \
	  echo "format: clang-format is not installed; skipping (apt-get install clang-format)"; \
	fi

clean:
	@case "$(BUILD_ROOT)" in ""|/|.|..) echo "clean: refusing BUILD_ROOT='$(BUILD_ROOT)'"; exit 1;; esac
	rm -rf "$(BUILD_ROOT)"
