# Thin front end over CMake + CTest. Every target configures first (a no-op when nothing changed).
#
#   make                      build everything
#   make test EX=<id>         build and run one exercise's tests against YOUR code
#   make check                CPU tests + every solution passes + every wrong variant is rejected
#   make check-skeletons      the exercise contract (see tools/check_skeletons.py)
#   make snippets             refresh the lessons' code blocks from the sources' snippet anchors
#   make tables               refresh the lessons' measurement tables from bench/results/reference/*.csv
#   make figures              redraw docs/figures/*.svg (tools/figures.py)
#   make check-i18n           every English page has its Chinese twin (X.zh.md), headings/code/numbers in step
#   make book                 the site: build/book/site, from the same markdown (mkdocs-material)
#   make book-check           strict build + headless Chromium renders every page (figures, math)
#   make format               clang-format every C++/CUDA source (patches kept applicable); make check-format checks
#   make hint EX=<id> [LEVEL=n] [LANG=zh]  the n-th hint (1 nudge, 2 approach, 3 near-solution)
#   make show-bug EX=<id> [BUG=<bug>]  the exercise's wrong variants; with BUG, that one's patch
#   make bench                time every solution kernel (checked first) against measured roofs
#   make compare EX=<id>      YOUR kernel next to the solution: both checked, time, ratio
#   make sanitize EX=<id> [SOLUTION=1]  YOUR kernel (or the solution) under compute-sanitizer
#   make plot                 charts (PNG) from the last make bench (needs matplotlib)
#   make serve [MODEL=dir] [MINE="03_fused_add_rmsnorm ..."] [ARGS=...]  day 11's engine generates text (default:
#                             SmolLM2-135M-shaped random weights); MINE: your kernels for those exercises
#   make serve-bench [ARGS=...]  day 11's serving workloads (batch 1-128, a 32k context), then transformers' (CSV)
#   make chat MODEL=dir       chat with a Hugging Face Llama-style checkpoint through the engine (its own tokenizer)
#   make help                 this list, with the exercise ids
#
# Without a GPU, make test says "compiled OK — not run" and ends with status 0 (see
# tools/test_exercise.sh for why); the status lists mark such exercises ⊘, never as passed.
# Options: CUDA_ARCH=90 (or 80, 86, native, "80;90"), BUILD=<dir>, JOBS=<n>,
#          BENCH_ARGS="--kernel prefill --shape n4096" (bench/README.md lists them)

BUILD     ?= build
JOBS      ?= $(shell nproc 2>/dev/null || echo 2)
CUDA_ARCH ?=
EX        ?=

GENERATOR  := $(if $(wildcard $(BUILD)/CMakeCache.txt),,$(if $(shell command -v ninja 2>/dev/null),-G Ninja,))
# COURSE_CUDA_ARCH is passed even when empty: the build then follows this command's CUDA_ARCH
# (or the automatic choice), never one left over from an earlier command.
CMAKE_ARGS := -DCMAKE_BUILD_TYPE=Release "-DCOURSE_CUDA_ARCH=$(CUDA_ARCH)"
CTEST      := ctest --test-dir $(BUILD) --output-on-failure
EXERCISES  := $(sort $(basename $(notdir $(wildcard day*/[0-9][0-9]_*.cu))))
# CTest's per-test results, read by tools/test_status.py for the ✔/✘/⊘/· lists.
STATUS_XML  = $(abspath $(BUILD))/Testing/course-status.xml

.PHONY: all build configure test check check-skeletons check-i18n snippets tables figures book book-check book-serve format check-format hint show-bug bench compare plot serve serve-bench chat clean help list sanitize

all: build

configure:
	@mkdir -p $(BUILD)
	@cmake -S . -B $(BUILD) $(GENERATOR) $(CMAKE_ARGS) > $(BUILD)/configure.log 2>&1 \
	  || { cat $(BUILD)/configure.log; exit 1; }
	@grep -E "^-- course:|^CMake Warning" -A2 $(BUILD)/configure.log | grep -v "^--$$" || true

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

# The learner's loop: make test EX=02_flash_attention
test: configure
ifeq ($(EX),)
	@cmake --build $(BUILD) -j $(JOBS) --target course_exercises
	@rm -f $(STATUS_XML)
	@ctest --test-dir $(BUILD) -Q -L exercise -j 1 --output-junit $(STATUS_XML) || true
	@python3 tools/test_status.py exercise $(STATUS_XML)
	@echo "('make test EX=<id>' shows one exercise's full report)"
else
	@test -n "$(filter $(EX),$(EXERCISES))" || { echo "unknown exercise '$(EX)'. Exercises: $(EXERCISES)"; exit 2; }
	@bash tools/test_exercise.sh $(BUILD) $(EX) $(JOBS)
