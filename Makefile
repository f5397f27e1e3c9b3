# pbd - build, test, demo, bench.
#   make test            build and run the tests (installs SIMDe/stb when missing and possible);
#                        T=<x> runs the tests whose name contains x and every test of the
#                        suites whose name contains x (T=tethers, T=suite_tethers and
#                        T=test_tethers run tests/test_tethers.c); the runner ends with
#                        "N passed, N failed, N skipped" (skipped: a parity test with
#                        nothing to compare in this build, e.g. SIMD == scalar at SIMD=0);
#                        T=a,b runs what a or b selects
#   make check-fast-math the implementations at -Ofast (-ffast-math, whose link flushes
#                        subnormals to zero in the whole program): every bad input still
#                        refused and every failed step still rolled back (T=$(FAST_MATH_T))
#   make determinism-hash  print the hashes of tests/test_determinism.c's scenes in
#                        this configuration, as rows to paste over its `expected`
#                        constants after an intended change of physics (every
#                        configuration of .ci/run must then give the same rows, but
#                        for the SIMD width: run it with SIMD=0 too, see `expected`)
#   make demo            run the showcase headless: PNG frames and out/showcase.png
#   make play            the interactive viewer (examples/viewer.c; installs GLFW/libepoxy
#                        when missing and possible); make check-viewer: it scripted under
#                        Xvfb, every scene dragged and screenshot into out/viewer/
#   make web             the viewer for the browser (emscripten, WebGL 2, WASM SIMD) into
#                        out/web/; make serve serves it on http://localhost:8000; make
#                        check-web: the page in headless Chromium (out/web/*.png); make
#                        bench-web: WASM SIMD against scalar there, JSON lines (bench/web.sh)
#   make bench           run the benchmarks, JSON lines also in out/bench.jsonl
#   make fuzz            run the libFuzzer harnesses of tests/fuzz/ (clang; one per core; FUZZ_TIME s each,
#                        default 600); make fuzz-ci: 20 s each (.ci/run: 10); make fuzz-replay:
#                        replay their corpora without libFuzzer
#   make soak            every example for SOAK_STEPS (10 000) steps with random grabs and
#                        collider moves, under ASan/UBSan (tests/soak/soak.c; minutes)
# Configuration (each combination builds into its own folder under build/):
#   CC=clang             another C compiler
#   CXX_MODE=1           compile the tests as C++ (with $(CXX))
#   SIMD=0               -DPBD_NO_SIMD (scalar reference path)
#   OMP=0                no OpenMP
#   SAN=1                -fsanitize=address,undefined (the long physics scenes skip:
#                        tests/test.h, LONG_SCENE)
#   CUDA_EMU=0           make test without pbd_cuda_tests (the emulated GPU companion)
#   OPT=-O1, BENCH_OPT=-O0  optimisation of tests and examples / of benches
#                        (CI builds the examples and benches at -O0: a compile check)
#   DEBUG=-g1            debug information (default -g; CI: -g1, line tables only,
#                        enough for the sanitizers' reports and 40% cheaper to build)
CC ?= cc
CXX ?= g++
SIMD ?= 1
OMP ?= 1
SAN ?= 0
CXX_MODE ?= 0
OPT ?= -O2
DEBUG ?= -g

BENCH_OPT ?= -O3

CONFIG := $(notdir $(CC))-simd$(SIMD)-omp$(OMP)-san$(SAN)-cxx$(CXX_MODE)$(OPT)$(filter-out -O3,$(BENCH_OPT))
BUILD := build/$(CONFIG)

WARN := -Wall -Wextra -Wno-psabi
BASEFLAGS := $(OPT) $(DEBUG) -ffp-contract=off -fno-math-errno $(WARN) -I.
ifeq ($(SIMD),0)
BASEFLAGS += -DPBD_NO_SIMD
else
BASEFLAGS += -march=native
endif
ifeq ($(OMP),1)
BASEFLAGS += -fopenmp
endif
# -Ofast (make check-fast-math): the headers' warning is expected there, and
# the suites skip what -ffast-math changes by design (PBDT_FAST_MATH)
ifeq ($(OPT),-Ofast)
BASEFLAGS += -DPBD_ALLOW_FAST_MATH -DPBDT_FAST_MATH
endif
ifeq ($(SAN),1)
BASEFLAGS += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
endif
ifeq ($(CXX_MODE),1)
COMPILE := $(CXX) -x c++ -std=c++11 $(BASEFLAGS)
LINK := $(CXX) $(BASEFLAGS)
else
COMPILE := $(CC) -std=c99 $(BASEFLAGS)
LINK := $(CC) $(BASEFLAGS)
endif
LIBS := -lm

