"""The docs run: every fenced code block of README.md and docs/*.md, on the bundled sample data.

A block is treated by its language:

- ``bash`` / ``sh``: a bash script (``set -euo pipefail``) run in the workspace below; ``seqlab`` is the venv's
  ``python -m seqlab``.
- ``console``: the lines starting with ``$ `` are the commands (prompt dropped); each other line is output the
  commands must print (on stdout or stderr; a ``...`` line stands for lines left out).
- ``python``: executed with ``exec`` in a fresh namespace, in a process of its own, the workspace as the working
  directory.
- ``yaml``: a config or a part of one, loaded by ``load_config`` (a part on top of ``configs/chunking-bilstm-crf.yaml``,
  or of the file a ``<!-- docs-test: extends FILE -->`` comment names), so every key shown exists and every value is
  valid.
- ``json`` / ``jsonl``: parsed.

An HTML comment right before a block changes that:

- ``<!-- docs-test: file NAME -->``: the block's text is also written to NAME in the workspace (a file the next
  blocks read, such as ``sentences.txt``); a ``text`` block needs this comment.
- ``<!-- docs-test: skip (REASON) -->``: not run (a command that trains for hours or never returns); the reason is
  required, and the skips are counted (at most :data:`MAX_SKIPS`).

The workspace mirrors the repository: ``configs/`` is the repository's (a link), ``../shared/data`` holds the shared
corpora's layout with a few sentences of the bundled CoNLL-2000 sample (:data:`SAMPLE_FILES`: ``conll2000/`` as it
is, ``conll2003/`` standing in for the NER corpus with chunk types for entity types; ``$SEQLAB_DATA`` points there
too), and the pages run in order, README.md first, in one workspace: a docs page may use what the README's tour made
(``runs/chunking/model``, ``sentences.txt``). Every command runs on one thread (the cores are shared).

What the test changes, to stay fast (nothing else):

- ``seqlab train`` and ``seqlab demo`` get ``--max-epochs 1`` after their arguments (it bounds ``--budget`` too), and
  ``load_config`` in Python blocks adds ``train.max_epochs=1``: one short epoch on the sample.
- ``seqlab serve`` runs in the background until the end of its page, on a free port that replaces ``8000`` in the
  page's shell blocks; the next command runs once it answers ``GET /health``.
- The named model ``en-ner`` is the repository's ``models/en-ner`` when it is there, else a stand-in: a tiny NER
  model trained here for one epoch on the sample (chunk types for entity types), found through ``$SEQLAB_MODELS``.

The commands and Python blocks are run by the tests' fork server (tests/forkserver.py): a process that has imported
seqlab (and torch) once forks a child per command, with the command's arguments, working directory, environment and
standard streams (a ``seqlab`` call costs milliseconds instead of seconds of imports). ``SEQLAB_TEST_FORK=0`` runs
each as a plain ``python -m seqlab`` (or ``python -c``) process instead.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from tests.forkserver import python_command, seqlab_command

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SAMPLE = ROOT / "seqlab" / "resources" / "conll2000"
MAX_SKIPS = 6
SHELL = {"bash", "sh", "console"}
CHECKED = {"python", "yaml", "json", "jsonl"}
BASE_CONFIG = "configs/chunking-bilstm-crf.yaml"
NAMED = "en-ner"
# workspace file -> (bundled sample file, first sentence, sentences, columns kept): a few sentences each
SAMPLE_FILES = {
    "conll2000": {"train.txt": ("train.txt", 0, 40, None), "test.txt": ("test.txt", 0, 20, None)},
    "conll2003": {
        "train.txt": ("train.txt", 0, 40, (0, 2)),
        "dev.txt": ("train.txt", 40, 10, (0, 2)),
        "test.txt": ("test.txt", 0, 20, (0, 2)),
    },
}
BLOCK_TIMEOUT_S = 300

FENCE = re.compile(r"^(`{3,})([\w-]*)\s*$")
MARK = re.compile(r"^<!--\s*docs-test:\s*(\w+)\s*(.*?)\s*-->\s*$")


# ----- the blocks ---------------------------------------------------------------------------------------------------
@dataclass
class Block:
    page: Path
    line: int  # of the opening fence, 1-based
    lang: str
    code: str
    marks: dict[str, str] = field(default_factory=dict)  # docs-test comment -> its argument

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    @property
    def skip(self) -> str | None:
        return self.marks.get("skip")


def blocks_of(page: Path) -> list[Block]:
    """The fenced blocks of a markdown page, with the docs-test comments right before each (blank lines between
    allowed)."""
    lines = page.read_text(encoding="utf-8").splitlines()
    out, marks, i = [], {}, 0
    while i < len(lines):
        mark, fence = MARK.match(lines[i]), FENCE.match(lines[i])
        if mark:
            marks[mark.group(1)] = mark.group(2)
        elif fence:
            ticks, start = fence.group(1), i
            i += 1
            body = []
            while i < len(lines) and lines[i].rstrip() != ticks:
                body.append(lines[i])
                i += 1
            out.append(Block(page, start + 1, fence.group(2).lower(), "\n".join(body) + "\n", marks))
            marks = {}
        elif lines[i].strip():
            marks = {}  # a comment applies to the block right after it
        i += 1
    return out


ALL_BLOCKS = [b for page in PAGES for b in blocks_of(page)]


def test_every_block_says_what_it_is():
    """Each block runs, is checked, is a file the next blocks read, or is skipped with a reason; skips are few."""
    unknown = [
        b.where for b in ALL_BLOCKS if b.lang not in SHELL | CHECKED and "file" not in b.marks and b.skip is None
    ]
    assert not unknown, f"blocks of no runnable language: give them one, or a docs-test comment: {unknown}"
    for b in ALL_BLOCKS:
        for key in b.marks:
            assert key in ("skip", "file", "extends"), f"{b.where}: unknown docs-test comment '{key}'"
        if "skip" in b.marks:
            assert re.fullmatch(r"\(\S.*\)", b.skip), f"{b.where}: a skip needs a reason: skip (why)"
        if "file" in b.marks:
            assert re.fullmatch(r"[\w.-]+(/[\w.-]+)*", b.marks["file"]), f"{b.where}: file needs a relative name"
    skips = [b for b in ALL_BLOCKS if b.skip is not None]
    assert len(skips) <= MAX_SKIPS, [f"{b.where} {b.skip}" for b in skips]
    assert len(ALL_BLOCKS) - len(skips) >= 20  # the pages have examples at all


def anchors(page: Path) -> set[str]:
    """The anchors GitHub makes of a page's headings: lower case, punctuation dropped, spaces as hyphens."""
    out = set()
    for line in page.read_text(encoding="utf-8").splitlines():
        heading = re.match(r"#{1,6}\s+(.*?)\s*$", line)
        if heading:
            out.add(re.sub(r"[^\w\- ]", "", heading.group(1).lower()).replace(" ", "-"))
    return out