endif

GPU_INFO = @if [ -x $(BUILD)/bin/course_gpu_info ]; then $(BUILD)/bin/course_gpu_info; \
	  else echo "course: no CUDA toolkit found at configure time: GPU tests will be SKIPPED"; fi

check: build
	$(GPU_INFO)
	@rm -f $(STATUS_XML)
	@$(CTEST) -L "cpu|solution|wrong" -j $(JOBS) --output-junit $(STATUS_XML); rc=$$?; \
	 python3 tools/test_status.py check $(STATUS_XML); exit $$rc

# The contract script first: it needs no build, so a violation shows in a second, not after one.
check-skeletons:
	@python3 tools/check_skeletons.py
	@$(MAKE) --no-print-directory build
	$(GPU_INFO)
	@$(CTEST) -L skeleton -j $(JOBS)

hint:
	@python3 tools/hint.py "$(EX)" "$(or $(LEVEL),1)" "$(LANG)"

# Lessons show code through <!-- snippet: path#name --> blocks (tools/snippets.py); never edit one by hand.
snippets:
	@python3 tools/snippets.py --write

tables:
	@python3 tools/tables.py --write

# The Chinese edition: every English page has its X.zh.md twin, in step (tools/i18n.py).
check-i18n:
	@python3 tools/i18n.py check

figures:
	@python3 tools/figures.py

# The site's packages live in a virtual environment inside the build folder (never committed);
# chromium, chromium-driver, libjs-katex and fonts-katex come from Debian (.ci/run installs them).
BOOK_VENV = $(BUILD)/book-venv
$(BOOK_VENV)/.installed: tools/book-requirements.txt
	@python3 -m venv $(BOOK_VENV) || { echo "book: python3 -m venv failed (Debian: apt-get install python3-venv)"; exit 2; }
	@$(BOOK_VENV)/bin/pip install -q --disable-pip-version-check -r tools/book-requirements.txt
	@touch $@

book: $(BOOK_VENV)/.installed
	@NO_MKDOCS_2_WARNING=1 $(BOOK_VENV)/bin/python tools/book.py build

book-check: $(BOOK_VENV)/.installed
	@NO_MKDOCS_2_WARNING=1 $(BOOK_VENV)/bin/python tools/book.py check

book-serve: $(BOOK_VENV)/.installed
	@NO_MKDOCS_2_WARNING=1 $(BOOK_VENV)/bin/python tools/book.py serve

# clang-format (.clang-format) over every tracked C++/CUDA source; the wrong-variant patches are
# rewritten so that they still apply to the formatted solutions (tools/format_sources.py).
format:
	@python3 tools/format_sources.py

check-format:
	@command -v clang-format > /dev/null || { echo "check-format: clang-format not found (apt-get install clang-format)"; exit 2; }
	@python3 tools/format_sources.py --check

show-bug:
	@python3 tools/show_bug.py "$(EX)" $(BUG)

# compute-sanitizer (memcheck, racecheck, synccheck, initcheck) on the [quick] test cases.
sanitize: configure
	@test -n "$(filter $(EX),$(EXERCISES))" || { echo "usage: make sanitize EX=<id> [SOLUTION=1]   (ids: make list)"; exit 2; }
	@bash tools/sanitize.sh $(BUILD) $(EX) $(JOBS) $(if $(filter 1,$(SOLUTION)),solution)

# Benchmarks (bench/README.md). Results go to bench/results/ (git-ignored).
BENCH_ARGS ?=
BENCH_OUT  ?= bench/results
BENCH_IDS   = $(BUILD)/bench/compare_ids.txt
BENCH_NEEDS_CUDA = @test -f $(BENCH_IDS) || { echo "the bench needs the CUDA toolkit (nvcc), which configure did not find"; exit 2; }

bench: configure
	$(BENCH_NEEDS_CUDA)
	@cmake --build $(BUILD) -j $(JOBS) --target bench course_attention
	@mkdir -p $(BENCH_OUT)
	@$(BUILD)/bin/bench --csv $(BENCH_OUT)/bench.csv --markdown $(BENCH_OUT)/bench.md $(BENCH_ARGS)
	@echo "(written: $(BENCH_OUT)/bench.csv and bench.md; 'make plot' draws the charts)"

