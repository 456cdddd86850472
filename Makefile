# Two entry points: `make run` (the main job on the bundled data) and `make test` (the test suite).
# Both create .venv when missing and install torch==2.13.0 first (a local CPU wheel on our machines),
# then the package, so pip never resolves torch from the registry.
PY := .venv/bin/python
STAMP := .venv/.installed

.PHONY: run test install clean

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv .venv
	$(PY) -m pip install -q --disable-pip-version-check torch==2.13.0
	$(PY) -m pip install -q --disable-pip-version-check -e '.[test,serve,transformers]'
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	.venv/bin/seqlab demo --out runs/demo

test: $(STAMP)
	$(PY) -m pytest -q -p no:cacheprovider

clean:
	rm -rf runs .pytest_cache
