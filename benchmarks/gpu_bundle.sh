#!/usr/bin/env bash
# Prepare, on the development machine, what benchmarks/gpu_check.sh needs on a GPU machine without a package
# registry (Python 3.12 there, PyTorch, NumPy, Numba, onnxruntime, transformers... already in its image):
#   .whl/      wheels of the packages its image lacks, pydantic's core built for its Python;
#   .devpkgs/  pure-Python folders copied from .venv (seqeval; jieba's __init__ and dict.txt only: 5 of its 42 MB);
#   .devdata/  the CoNLL-2000 corpus (from DATA, default ../shared/data).
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
cp "$site"/jieba/{__init__.py,_compat.py,dict.txt} .devpkgs/jieba/
cp -r "$site"/seqeval .devpkgs/ && find .devpkgs -name __pycache__ -prune -exec rm -rf {} +
cp -r "$data"/conll2000 .devdata/
du -sh .whl .devpkgs .devdata
