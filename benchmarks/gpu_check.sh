#!/usr/bin/env bash
# The checks a session lent a CUDA machine runs there, in one call (the device time is short):
#   1. tests/test_cuda.py: the CRF on the GPU against the CPU, each architecture trained on the GPU;
#   2. speed on the GPU: BiLSTM-CRF, the PSA network without its fusion layers, PSA (benchmarks/speed.py --device cuda);
#   3. the GPU levers off against on (benchmarks/gpu_lever_ab.py): the CRF's training recursions and small batches'
#      Viterbi on the host, PSA's score blocks sized for the GPU;
#   4. a profile of a GPU training step and of batch-1 tagging (benchmarks/step_profile.py);
#   5. the whole suite, where training defaults to the GPU (train.device: auto).
# The machine has no registry: benchmarks/gpu_bundle.sh prepares, here, wheels in .whl/ (pydantic and its core for its
# Python, fastapi, ...) and as copied folders in .devpkgs/ (seqeval; jieba's __init__ and dict.txt only); the
# CoNLL-2000 corpus in .devdata/. GloVe (80 MB) does not travel: the speed runs use randomly initialised word
# vectors (throughput does not depend on their values) and the suite leaves out the one test of the packaged GloVe.
#   usage (on the GPU machine, in the repository root): bash benchmarks/gpu_check.sh [OUT]
set -u
out=${1:-${OUT:-runs/gpu-check}}
source benchmarks/gpu_setup.sh

echo "== tests/test_cuda.py"
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_cuda.py -rfEs 2>&1 | tee "$out/test-cuda.txt"

echo "== speed on the GPU"
timeout 180 python3 benchmarks/speed.py configs/chunking-bilstm-crf.yaml configs/psa/chunking-viii-no-fusion.yaml \
  configs/chunking-psa.yaml --data-root .devdata --device cuda --threads 4 --train-batches 300 \
  --set model.embedder.features.word.pretrained=null --out "$out/speed-gpu.json" > "$out/speed-gpu.log" 2>&1
tail -5 "$out/speed-gpu.log"
python3 - "$out/speed-gpu.json" <<'EOF'
import json, sys
runs = json.load(open(sys.argv[1]))
for r in runs:
    print(r["config"], "train", r["train"]["sentences_per_s"],
          {k: v["sentences_per_s"] for k, v in r["inference"].items()}, r.get("relative_to_first"))
EOF

echo "== GPU levers, off against on"
for run in "chunking-bilstm-crf host-crf" "chunking-bilstm-crf host-viterbi" "chunking-psa psa-blocks"; do
  set -- $run
  timeout 100 python3 benchmarks/gpu_lever_ab.py configs/$1.yaml --lever $2 --data-root .devdata --rounds 3 \
    --set model.embedder.features.word.pretrained=null --out "$out/lever-$2.json" > /dev/null 2>&1
  python3 -c "import json, sys; r = json.load(open(sys.argv[1])); print(r['lever'], r['on_over_off'], 'same tags', \
    r['same_tags'])" "$out/lever-$2.json"
done

echo "== where a GPU training step and batch-1 tagging go"
timeout 90 python3 benchmarks/step_profile.py configs/chunking-bilstm-crf.yaml --data-root .devdata --device cuda \
  --threads 4 --set model.embedder.features.word.pretrained=null --out "$out/step-profile.txt" > /dev/null 2>&1
head -c 3000 "$out/step-profile.txt"

echo "== the whole suite"
timeout "${SUITE_SECONDS:-200}" python3 -m pytest -q -p no:cacheprovider -n 8 -rfEs \
  --deselect tests/test_vectors.py::test_packaged_glove_6b_50d 2>&1 | tee "$out/suite.txt" | tail -40