# Two binaries, because the skeleton and the solution define the same launcher: the learner's
# (bench_ex_<id>) writes a CSV, the solution's (bench) times the same shapes and prints both.
compare: configure
	@test -n "$(EX)" || { echo "usage: make compare EX=<id>   (ids: make list)"; exit 2; }
	@test -n "$(filter $(EX),$(EXERCISES))" || { echo "unknown exercise '$(EX)'. Exercises: $(EXERCISES)"; exit 2; }
	$(BENCH_NEEDS_CUDA)
	@grep -qx "$(EX)" $(BENCH_IDS) || { echo "the bench does not time $(EX) yet; it times: $$(tr '\n' ' ' < $(BENCH_IDS))"; exit 2; }
	@cmake --build $(BUILD) -j $(JOBS) --target bench bench_ex_$(EX)
	@mkdir -p $(BENCH_OUT)
	@rm -f $(BENCH_OUT)/compare_$(EX).csv
	@$(BUILD)/bin/bench_ex_$(EX) --kernel $(EX) --no-roofs --quiet --csv $(BENCH_OUT)/compare_$(EX).csv $(BENCH_ARGS) > /dev/null; \
	 rc=$$?; if [ $$rc -eq 2 ] || [ ! -f $(BENCH_OUT)/compare_$(EX).csv ]; then exit 2; fi
	@$(BUILD)/bin/bench --kernel $(EX) --quiet --compare $(BENCH_OUT)/compare_$(EX).csv $(BENCH_ARGS)

# Day 11's serving engine (day11-serving/engine/README.md). MODEL: a Hugging Face directory or a
# preset (smollm2_135m, llama3_8b[:layers], tiny); ARGS: the tool's own options (--help).
MODEL ?=
ARGS  ?=
MINE  ?=
SERVE_EMPTY :=
SERVE_SPACE := $(SERVE_EMPTY) $(SERVE_EMPTY)
SERVE_EXE = $(if $(strip $(MINE)),serve_mine,serve)
SERVE_BUILD = cmake --build $(BUILD) -j $(JOBS) --target
SERVE_NO_ENGINE = { echo "day 11's engine is not in this build: it needs the CUDA toolkit and an sm_80+ target (see the configure messages above)"; exit 2; }

serve: configure
	@$(if $(strip $(MINE)),cmake -S . -B $(BUILD) "-DSERVE_MINE=$(subst $(SERVE_SPACE),;,$(strip $(MINE)))" > /dev/null,true)
	@$(SERVE_BUILD) $(SERVE_EXE) > $(BUILD)/serve-build.log 2>&1 || { grep -q "unknown target" $(BUILD)/serve-build.log && $(SERVE_NO_ENGINE); cat $(BUILD)/serve-build.log; exit 1; }
	@$(BUILD)/bin/$(SERVE_EXE) $(if $(MODEL),--model $(MODEL)) $(ARGS)

serve-bench: configure
	@$(SERVE_BUILD) serve_bench > $(BUILD)/serve-build.log 2>&1 || { grep -q "unknown target" $(BUILD)/serve-build.log && $(SERVE_NO_ENGINE); cat $(BUILD)/serve-build.log; exit 1; }
	@mkdir -p $(BENCH_OUT)
	@$(BUILD)/bin/serve_bench --csv $(BENCH_OUT)/serve_bench.csv $(ARGS)
	@python3 day11-serving/engine/serve_bench_torch.py --csv $(BENCH_OUT)/serve_bench_torch.csv; \
	 rc=$$?; if [ $$rc -eq 77 ]; then echo "(the transformers baseline was skipped: no torch / transformers / GPU)"; elif [ $$rc -ne 0 ]; then exit $$rc; fi
	@python3 day11-serving/engine/plot_serve_bench.py $(BENCH_OUT)/serve_bench.csv $$(test -f $(BENCH_OUT)/serve_bench_torch.csv && echo $(BENCH_OUT)/serve_bench_torch.csv) --out $(BENCH_OUT)/serve_bench.png

chat: configure
	@test -n "$(MODEL)" || { echo "usage: make chat MODEL=<a Hugging Face Llama-style directory: config.json, *.safetensors, tokenizer>"; exit 2; }
	@$(SERVE_BUILD) course_serving_capi > $(BUILD)/serve-build.log 2>&1 || { grep -q "unknown target" $(BUILD)/serve-build.log && $(SERVE_NO_ENGINE); cat $(BUILD)/serve-build.log; exit 1; }
	@python3 day11-serving/engine/chat.py $(MODEL) --lib $(BUILD)/lib/libcourse_serving_capi.so $(ARGS)

plot:
	@test -f $(BENCH_OUT)/bench.csv || { echo "no $(BENCH_OUT)/bench.csv yet: run make bench first"; exit 2; }
	@python3 bench/plot.py $(BENCH_OUT)/bench.csv --out $(BENCH_OUT)

clean:
	rm -rf $(BUILD)

list:
	@echo $(EXERCISES) | tr ' ' '\n'

help:
	@awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' Makefile
	@echo ""
	@echo "Exercises:"; for e in $(EXERCISES); do echo "  $$e"; done
