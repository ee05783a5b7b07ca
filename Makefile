# The two commands of README.md: `make demo` and `make test`.
# Each creates or updates .venv and installs what it needs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: demo test lint format clean train bench

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	# torch is pinned to the CPU build (torch==2.13.0) in pyproject.toml.
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/agentflow demo

test: $(STAMP)
	TRITON_INTERPRET=1 $(BIN)/python -m pytest -q -p no:cacheprovider

lint: $(STAMP)
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

format: $(STAMP)
	$(BIN)/ruff format . && $(BIN)/ruff check --fix .

# The shipped pair (docs/models.md): the AR model in three stages (stage 1 from
# scratch, stages 2 and 3 continue from the previous export on fresh corpus samples),
# then two more AR stages on the perturbed corpus (names hidden, made-up tools),
# then the diffusion drafter starts from that AR export (shifted block diffusion) and
# takes more stages on the perturbed corpus (position gaps, long conversations; the last
# ships its midpoint with the one before, export_mix); last, three more AR stages (wider tool
# results, position gaps, long conversations) replace the AR export, which
# is why they come after the drafter's configs.
# Other configs are kept so that experiments reproduce; they are not shipped
# (docs/models.md, the training table).
train: $(STAMP)
	$(BIN)/agentflow train --config engine/training/configs/tiny-ar.json
	$(BIN)/agentflow train --config engine/training/configs/tiny-ar-continue.json
	$(BIN)/agentflow train --config engine/training/configs/tiny-ar-stage3.json
	$(BIN)/agentflow train --config engine/training/configs/tiny-ar-stage4.json
	$(BIN)/agentflow train --config engine/training/configs/tiny-ar-stage5.json
	$(BIN)/agentflow train --config engine/training/configs/tiny-dlm-from-ar5-full.json
	$(BIN)/agentflow train --config engine/training/configs/tiny-dlm-from-ar5-stage2.json
	$(BIN)/agentflow train --config engine/training/configs/tiny-dlm-from-ar5-stage3.json
	$(BIN)/agentflow train --config engine/training/configs/tiny-dlm-from-ar5-stage4p.json
	$(BIN)/agentflow train --config engine/training/configs/tiny-dlm-from-ar5-stage5g.json
	$(BIN)/agentflow train --config engine/training/configs/tiny-dlm-stage5i.json
	$(BIN)/agentflow train --config engine/training/configs/tiny-dlm-stage5j.json
	$(BIN)/agentflow train --config engine/training/configs/tiny-ar-stage7e.json
	$(BIN)/agentflow train --config engine/training/configs/tiny-ar-stage7g.json
	$(BIN)/agentflow train --config engine/training/configs/tiny-ar-stage7i.json
	$(BIN)/agentflow train-ranker --out engine/weights/agentflow-tool-ranker

clean:
	rm -rf $(VENV) build *.egg-info
