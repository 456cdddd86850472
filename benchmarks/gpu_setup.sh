# Sourced by the scripts that run on a GPU machine (gpu_check.sh, gpu_recipes.sh), in the repository root, with $out
# set: installs what benchmarks/gpu_bundle.sh prepared into the image's own environment, puts the checkout on its
# path through a .pth file (the suite's subprocesses, python -m seqlab and data-parallel ranks, then find everything
# too), and writes what the machine is to $out/machine.txt.
mkdir -p "$out"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir .whl/*.whl || exit 1
site=$(python3 -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
cp -r .devpkgs/* "$site"/ && echo "$PWD" > "$site/seqlab-checkout.pth" || exit 1
export PYTHONUNBUFFERED=1
{ date -u; nvidia-smi -L; nproc
  python3 -c "import torch, numpy, numba; print('torch', torch.__version__, 'cuda', torch.version.cuda,
  torch.cuda.get_device_name(), 'numpy', numpy.__version__, 'numba', numba.__version__)"; } 2>&1 | tee "$out/machine.txt"
