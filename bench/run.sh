#!/usr/bin/env bash
# `make bench`: runs every benchmark of bench/ against the build in $1. Each benchmark prints its own
# ratios against a baseline measured in the same run (these machines are noisy).
set -euo pipefail
build_dir=$(realpath "${1:-build}")
cd "$(dirname "${BASH_SOURCE[0]}")"
shopt -s nullglob
benches=("$build_dir"/bench/bench_*)
if ((${#benches[@]} == 0)); then
  echo "bench: no benchmarks are built yet"
  exit 0
fi
for bench in "${benches[@]}"; do
  echo "== $(basename "$bench")"
  "$bench"
done