HEADERS := $(wildcard *.h)
# the three implementations first, so that a parallel build starts the
# longest compiles first
TEST_BIG := tests/main.c tests/impl_sm.c tests/impl_upsample.c
TEST_SRCS := $(TEST_BIG) $(filter-out $(TEST_BIG),$(wildcard tests/*.c))
TEST_OBJS := $(patsubst tests/%.c,$(BUILD)/tests/%.o,$(TEST_SRCS))
# the headless examples (the viewer needs a window: its own rules below)
EXAMPLES := $(filter-out viewer,$(basename $(notdir $(wildcard examples/*.c))))
BENCHES := $(basename $(notdir $(wildcard bench/*.c)))

.PHONY: all test check-fast-math test-gpu gpu-check demo bench deps clean examples benches check-headers check-messages check-readme check-cuda-readme check-repro check-repro-gpu cuda determinism-hash format check-format play check-viewer web serve check-web bench-web

all: $(BUILD)/pbd_tests examples benches

# Debian packages the examples and the SIMD path use. Installed when missing
# and when we can (root with apt-get); everything still builds without them.
deps:
	@if [ ! -f /usr/include/simde/x86/sse2.h ] || [ ! -f /usr/include/stb/stb_image_write.h ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing libsimde-dev libstb-dev"; \
	    (apt-get install -y -qq libsimde-dev libstb-dev >/dev/null 2>&1 || \
	     (apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq libsimde-dev libstb-dev >/dev/null 2>&1)) || \
	    echo "could not install libsimde-dev/libstb-dev: building the scalar path and PPM output"; \
	  else echo "libsimde-dev/libstb-dev missing: building the scalar path and PPM output"; fi; \
	fi

# OMP_WAIT_POLICY=passive: the tests force 2 threads (to compare their bits
# with 1 thread), and forced counts are obeyed whatever the load; on a loaded
# 2-core machine spinning barriers made those tests 20x slower (the default
# thread policy of a world copes without it: pbd.h, THREADS ON A BUSY MACHINE).
# CUDA_EMU=0: without the emulated GPU companion's tests (CI runs them in
# some of its configurations only, to stay within its time)
CUDA_EMU ?= 1
TEST_BINS := $(BUILD)/pbd_tests $(if $(filter 1,$(CUDA_EMU)),$(BUILD)/pbd_cuda_tests)
test: deps
	@$(MAKE) --no-print-directory $(TEST_BINS)
	OMP_WAIT_POLICY=$${OMP_WAIT_POLICY:-passive} sh tests/run.sh "$(T)" $(addprefix ./,$(TEST_BINS))

# What a user's -ffast-math build keeps (pbd.h, "-ffast-math"): the checks
# of bad input, the rollback of failed steps and memory safety; not the
# bits, which the other suites compare.
FAST_MATH_T := errors,robust,handles,fuzz,bad_input
check-fast-math: deps
	@$(MAKE) --no-print-directory test OPT=-Ofast CUDA_EMU=0 T=$(FAST_MATH_T)

# ---- the GPU companion, built by nvcc (pbd_cuda.cu) --------------------------
#   make cuda       pbd_cuda.cu compiles warning-free, and the examples link
#                   against it (PBD_CUDA) into build/cuda/examples/
#   make test-gpu   tests/test_cuda.c against the real pbd_cuda.cu: on a GPU
#                   every GPU world must give the CPU world's bits, then
#                   compute-sanitizer's memcheck and racecheck run the suite;
#                   without a device it checks the fallback (auto -> CPU, GPU
#                   only -> a clear error)
#   make gpu-check  all of that in two minutes on a GPU machine, with the
#                   GPU benches (what a session that is lent a GPU runs)
#   CUDA_ARCH=-arch=native  for the machine's own GPU (default: nvcc's)
NVCC ?= nvcc
CUDA_ARCH ?=
NVCCFLAGS := -O3 --fmad=false -std=c++14 -Werror all-warnings -Xcompiler -Wall,-Wextra $(CUDA_ARCH)
CUDA_BUILD := build/cuda
CUDA_CFLAGS := -std=c99 $(OPT) $(DEBUG) -ffp-contract=off -fno-math-errno $(WARN) -I. -DPBD_CUDA -fopenmp
CUDA_LINK := $(NVCC) $(CUDA_ARCH) -Xcompiler -fopenmp

$(CUDA_BUILD)/pbd_cuda.o: pbd_cuda.cu $(HEADERS)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -c $< -o $@

$(CUDA_BUILD)/examples/%.o: examples/%.c $(HEADERS) $(wildcard examples/common/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CUDA_CFLAGS) $(shell [ -f /usr/include/stb/stb_image_write.h ] && echo -DPBD_HAVE_STB -I/usr/include/stb) -c $< -o $@
$(CUDA_BUILD)/examples/%: $(CUDA_BUILD)/examples/%.o $(CUDA_BUILD)/pbd_cuda.o
	$(CUDA_LINK) $< $(CUDA_BUILD)/pbd_cuda.o -o $@ -lm
.SECONDARY: $(addprefix $(CUDA_BUILD)/examples/,$(addsuffix .o,$(EXAMPLES)))

cuda: deps
	@$(MAKE) --no-print-directory $(addprefix $(CUDA_BUILD)/examples/,$(EXAMPLES))

$(CUDA_BUILD)/tests/%.o: tests/%.c tests/test.h $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CUDA_CFLAGS) -c $< -o $@
$(CUDA_BUILD)/pbd_cuda_tests: $(CUDA_BUILD)/tests/main.o $(CUDA_BUILD)/tests/test_cuda.o $(CUDA_BUILD)/tests/impl_sm.o \
		$(CUDA_BUILD)/tests/impl_upsample.o $(CUDA_BUILD)/pbd_cuda.o
	$(CUDA_LINK) $^ -o $@ -lm

SANITIZER ?= $(shell command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
NCU ?= $(shell command -v ncu || echo /usr/local/cuda/bin/ncu)
test-gpu: deps
	@$(MAKE) --no-print-directory $(CUDA_BUILD)/pbd_cuda_tests
	./$(CUDA_BUILD)/pbd_cuda_tests $(T)
	@if nvidia-smi -L 2>/dev/null | grep -q GPU && [ -x "$(SANITIZER)" ]; then \
	  $(SANITIZER) --tool memcheck --leak-check full --error-exitcode 1 ./$(CUDA_BUILD)/pbd_cuda_tests $(T) && \
	  $(SANITIZER) --tool racecheck --error-exitcode 1 ./$(CUDA_BUILD)/pbd_cuda_tests $(T); \
	else echo "test-gpu: no CUDA device (or no compute-sanitizer): the sanitizers did not run"; fi

# One short check for a machine with a GPU (no package installs: such
# machines may be offline): the equivalence tests, compute-sanitizer on two
# short tests, and the GPU benches (cloth targets, strands, the 128 000
# particle fluid beside the 2-thread CPU world, self-collision's quick
# scenes, the upsamplers) into out/gpu-check/, and ncu's per-kernel times of the fluid,
# the 1000x1000 cloth and the self-colliding cloth (ncu-*.txt). About 5
# minutes on an H200's host.
gpu-check:
	@mkdir -p out/gpu-check
	@$(MAKE) --no-print-directory -j8 $(CUDA_BUILD)/pbd_cuda_tests $(BUILD)/bench/cloth $(BUILD)/bench/strands \
	  $(BUILD)/bench/fluid $(BUILD)/bench/selfcollision $(BUILD)/bench/upsample CUDA_ARCH=-arch=native
	./$(CUDA_BUILD)/pbd_cuda_tests | tee out/gpu-check/tests.txt
	-$(SANITIZER) --tool memcheck --error-exitcode 1 ./$(CUDA_BUILD)/pbd_cuda_tests cuda_snapshot 2>&1 | tail -3
	-$(SANITIZER) --tool racecheck --error-exitcode 1 ./$(CUDA_BUILD)/pbd_cuda_tests cuda_a_non_finite 2>&1 | tail -3
	OMP_NUM_THREADS=2 ./$(BUILD)/bench/cloth --gpu | tee out/gpu-check/cloth.jsonl
	OMP_NUM_THREADS=2 ./$(BUILD)/bench/strands | tee out/gpu-check/strands.jsonl
	OMP_NUM_THREADS=2 ./$(BUILD)/bench/fluid --big --config 2 | tee out/gpu-check/fluid.jsonl
	OMP_NUM_THREADS=2 ./$(BUILD)/bench/selfcollision --quick | tee out/gpu-check/selfcollision.jsonl
	OMP_NUM_THREADS=2 ./$(BUILD)/bench/upsample | tee out/gpu-check/upsample.jsonl
	-for s in dam128000:fluid:--big cloth1000:cloth:--gpu drape_self:selfcollision:--quick; do \
	  PBD_BENCH_SCENE=$${s%%:*} PBD_BENCH_GPU_ONLY=1 timeout 60 $(NCU) --clock-control none \
	    --metrics gpu__time_duration.sum --print-summary per-kernel --launch-skip 100 --launch-count 400 \
	    ./$(BUILD)/bench/$$(echo $$s | cut -d: -f2) $${s##*:} > out/gpu-check/ncu-$${s%%:*}.txt 2>&1; done

# The cross-platform determinism test's hashes (tests/test_determinism.c).
determinism-hash: deps
	@$(MAKE) --no-print-directory $(BUILD)/pbd_tests
	@PBDT_PRINT_HASHES=1 OMP_WAIT_POLICY=$${OMP_WAIT_POLICY:-passive} ./$(BUILD)/pbd_tests suite_determinism | grep '^    {' || true

# The suites' own code (checks, scenes, oracles) builds at TEST_OPT, the
# physics they test at OPT: the implementations (tests/main.c, impl_sm.c,
# impl_upsample.c). -O1 builds the suites in half the time of -O2, and CI
# builds them five times. (test_sm_rot4.c and test_sm_team.c hold private
# copies of the implementations, at TEST_OPT too: they compare bits within
# their own build only.)
TEST_OPT ?= $(if $(filter -O0 -O1 -Og,$(OPT)),$(OPT),-O1)
TEST_AT_OPT := main impl_sm impl_upsample
$(BUILD)/tests/%.o: tests/%.c tests/test.h tests/check_error.h $(HEADERS)
	@mkdir -p $(dir $@)
	$(COMPILE) $(if $(filter $*,$(TEST_AT_OPT)),,$(TEST_OPT)) -c $< -o $@

$(BUILD)/pbd_tests: $(TEST_OBJS)
	$(LINK) $^ -o $@ $(LIBS)

# The GPU companion's tests (tests/test_cuda.c): the runner and the suite
# built with PBD_CUDA, against pbd_cuda.cu compiled as C++ with
# PBD_CUDA_EMULATE (its kernels on CPU threads; see pbd_cuda.cu, EMULATION).
CUDA_TEST_OBJS := $(BUILD)/cuda-emu/main.o $(BUILD)/cuda-emu/test_cuda.o $(BUILD)/cuda-emu/impl_sm.o \
	$(BUILD)/cuda-emu/impl_upsample.o $(BUILD)/cuda-emu/pbd_cuda.o
$(BUILD)/cuda-emu/%.o: tests/%.c tests/test.h $(HEADERS)
	@mkdir -p $(dir $@)
	$(COMPILE) $(if $(filter $*,$(TEST_AT_OPT)),,$(TEST_OPT)) -DPBD_CUDA -DPBDT_CUDA_EMULATED -c $< -o $@
# (the C++ compiler of CC's family: one OpenMP runtime in the binary)
EMU_CXX := $(if $(findstring clang,$(CC)),$(subst clang,clang++,$(CC)),$(CXX))
# No SLP vectoriser in the emulation: it stands for a GPU's strict IEEE
# arithmetic (nvcc --fmad=false), and GCC 12's SLP pass at -O2
# -march=native changes the last bit of scalar expressions such as
# pbd_sm.h's quaternion product (measured; the CPU build runs that
# product's SIMD form, whose bits are the strict ones).
EMU_NO_SLP := $(if $(findstring clang,$(CC)),-fno-slp-vectorize,-fno-tree-slp-vectorize)
$(BUILD)/cuda-emu/pbd_cuda.o: pbd_cuda.cu $(HEADERS)
	@mkdir -p $(dir $@)
	$(EMU_CXX) -x c++ -std=c++11 $(BASEFLAGS) $(EMU_NO_SLP) -DPBD_CUDA_EMULATE -c $< -o $@
$(BUILD)/pbd_cuda_tests: $(CUDA_TEST_OBJS)
	$(EMU_CXX) $(BASEFLAGS) $^ -o $@ $(LIBS)

EXAMPLE_FLAGS := -std=c99 $(BASEFLAGS) $(shell [ -f /usr/include/stb/stb_image_write.h ] && echo -DPBD_HAVE_STB -I/usr/include/stb)

$(BUILD)/examples/%: examples/%.c $(HEADERS) $(wildcard examples/common/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(EXAMPLE_FLAGS) $< -o $@ $(LIBS)

# (a sub-make, so that EXAMPLE_FLAGS sees the stb that deps may install)
examples: deps
	@$(MAKE) --no-print-directory $(addprefix $(BUILD)/examples/,$(EXAMPLES))

demo: deps
	@$(MAKE) --no-print-directory $(BUILD)/examples/showcase
	@mkdir -p out
	./$(BUILD)/examples/showcase out

# ---- the interactive viewer (examples/viewer.c) ------------------------------
# GLFW 3 and OpenGL 3.3 through libepoxy, from Debian's packages, installed
# when missing (root with apt-get); check-viewer also needs Xvfb and Mesa's
# software GL (tests/viewer/check.sh says why it skips without them).
VIEWER_PKGS := libglfw3-dev libepoxy-dev
CHECK_VIEWER_PKGS := xvfb xauth libgl1-mesa-dri
define apt_install
	@missing=""; for p in $(1); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing$$missing"; \
	    (apt-get install -y -qq $$missing >/dev/null 2>&1 || \
	     (apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq $$missing >/dev/null 2>&1)) || \
	    echo "could not install$$missing"; \
	  else echo "missing:$$missing (Debian packages)"; fi; \
	fi
endef

$(BUILD)/examples/viewer: examples/viewer.c $(HEADERS) $(wildcard examples/common/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(EXAMPLE_FLAGS) $< -o $@ -lglfw -lepoxy $(LIBS)

# The viewer with the GPU companion's CPU emulation (PBD_CUDA; auto worlds
# stay on the CPU, the G key moves a scene onto the emulated device): what
# check-viewer's device switch runs where there is no GPU.
$(BUILD)/examples/viewer-emu: examples/viewer.c $(HEADERS) $(wildcard examples/common/*.h) $(BUILD)/cuda-emu/pbd_cuda.o
	@mkdir -p $(dir $@)
	$(CC) $(EXAMPLE_FLAGS) -DPBD_CUDA -c $< -o $@.o
	$(EMU_CXX) $(BASEFLAGS) $@.o $(BUILD)/cuda-emu/pbd_cuda.o -o $@ -lglfw -lepoxy $(LIBS)

play: deps
	$(call apt_install,$(VIEWER_PKGS))
	@$(MAKE) --no-print-directory $(BUILD)/examples/viewer
	./$(BUILD)/examples/viewer

check-viewer: deps
	$(call apt_install,$(VIEWER_PKGS) $(CHECK_VIEWER_PKGS))
	@$(MAKE) --no-print-directory $(BUILD)/examples/viewer $(BUILD)/examples/viewer-emu || \
	  echo "check-viewer: the viewer does not build here"
	@sh tests/viewer/check.sh ./$(BUILD)/examples/viewer out/viewer ./$(BUILD)/examples/viewer-emu

# ---- the viewer in the browser ------------------------------------------------
# Debian's emscripten (its GLFW, WebGL 2; it needs node-acorn, found through
# NODE_PATH), one thread, the SIMD kernels through SIMDe's WASM SIMD128
# mapping (-msimd128); SIMDe and stb come from /usr/include through links in
# $(WEB_BUILD)/include (not the host's other headers). viewer-scalar.js is
# the scalar path (PBD_NO_SIMD), for the comparison (index.html?build=scalar).
WEB_PKGS := emscripten node-acorn libsimde-dev libstb-dev
CHECK_WEB_PKGS := chromium nodejs python3
WEB_BUILD := build/web
EMCC ?= emcc
WEB_FLAGS := -O2 -ffp-contract=off -I. -I$(WEB_BUILD)/include -sUSE_GLFW=3 -sMIN_WEBGL_VERSION=2 \
  -sMAX_WEBGL_VERSION=2 -sALLOW_MEMORY_GROWTH=1 \
  $(shell [ -f /usr/include/stb/stb_image_write.h ] && echo -DPBD_HAVE_STB -I$(WEB_BUILD)/include/stb)
WEB_SRCS := examples/viewer.c $(HEADERS) $(wildcard examples/common/*.h)

$(WEB_BUILD)/include/.links:
	@mkdir -p $(dir $@)
	@for d in simde stb; do [ ! -d /usr/include/$$d ] || ln -sfn /usr/include/$$d $(dir $@)$$d; done
	@touch $@
out/web/viewer.js: $(WEB_SRCS) $(WEB_BUILD)/include/.links
	@mkdir -p out/web
	NODE_PATH=/usr/share/nodejs $(EMCC) $(WEB_FLAGS) -msimd128 $< -o $@
out/web/viewer-scalar.js: $(WEB_SRCS) $(WEB_BUILD)/include/.links
	@mkdir -p out/web
	NODE_PATH=/usr/share/nodejs $(EMCC) $(WEB_FLAGS) -DPBD_NO_SIMD $< -o $@
out/web/index.html: examples/web/index.html
	@mkdir -p out/web
	cp $< $@

web:
	$(call apt_install,$(WEB_PKGS))
	@$(MAKE) --no-print-directory out/web/viewer.js out/web/index.html

serve: web
	@echo "pbd viewer: http://localhost:8000/ (Ctrl-C stops)"
	cd out/web && python3 -m http.server 8000 --bind 127.0.0.1

check-web:
	$(call apt_install,$(WEB_PKGS) $(CHECK_WEB_PKGS))
	@$(MAKE) --no-print-directory out/web/viewer.js out/web/index.html || echo "check-web: the page does not build here"
	@sh tests/viewer/check_web.sh out/web

# WASM SIMD against the scalar path in headless Chromium, JSON lines (bench/web.sh)
bench-web:
	$(call apt_install,$(WEB_PKGS) $(CHECK_WEB_PKGS))
	@$(MAKE) --no-print-directory out/web/viewer.js out/web/viewer-scalar.js out/web/index.html
	@sh bench/web.sh $(WEB_SCENE)

# Where nvcc exists the benches hold pbd_cuda.cu too (PBD_CUDA), so that they
# measure a GPU world where there is a device (path "cuda") and say why not
# where there is none.
HAVE_NVCC := $(shell command -v $(NVCC) >/dev/null 2>&1 && echo 1)
ifeq ($(HAVE_NVCC),1)
# (compiled apart from the link, so that a parallel build compiles the
# benches while nvcc compiles pbd_cuda.cu)
$(BUILD)/bench/%.o: bench/%.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) -std=c99 $(BASEFLAGS) $(BENCH_OPT) -DPBD_CUDA -c $< -o $@
$(BUILD)/bench/%: $(BUILD)/bench/%.o $(CUDA_BUILD)/pbd_cuda.o
	$(NVCC) $(CUDA_ARCH) -Xcompiler -fopenmp $< $(CUDA_BUILD)/pbd_cuda.o -o $@ $(LIBS)
.SECONDARY: $(addprefix $(BUILD)/bench/,$(addsuffix .o,$(BENCHES)))
else
$(BUILD)/bench/%: bench/%.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) -std=c99 $(BASEFLAGS) $(BENCH_OPT) $< -o $@ $(LIBS)
endif

benches: deps
	@$(MAKE) --no-print-directory $(addprefix $(BUILD)/bench/,$(BENCHES))

BENCH ?= $(BENCHES)
bench: deps
	@$(MAKE) --no-print-directory $(addprefix $(BUILD)/bench/,$(BENCH))
	@mkdir -p out
	@: > out/bench.jsonl
	@for b in $(BENCH); do ./$(BUILD)/bench/$$b | tee -a out/bench.jsonl; done

clean:
	rm -rf build out

# Every header's implementation compiles warning-free (-Werror) as C99,
# C11 and C++11 (also optimised, where some warnings only appear), with
# PBD_STATIC, without SIMD and without OpenMP. The headers are checked side
# by side (make -j); the optimised compiles of pbd_sm.h and pbd_upsample.h
# hold their own implementation only (pbd.h's is checked once, in its own).
HEADER_CHECKS := $(addprefix $(BUILD)/check/,$(addsuffix .ok,pbd pbd_sm pbd_upsample))
check-headers: $(HEADER_CHECKS) $(BUILD)/check/test_cuda-cxx.ok $(BUILD)/check/names.ok check-messages

# The implementations leave the user's names alone: in strict C with
# AVX-512, SIMDe's SVML includes <complex.h>, whose I and complex macros
# the headers take back (a variable named I must compile). x86 only (the
# only target whose SIMDe header pulls in SVML).
$(BUILD)/check/names.ok: $(HEADERS)
	@mkdir -p $(dir $@)
	@f=$(BUILD)/check/names.c; \
	printf '#define PBD_IMPLEMENTATION\n#include "pbd.h"\n#define PBD_SM_IMPLEMENTATION\n#include "pbd_sm.h"\n#define PBD_UPSAMPLE_IMPLEMENTATION\n#include "pbd_upsample.h"\nint main(void){double I = 1, complex = 2; return (int)(I + complex);}\n' > $$f; \
	if $(CC) -dumpmachine | grep -q x86_64; then \
	  $(CC) -std=c99 -Wall -Wextra -Werror -Wno-psabi -mavx512f -mavx512dq -mavx512bw -mavx512vl -I. -fsyntax-only $$f && \
	  echo "the headers' implementations leave I and complex to the user (C99, AVX-512)"; \
	else echo "names: not x86, SIMDe's SVML not included: nothing to check"; fi && touch $@

# Error messages are words for the users of the public API (docs/DESIGN.md
# 2.3): no string literal of a header quotes the C of its check ("rejected
# because ...") or starts with an internal function's name ("pbd_sm__x: ").
# Part of check-headers; tests/check_error.h checks the messages the tests
# provoke (pbdt_message_reads_as_words).
check-messages:
	@if grep -nE '"[^"]*(rejected because|pbd_[a-z]*__[a-z0-9_]*: )' $(HEADERS); then \
	  echo "check-messages: the string literals above read as code: say what is wrong in words"; exit 1; \
	else echo "check-messages: the messages of $(HEADERS) read as words"; fi

# The GPU companion's tests compile as C++ too (CI's C++ configuration
# runs without the emulated GPU, whose C++ build the gcc runs have).
$(BUILD)/check/test_cuda-cxx.ok: tests/test_cuda.c tests/test.h $(HEADERS)
	@mkdir -p $(dir $@)
	@$(CXX) -x c++ -std=c++11 -Wall -Wextra -Werror -Wno-psabi -I. -DPBD_CUDA -DPBDT_CUDA_EMULATED -fsyntax-only $< && \
	echo "$<: compiles as C++11 with PBD_CUDA" && touch $@

$(BUILD)/check/%.ok: %.h $(HEADERS)
	@mkdir -p $(dir $@)
	@def=$$(grep -oE '^#ifdef PBD_[A-Z]*_?IMPLEMENTATION$$' $< | head -1 | cut -d' ' -f2); \
	c=$(BUILD)/check/$*-c.c; o=$(BUILD)/check/$*-o.c; s=$(BUILD)/check/$*-s.c; \
	printf '#define PBD_IMPLEMENTATION\n#define %s\n#include "%s"\nint main(void){return 0;}\n' $$def $< > $$c; \
	printf '#define %s\n#include "%s"\nint main(void){return 0;}\n' $$def $< > $$o; \
	printf '#define PBD_STATIC\n#define PBD_IMPLEMENTATION\n#define %s\n#include "%s"\nint main(void){return 0;}\n' $$def $< > $$s; \
	$(CC) -std=c99 -Wall -Wextra -Werror -Wno-psabi -I. -fsyntax-only $$c && \
	$(CC) -std=c11 -O2 -Wall -Wextra -Werror -Wno-psabi -march=native -fopenmp -I. -c $$o -o $(BUILD)/check/$*-c11.o && \
	$(CC) -std=c99 -Wall -Wextra -Werror -DPBD_NO_SIMD -I. -fsyntax-only $$c && \
	$(CC) -std=c99 -Wall -Wextra -Werror -Wno-unused-function -I. -fsyntax-only $$s && \
	$(CXX) -x c++ -std=c++11 -Wall -Wextra -Werror -Wno-psabi -I. -fsyntax-only $$c && \
	$(CXX) -x c++ -std=c++11 -O2 -Wall -Wextra -Werror -Wno-psabi -march=native -fopenmp -I. -c $$o -o $(BUILD)/check/$*-cxx.o && \
	echo "$<: compiles as C99, C11, C++11, static, scalar" && touch $@

# The multi-resolution cloth's paper reproduced at full size (figures 7
# and 8, table 3 of Bender, Weber and Diziol 2013): exits 1 when a trend
# of the paper does not hold. About 80 s on 2 cores: not part of CI, whose
# make test holds the same trends on smaller cloths (tests/test_sm_cloth.c:
# sm_cloth_strain_falls_with_levels, ..._with_time_step, sm_cloth_recovers_*);
# run it after a change to pbd_sm.h's cloth.
check-repro:
	@$(MAKE) --no-print-directory $(BUILD)/bench/multires
	OMP_WAIT_POLICY=$${OMP_WAIT_POLICY:-passive} ./$(BUILD)/bench/multires --repro

# The same on GPU worlds of pbd_cuda.cu's CPU emulation (figure 7 and table
# 3; figure 8's recovery runs on the CPU): the trends hold on the GPU
# path. About 6 minutes on 2 cores, so not part of CI, whose emulated
# tests compare the cloth's every kernel with the CPU bit for bit.
$(BUILD)/bench-emu/multires: bench/multires.c $(HEADERS) $(BUILD)/cuda-emu/pbd_cuda.o
	@mkdir -p $(dir $@)
	$(CC) -std=c99 $(BASEFLAGS) $(BENCH_OPT) -DPBD_CUDA -c $< -o $@.o
	$(EMU_CXX) $(BASEFLAGS) $@.o $(BUILD)/cuda-emu/pbd_cuda.o -o $@ $(LIBS)
check-repro-gpu:
	@$(MAKE) --no-print-directory $(BUILD)/bench-emu/multires
	OMP_WAIT_POLICY=$${OMP_WAIT_POLICY:-passive} ./$(BUILD)/bench-emu/multires --repro-gpu

# The house format (.clang-format, 120 columns): `make format` applies it
# to every C and CUDA source in git, `make check-format` fails on any
# difference (CI). Skipped, with a note, where clang-format 14 is missing:
# other versions format a few constructs differently.
FORMAT_SRCS = $(shell git ls-files '*.c' '*.h' '*.cu' 2>/dev/null)
CLANG_FORMAT ?= $(shell command -v clang-format-14 || command -v clang-format)
format:
	@$(CLANG_FORMAT) -i $(FORMAT_SRCS)
check-format:
	@if [ -z "$(CLANG_FORMAT)" ] || ! $(CLANG_FORMAT) --version | grep -q 'version 14\.'; then \
	  echo "check-format: clang-format 14 not found, not checked"; \
	else $(CLANG_FORMAT) --dry-run -Werror $(FORMAT_SRCS) && echo "check-format: $(words $(FORMAT_SRCS)) files formatted"; fi

check-readme:
	@mkdir -p $(BUILD)/readme
	@awk '/^```c$$/{f=1;next} /^```$$/{if(f){exit}} f' README.md > $(BUILD)/readme/hello.c
	@$(CC) -std=c99 -O2 -fopenmp -ffp-contract=off -Wall -Wextra -Werror -I. $(BUILD)/readme/hello.c -o $(BUILD)/readme/hello -lm
	@./$(BUILD)/readme/hello

# The README's CUDA build lines as written (its sh block with nvcc), on its
# hello world as app.c, in a folder holding the headers and pbd_cuda.cu
# (.ci/run, where nvcc exists: the two-step link once lacked -lstdc++).
check-cuda-readme:
	@rm -rf $(CUDA_BUILD)/readme && mkdir -p $(CUDA_BUILD)/readme
	@cp $(HEADERS) pbd_cuda.cu $(CUDA_BUILD)/readme/
	@awk '/^```c$$/{f=1;next} /^```$$/{if(f){exit}} f' README.md > $(CUDA_BUILD)/readme/app.c
	@awk '/^```sh$$/{f=1;b="";next} /^```$$/{if(f&&b~/pbd_cuda.cu/){printf "%s",b;exit} f=0} f{b=b $$0 "\n"}' README.md \
	  > $(CUDA_BUILD)/readme/build.sh
	@cat $(CUDA_BUILD)/readme/build.sh
	@cd $(CUDA_BUILD)/readme && sh -ex build.sh && ./app

# ---- fuzzing (tests/fuzz/: libFuzzer harnesses, clang) ----------------------
# Four harnesses: fuzz_restore (pbd_world_restore from arbitrary bytes),
# fuzz_model (pbd_upsample.h's model and training-set loaders), fuzz_builders
# (every builder and setter of the three headers fed arbitrary meshes and
# parameters), fuzz_step (a step loop whose scene and parameters come from
# the bytes). Each starts from its seed corpus in tests/fuzz/corpus/<name>
# (replayed first); what it finds new goes to build/fuzz/corpus/<name>, a
# crash to build/fuzz/crash-<name>-*, and fails the target.
#   make fuzz              FUZZ_TIME seconds per harness (default 600)
#   make fuzz-ci           FUZZ_CI_TIME seconds per harness (default 20; .ci/run: 10)
#   make fuzz-replay       replay the corpora with $(CC) and ASan, no libFuzzer
#   make fuzz-seeds        regenerate tests/fuzz/corpus from the harnesses' generators
#                          (regress-* files stay: inputs that once failed)
FUZZ_CC ?= clang
FUZZ_TIME ?= 600
FUZZ_CI_TIME ?= 20
FUZZERS := restore model builders step
FUZZ_BUILD := build/fuzz
FUZZ_SRC := $(wildcard tests/fuzz/*.h)
FUZZ_FLAGS := -std=c99 $(DEBUG) -O1 -ffp-contract=off -fno-math-errno -march=native -Wall -Wextra -Wno-unknown-pragmas \
  -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined -I. -Itests/fuzz
FUZZ_RUN_FLAGS := -timeout=30 -rss_limit_mb=2048 -print_final_stats=1

.PHONY: fuzz fuzz-ci fuzz-build fuzz-replay fuzz-seeds

# the three headers' implementations, one object each (a parallel build
# compiles them side by side), linked into every harness
FUZZ_IMPL := pbd sm upsample
FUZZ_IMPL_OBJS := $(patsubst %,$(FUZZ_BUILD)/impl_%.o,$(FUZZ_IMPL))
$(FUZZ_BUILD)/impl_%.o: tests/fuzz/impl_%.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -fsanitize=fuzzer-no-link -c $< -o $@

$(FUZZ_BUILD)/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_SRC) $(FUZZ_IMPL_OBJS)
	$(FUZZ_CC) $(FUZZ_FLAGS) -fsanitize=fuzzer $< $(FUZZ_IMPL_OBJS) -o $@ -lm

fuzz-build: $(addprefix $(FUZZ_BUILD)/fuzz_,$(FUZZERS))

# Runs every harness for $(1) seconds, as many at once as there are cores
# (tests/fuzz/run.sh; each harness is one thread); prints "N passed, N
# failed, 0 skipped" like the test runner, so that .ci/run counts a crash as
# a failure.
FUZZ_JOBS ?= $(shell nproc 2>/dev/null || echo 2)
define FUZZ_RUN
	@FUZZ_BUILD=$(FUZZ_BUILD) FUZZ_RUN_FLAGS="$(FUZZ_RUN_FLAGS)" sh tests/fuzz/run.sh $(1) $(FUZZ_JOBS) $(FUZZERS)
endef

fuzz: fuzz-build
	$(call FUZZ_RUN,$(FUZZ_TIME))

fuzz-ci: fuzz-build
	$(call FUZZ_RUN,$(FUZZ_CI_TIME))

$(BUILD)/fuzz/replay_%: tests/fuzz/fuzz_%.c $(FUZZ_SRC) $(patsubst %,tests/fuzz/impl_%.c,$(FUZZ_IMPL)) $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) -std=c99 $(BASEFLAGS) -Itests/fuzz -DPBD_FUZZ_REPLAY $< $(patsubst %,tests/fuzz/impl_%.c,$(FUZZ_IMPL)) -o $@ $(LIBS)

fuzz-replay:
	@$(MAKE) --no-print-directory $(addprefix $(BUILD)/fuzz/replay_,$(FUZZERS))
	@for h in $(FUZZERS); do ./$(BUILD)/fuzz/replay_$$h tests/fuzz/corpus/$$h || exit 1; done

fuzz-seeds:
	@$(MAKE) --no-print-directory $(addprefix $(BUILD)/fuzz/replay_,$(FUZZERS))
	@for h in $(FUZZERS); do find tests/fuzz/corpus/$$h -type f ! -name 'regress-*' -delete 2>/dev/null; \
		./$(BUILD)/fuzz/replay_$$h --seeds tests/fuzz/corpus/$$h || exit 1; done

# ---- soak (tests/soak/soak.c) -----------------------------------------------
# Every example scene for SOAK_STEPS steps (default 10 000) with random
# mouse-like grabs and collider moves, under ASan and UBSan: no NaN, no
# memory error, energy bounded (see the top of tests/soak/soak.c). Not part
# of `make test`: it takes hours (the time is the simulation's, mostly
# self-collision, not the examples' frames; ASan at -O2, one thread per
# example). Time for 10 000 steps on the 2-core development machine,
# shared with other jobs (so roughly): sm_plant under a minute, flag_tear 4,
# sm_blob 6, sm_jelly 10, hair 10, cloth_fold and tablecloth 97-109
# minutes each. SOAK=<names> runs a subset.
SOAK_STEPS ?= 10000
SOAK ?= $(EXAMPLES)
SOAK_OPT ?= -O2
SOAK_BUILD := build/soak$(SOAK_OPT)
SOAK_FLAGS := -std=c99 -g $(SOAK_OPT) -ffp-contract=off -fno-math-errno -march=native -fopenmp -Wall -Wextra -Wno-psabi \
  -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -I. -Iexamples \
  $(shell [ -f /usr/include/stb/stb_image_write.h ] && echo -DPBD_HAVE_STB -I/usr/include/stb)

.PHONY: soak
SOAK_IMPL_OBJS := $(patsubst %,$(SOAK_BUILD)/impl_%.o,$(FUZZ_IMPL))
$(SOAK_BUILD)/impl_%.o: tests/fuzz/impl_%.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(SOAK_FLAGS) -c $< -o $@

# flag_tear's storm blows at up to 56 m/s (7 m/s x 5 x a gust of 1.6), and
# its wind is drag towards the air's velocity: torn-off pieces fly with the
# air, so its speed bound is 70 m/s instead of 50.
$(SOAK_BUILD)/%: tests/soak/soak.c examples/%.c $(HEADERS) $(wildcard examples/common/*.h) $(SOAK_IMPL_OBJS)
	$(CC) $(SOAK_FLAGS) -DSOAK_EXAMPLE='"$*.c"' -DSOAK_NAME='"$*"' $(if $(filter upsample,$*),-DSOAK_CALLS=1) \
	  $(if $(filter flag_tear,$*),-DSOAK_SPEED=70.0f) $< $(SOAK_IMPL_OBJS) -o $@ -lm

# One run per example (soak-run-<name>), so `make -j2 soak` runs two at once;
# -k: every example runs even after one fails, and the status is a failure.
SOAK_RUNS := $(addprefix soak-run-,$(SOAK))
.PHONY: $(SOAK_RUNS)
$(SOAK_RUNS): soak-run-%: $(SOAK_BUILD)/%
	@mkdir -p out/soak
	@s=$$(date +%s); OMP_NUM_THREADS=1 ASAN_OPTIONS=detect_leaks=0 ./$< --steps $(SOAK_STEPS) out/soak > out/soak/$*.log 2>&1; \
	  rc=$$?; sum=$$(grep '^soak [^:]*: [0-9]* steps' out/soak/$*.log || echo "soak $*: no summary (exit $$rc), see out/soak/$*.log"); \
	  echo "$$sum ($$(( $$(date +%s) - s )) s)"; \
	  [ $$rc -eq 0 ] || { grep -E -A8 'soak .*step|ERROR: AddressSanitizer|runtime error' out/soak/$*.log | head -20; exit 1; }

soak: deps
	@$(MAKE) --no-print-directory $(addprefix $(SOAK_BUILD)/,$(SOAK))
	@$(MAKE) --no-print-directory -k $(SOAK_RUNS)