def test_docs_links_resolve():
    """Every relative link of the pages points at a file that exists, and at a heading of it where it names one."""
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        text = re.sub(r"^(`{3,}).*?^\1", "", text, flags=re.DOTALL | re.MULTILINE)  # not inside code blocks
        for target, anchor in re.findall(r"\]\(([^)#\s]*)(?:#([^)\s]*))?\)", text):
            if "://" in target or target.startswith("mailto:"):
                continue
            path = (page.parent / target) if target else page
            assert path.exists(), f"{page.relative_to(ROOT)}: broken link {target}"
            if anchor:
                assert anchor in anchors(path), f"{page.relative_to(ROOT)}: no heading #{anchor} in {target or 'it'}"


def test_cli_page_has_every_command_and_option():
    """docs/cli.md has a section for each subcommand, and each of its options is named in that section."""
    import argparse

    from seqlab.cli import build_parser

    page = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    sections = dict(re.findall(r"^## (\S+)\n(.*?)(?=^## |\Z)", page, flags=re.DOTALL | re.MULTILINE))
    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    missing = [f"a section '## {name}'" for name in commands if name not in sections]
    for name, sub in commands.items():
        for action in sub._actions:
            missing += [
                f"{name} {o}"
                for o in action.option_strings
                if o.startswith("--") and o != "--help" and o not in sections.get(name, "")
            ]
    missing += [
        o for a in parser._actions for o in a.option_strings if o.startswith("--") and o != "--help" and o not in page
    ]
    assert not missing, f"docs/cli.md does not say: {missing}"


