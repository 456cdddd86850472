# Two entry points: `make run` (the main job on the bundled data) and `make test` (the test suite).
# Both create .venv when missing and install torch==2.13.0 first (a local CPU wheel on our machines),
# then the package, so pip never resolves torch from the registry.
PY := .venv/bin/python
STAMP := .venv/.installed

.PHONY: run test install browser clean models

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv .venv
	$(PY) -m pip install -q --disable-pip-version-check torch==2.13.0
	$(PY) -m pip install -q --disable-pip-version-check -e '.[test,serve,transformers,multilingual,export,ray]'
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	.venv/bin/seqlab demo --out runs/demo

# The named models under models/ (en-ner, en-ner-minilm, en-chunk, en-pos, zh-ner-resume, zh-ner-resume-e5,
# zh-ner-ontonotes, zh-ner-ontonotes-e5), trained from the configs on the shared corpora with the budgets in
# models/build.py (about 4 hours in all), then packaged with their model cards. A killed build continues where it
# stopped.
models: $(STAMP)
	$(PY) models/build.py train

# The web viewer's end-to-end test drives Debian's chromium through Playwright. Where the browser is missing and
# apt-get may install it (root, as on CI), it is installed; elsewhere the test is skipped and says why.
browser:
	@command -v chromium >/dev/null || command -v chromium-browser >/dev/null || \
	  { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) ; } || \
	  echo "note: no chromium (apt-get install chromium): the web viewer test will be skipped"

# The suite runs on up to 4 processes (pytest-xdist, one test file to each at a time), then the tests marked
# serial alone: their timeouts are about how long a process takes, which other processes beside it would change.
JOBS ?= $(shell n=$$(nproc 2>/dev/null || echo 1); [ $$n -gt 4 ] && n=4; echo $$n)

test: $(STAMP) browser
	.venv/bin/ruff check . && .venv/bin/ruff format --check .
	$(PY) -m pytest -q -p no:cacheprovider -n $(JOBS) --dist loadfile -m 'not slow and not serial'
	$(PY) -m pytest -q -p no:cacheprovider -m 'serial and not slow'

clean:
	rm -rf runs .pytest_cache
