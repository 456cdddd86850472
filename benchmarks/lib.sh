# Shell functions shared by the benchmark scripts; source it from the repository root: . benchmarks/lib.sh

paper_or_default() {  # the config as it was run: its paper recipe where the default moved to the CPU one (issue 37)
  if [ -f "configs/paper/$1.yaml" ]; then echo "configs/paper/$1.yaml"; else echo "configs/$1.yaml"; fi
}