# ----- the workspace ------------------------------------------------------------------------------------------------
# The shell blocks' prelude: `seqlab` runs the CLI; train and demo one epoch; serve in the background, waited for.
PRELUDE = r"""
set -euo pipefail
_seqlab() {  # $SEQLAB_DOCS_SEQLAB: the command line that runs `python -m seqlab` (tests/forkserver.py)
  local cmd; read -r -a cmd <<<"$SEQLAB_DOCS_SEQLAB"; "${cmd[@]}" "$@"
}
_seqlab_exec() {  # in a background job: the job's process becomes seqlab's, so that $! is the one to stop
  local cmd; read -r -a cmd <<<"$SEQLAB_DOCS_SEQLAB"; exec "${cmd[@]}" "$@"
}
_command() {  # the first argument that is no option: the subcommand
  local a; for a in "$@"; do case "$a" in -*) ;; *) echo "$a"; return;; esac; done
}
seqlab() {
  case "$(_command "$@")" in
    train|demo) _seqlab "$@" --max-epochs 1 ;;
    serve)
      local args=("$@") has_port=0 a
      for a in "$@"; do [ "$a" = --port ] && has_port=1; done
      [ $has_port = 1 ] || args+=(--port "$SEQLAB_DOCS_PORT")
      _seqlab_exec "${args[@]}" >>"$SEQLAB_DOCS_WORK/.serve.log" 2>&1 &
      echo $! >>"$SEQLAB_DOCS_WORK/.serve.pids"
      local i; for i in $(seq 600); do
        curl -sf "http://127.0.0.1:$SEQLAB_DOCS_PORT/health" >/dev/null 2>&1 && return 0
        kill -0 $! 2>/dev/null || { echo "seqlab serve exited:"; cat "$SEQLAB_DOCS_WORK/.serve.log"; return 1; } >&2
        sleep 0.1
      done
      echo "seqlab serve did not answer in 60 s" >&2; return 1 ;;
    *) _seqlab "$@" ;;
  esac
}
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def sentences(name: str, start: int, n: int, columns: tuple[int, ...] | None = None) -> str:
    """Sentences start..start+n of the bundled sample's file, each followed by a blank line (as the shared
    corpora), with only ``columns`` of each line if given."""
    blocks = (SAMPLE / name).read_text(encoding="utf-8").strip("\n").split("\n\n")[start : start + n]
    if columns:
        blocks = ["\n".join(" ".join(line.split(" ")[c] for c in columns) for line in b.splitlines()) for b in blocks]
    return "".join(b + "\n\n" for b in blocks)


def cut_sample(data: Path) -> None:
    """The shared corpora's layout, with a few sentences of the bundled CoNLL-2000 sample: conll2000/ as it is
    (word POS chunk), and conll2003/ standing in for the NER corpus (word and chunk tag: chunk types for entity
    types)."""
    for folder, files in SAMPLE_FILES.items():
        (data / folder).mkdir(parents=True)
        for name, (source, start, n, columns) in files.items():
            (data / folder / name).write_text(sentences(source, start, n, columns), encoding="utf-8")


STAND_IN = """\
# A stand-in for the named model en-ner while models/en-ner is not there: the tests' tiny NER model.
task: ner
data: {train: conll2003/train.txt, dev: conll2003/dev.txt, test: conll2003/test.txt, scheme: BIO, tokenizer: english}
model:
  embedder:
    features:
      word: {type: words, dim: 16, pretrained: null}
      char: {type: chars, dim: 8, hidden: 8, encoder: cnn}
      casing: {type: casing, dim: 4}
    dropout: 0.0
  encoders: [{type: bilstm, hidden: 32, dropout: 0.0}]
  decoder: {type: crf}
