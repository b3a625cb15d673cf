#!/usr/bin/env bash
# Runs every libFuzzer target of a SKIPPR_FUZZ build for FUZZ_SECONDS each (default 60), FUZZ_JOBS
# at a time (default 2; "all": every target at once, sharing the cores), and prints the executions per target. New inputs grow a corpus under
# <build>/fuzz/corpus/<target>/ (not committed); the committed seeds and regressions are read
# only. A target that breaks an invariant or crashes leaves its input in
# <build>/fuzz/artifacts/<target>/ and makes this script fail.
#   tests/fuzz/run.sh [build-dir] [target...]
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build_dir=$(cd "${1:-$root/build-asan}" && pwd)
shift || true
seconds=${FUZZ_SECONDS:-60}
jobs=${FUZZ_JOBS:-2}
targets=("$@")
((${#targets[@]})) || targets=(json_source csv_source wal_segment config dotenv pgoutput json_lines_run)
[[ "$jobs" == all ]] && jobs=${#targets[@]}
work="$build_dir/fuzz"

run_target() {
  local target=$1
  local binary="$build_dir/tests/fuzz/${target}_fuzzer"
  local corpus="$work/corpus/$target" artifacts="$work/artifacts/$target"
  mkdir -p "$corpus" "$artifacts"
  local inputs=("$corpus")
  for kind in seeds regressions; do
    [[ -d "$root/tests/fuzz/$target/$kind" ]] && inputs+=("$root/tests/fuzz/$target/$kind")
  done
  local options=(-max_total_time="$seconds" -print_final_stats=1 -timeout=60 -rss_limit_mb=4096
                 -close_fd_mask=1 -artifact_prefix="$artifacts/")
  [[ -f "$root/tests/fuzz/$target/dictionary" ]] && options+=(-dict="$root/tests/fuzz/$target/dictionary")
  "$binary" "${options[@]}" "${inputs[@]}" > "$work/$target.log" 2>&1
  echo $? > "$work/$target.rc"
}

mkdir -p "$work"
for target in "${targets[@]}"; do
  if [[ ! -x "$build_dir/tests/fuzz/${target}_fuzzer" ]]; then
    echo "fuzz: $build_dir/tests/fuzz/${target}_fuzzer is missing (build the 'fuzzers' target of a SKIPPR_FUZZ=ON build)" >&2
    exit 2
  fi
done
echo "fuzz: ${#targets[@]} targets, ${seconds} s each, ${jobs} at a time"
running=0
for target in "${targets[@]}"; do
  if ((running >= jobs)); then
    wait -n
    running=$((running - 1))
  fi
  run_target "$target" &
  running=$((running + 1))
done
wait

failed=0
printf '%-12s %12s %10s %8s  %s\n' target executions exec/s corpus result
for target in "${targets[@]}"; do
  log="$work/$target.log"
  executions=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | tail -1 | grep -o '[0-9]*$')
  per_second=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | tail -1 | grep -o '[0-9]*$')
  corpus=$(find "$work/corpus/$target" -type f | wc -l)
  result=ok
  if [[ "$(cat "$work/$target.rc")" != 0 ]]; then
    result="FAILED (exit $(cat "$work/$target.rc")): $log; inputs in $work/artifacts/$target/"
    failed=1
  fi
  printf '%-12s %12s %10s %8s  %s\n' "$target" "${executions:-?}" "${per_second:-?}" "$corpus" "$result"
done
if ((failed)); then
  for target in "${targets[@]}"; do
    [[ "$(cat "$work/$target.rc")" == 0 ]] && continue
    echo "----- $target: the end of $work/$target.log"
    grep -v '^#[0-9]' "$work/$target.log" | tail -40
  done
fi
exit $failed
