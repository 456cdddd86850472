set -u
out=$OUT
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir .whl/*.whl || exit 1
site=$(python3 -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
cp -r .devpkgs/* "$site"/ && echo "$PWD" > "$site/seqlab-checkout.pth" || exit 1
export PYTHONUNBUFFERED=1
date -u
echo "== suite"
timeout 170 python3 -m pytest -q -p no:cacheprovider -n 8 -rfEs --deselect tests/test_vectors.py::test_packaged_glove_6b_50d > $out/suite2.txt 2>&1
echo "suite rc $?"; grep -E "passed|failed" $out/suite2.txt | tail -2; grep -E "^(FAILED|ERROR)" $out/suite2.txt | cut -c1-200
date -u
for rep in 2 3; do
timeout 75 python3 benchmarks/speed.py configs/chunking-bilstm-crf.yaml configs/psa/chunking-viii-no-fusion.yaml configs/chunking-psa.yaml --data-root .devdata --device cuda --threads 4 --train-batches 300 --no-text --test-limit 1000 --set model.embedder.features.word.pretrained=null --out $out/speed-gpu-rep$rep.json > $out/speed-rep$rep.log 2>&1
echo "rep $rep rc $?"; date -u
done