train: {optimizer: adam, lr: 0.01, lr_decay: 0.0, batch_size: 8, max_epochs: 1, seed: 1}
"""
STAND_IN_CARD = {
    "name": NAMED,
    "language": "en",
    "task": "ner",
    "description": "a stand-in for the docs test: one epoch on 40 sentences of the bundled sample",
    "data": {"name": "the bundled CoNLL-2000 sample"},
    "recipe": {"config": "tests/test_docs.py"},
}


def stand_in_model(ws: Workspace) -> Path:
    """A folder of model folders holding a tiny model named en-ner, trained by the fork server."""
    (ws.root / "stand-in.yaml").write_text(STAND_IN, encoding="utf-8")
    ws.seqlab("-q", "train", ws.root / "stand-in.yaml", "--out", ws.root / "stand-in")
    models = ws.root / "models"
    shutil.copytree(ws.root / "stand-in" / "model", models / NAMED)
    (models / NAMED / "card.json").write_text(json.dumps(STAND_IN_CARD), encoding="utf-8")
    (models / NAMED / "card.md").write_text(
        f"# {NAMED} (stand-in)\n\n{STAND_IN_CARD['description']}\n", encoding="utf-8"
    )
    return models


class Workspace:
    def __init__(self, root: Path):
        self.root = root
        self.work = root / "work"
        self.work.mkdir()
        (self.work / "configs").symlink_to(ROOT / "configs")
        self.data = root / "shared" / "data"
        cut_sample(self.data)
        (root / "tools").mkdir()
        # one thread a command: the docs run for their results, on cores other work shares (two threads there
        # slowed a tiny training tenfold)
        self.env = dict(
            os.environ,
            PYTHONPATH=str(ROOT),
            SEQLAB_DATA=str(self.data),
            OMP_NUM_THREADS="1",
            MKL_NUM_THREADS="1",
            SEQLAB_DOCS_WORK=str(self.work),
        )
        seqlab = seqlab_command(self.env)
        assert not any(re.search(r"\s", part) for part in seqlab), seqlab  # the prelude splits it at spaces
        self.env["SEQLAB_DOCS_SEQLAB"] = " ".join(seqlab)
        self.done: set[Path] = set()
        self.port = 0
        try:
            if not _is_model(ROOT / "models" / NAMED):
                self.env["SEQLAB_MODELS"] = str(stand_in_model(self))
        except BaseException:
            self.close()
            raise

    def seqlab(self, *args) -> None:
        proc = subprocess.run(
            [*seqlab_command(self.env), *map(str, args)],
            cwd=self.work,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=BLOCK_TIMEOUT_S,
            check=False,
        )
        assert proc.returncode == 0, f"seqlab {' '.join(map(str, args))}: {proc.stderr[-3000:]}"

    def stop_servers(self) -> None:
        pids = self.work / ".serve.pids"
        if not pids.is_file():
            return
        for pid in pids.read_text().split():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), 15)
        deadline = time.monotonic() + 20
        for pid in pids.read_text().split():
            while time.monotonic() < deadline:
                try:
                    os.kill(int(pid), 0)
                except ProcessLookupError:
                    break
                time.sleep(0.05)
        pids.unlink()

    def close(self) -> None:
        self.stop_servers()


def _is_model(path: Path) -> bool:
    return all((path / n).is_file() for n in ("config.json", "vocab.json", "model.safetensors"))


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    ws = Workspace(tmp_path_factory.mktemp("docs"))
    yield ws
    ws.close()


# ----- running the blocks -------------------------------------------------------------------------------------------
def shell_script(block: Block) -> str:
    if block.lang != "console":
        return block.code
    commands, lines = [], block.code.splitlines()
    for line in lines:
        if line.startswith("$ "):
            commands.append(line[2:])
        elif commands and commands[-1].endswith("\\") and not line.startswith("$"):
            commands.append(line)  # a continued command
    return "\n".join(commands) + "\n"


def console_output(block: Block) -> list[str]:
    """The output lines a console block shows (not the commands, their continuations, or '...')."""
    out, continued = [], False
    for line in block.code.splitlines():
        if line.startswith("$ ") or continued:  # a command, or the continuation of one
            continued = line.endswith("\\")
        elif line.strip() and line.strip() != "...":
            out.append(line.rstrip())
    return out


def run_shell(block: Block, ws: Workspace) -> None:
    script = re.sub(r"\b8000\b", str(ws.port), shell_script(block))
    env = dict(ws.env, SEQLAB_DOCS_PORT=str(ws.port))
    proc = subprocess.run(
        ["bash", "-c", PRELUDE + script],
        cwd=ws.work,
        env=env,
        capture_output=True,
        text=True,
        timeout=BLOCK_TIMEOUT_S,
        check=False,
    )
    shown = f"{textwrap.indent(script, '  ')}\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"
    assert proc.returncode == 0, f"{block.where}: exit {proc.returncode}\n{shown}"
    printed = {line.rstrip() for line in (proc.stdout + proc.stderr).splitlines()}
    for line in console_output(block) if block.lang == "console" else []:
        assert line in printed, f"{block.where}: the output shows '{line}', the commands did not print it\n{shown}"


def run_python(block: Block, ws: Workspace) -> None:
    """exec in a fresh namespace, in a process of its own (forked from the server, or a new one)."""
    code = ws.root / "tools" / "block.py"
    code.write_text(block.code, encoding="utf-8")
    runner = [
        *python_command(ws.env),
        "-c",
        (
            "import sys, seqlab; real = seqlab.load_config; "
            "seqlab.load_config = lambda p, o=None: real(p, [*(o or []), 'train.max_epochs=1']); "
            "exec(compile(open(sys.argv[1]).read(), sys.argv[2], 'exec'), {'__name__': '__docs__'})"
        ),
    ]
    proc = subprocess.run(
        [*runner, str(code), block.where],
        cwd=ws.work,
        env=ws.env,
        capture_output=True,
        text=True,
        timeout=BLOCK_TIMEOUT_S,
        check=False,
    )
    assert proc.returncode == 0, (
        f"{block.where}: exit {proc.returncode}\n{textwrap.indent(block.code, '  ')}\n"
        f"stdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"
    )


def check_yaml(block: Block, ws: Workspace) -> None:
    from seqlab import load_config

    raw = yaml.safe_load(block.code)
    assert isinstance(raw, dict), f"{block.where}: a yaml block holds a config or a part of one"
    path = ws.work / ".docs-block.yaml"
    if "data" in raw or "extends" in raw:
        path = ws.work / block.marks.get("file", ".docs-block.yaml")
        text = block.code
    else:
        base = ROOT / block.marks.get("extends", BASE_CONFIG)
        text = f"extends: {base}\n{block.code}"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    load_config(path)


def run_block(block: Block, ws: Workspace) -> None:
    if "file" in block.marks:
        target = ws.work / block.marks["file"]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(block.code, encoding="utf-8")
    if block.lang in SHELL:
        run_shell(block, ws)
    elif block.lang == "python":
        run_python(block, ws)
    elif block.lang == "yaml":
        check_yaml(block, ws)
    elif block.lang == "json":
        json.loads(block.code)
    elif block.lang == "jsonl":
        for line in block.code.splitlines():
            json.loads(line)


def run_page(page: Path, ws: Workspace) -> None:
    if page in ws.done:
        return
    ws.done.add(page)
    ws.port = free_port()
    try:
        for block in blocks_of(page):
            if block.skip is None:
                run_block(block, ws)
    finally:
        ws.stop_servers()


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_page_runs(page, workspace):
    if page != PAGES[0]:
        run_page(PAGES[0], workspace)  # the README's tour makes what the other pages use
    run_page(page, workspace)
