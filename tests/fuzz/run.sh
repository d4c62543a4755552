#!/usr/bin/env bash
# Builds wheelforge's libFuzzer targets with clang and runs each for a bounded time.
#
#   tests/fuzz/run.sh [SECONDS_PER_TARGET]     (default 20)
#
# Needs the Debian packages clang and libclang-rt-14-dev besides the project's own build
# dependencies. Environment:
#   WF_FUZZ_BUILD_DIR  build directory (default: build-fuzz in the repository root)
#   WF_FUZZ_JOBS       parallel compile jobs and targets fuzzed at once (default: nproc)
#   WF_FUZZ_TARGETS    space-separated subset of targets to run (default: all)
# The corpus grows in $WF_FUZZ_BUILD_DIR/corpus/<target> across runs; seeds are regenerated
# each run by make_seeds.py. Exits 1 when a target crashes, leaks, hits undefined behaviour,
# times out on one input or runs out of memory, and prints the reproducer's path:
#   $WF_FUZZ_BUILD_DIR/tests/fuzz/fuzz_<target> <reproducer>    replays it.
set -euo pipefail

seconds=${1:-20}
case "$seconds" in
  '' | *[!0-9]*) echo "usage: $0 [SECONDS_PER_TARGET]" >&2; exit 2 ;;
esac

root=$(cd "$(dirname "$0")/../.." && pwd)
build=${WF_FUZZ_BUILD_DIR:-$root/build-fuzz}
jobs=${WF_FUZZ_JOBS:-$(nproc)}
all_targets="filename version variant variant_json metadata negotiate upstream multipart archive elf http_read handlers upload framing"
targets=${WF_FUZZ_TARGETS:-$all_targets}

for tool in clang++ cmake /usr/bin/python3; do
  command -v "$tool" > /dev/null || { echo "fuzz: $tool not found (apt-get install clang)" >&2; exit 2; }
done

# A build directory already configured with WF_BUILD_FUZZ=ON (CI's sanitizer build, which also
# holds the unit tests) is used as it is; any other is configured for fuzzing alone.
if grep -qs '^WF_BUILD_FUZZ:BOOL=ON$' "$build/CMakeCache.txt"; then
  echo "==> using $build as configured (WF_BUILD_FUZZ=ON)"
else
  echo "==> configuring $build (clang, libFuzzer, ASan + UBSan)"
  # -O1 keeps the sanitizers fast enough to fuzz while leaving assertions (no NDEBUG) on.
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g" \
    -DCMAKE_CXX_COMPILER=clang++ -DWF_BUILD_FUZZ=ON -DWF_BUILD_TESTS=OFF -DWF_WERROR=OFF > /dev/null
fi

echo "==> building the fuzz targets"
build_targets=()
for t in $targets; do build_targets+=(--target "fuzz_$t"); done
cmake --build "$build" "${build_targets[@]}" -j"$jobs"

seeds="$build/seeds"
rm -rf "$seeds"
/usr/bin/python3 "$root/tests/fuzz/make_seeds.py" "$seeds"

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# Runs one target; its log goes to logs/<target>.log and its findings to artifacts/<target>/.
fuzz_one() {
  local t=$1
  local corpus="$build/corpus/$t" artifacts="$build/artifacts/$t/"
  mkdir -p "$corpus" "$artifacts" "$build/logs"
  local dict=()
  if [ -f "$root/tests/fuzz/$t.dict" ]; then dict=(-dict="$root/tests/fuzz/$t.dict"); fi
  # The hard wall-clock cap guards against a hang that libFuzzer's own timers miss.
  timeout --kill-after=10 $((seconds + 60)) "$build/tests/fuzz/fuzz_$t" \
    -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
    -artifact_prefix="$artifacts" "${dict[@]}" "$corpus" "$seeds/$t" \
    > "$build/logs/$t.log" 2>&1
}

echo "==> fuzzing each target for ${seconds}s (${jobs} at a time)"
rm -rf "$build/artifacts"
status_dir=$(mktemp -d)
trap 'rm -rf "$status_dir"' EXIT
for t in $targets; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
  ( if fuzz_one "$t"; then echo 0 > "$status_dir/$t"; else echo $? > "$status_dir/$t"; fi ) &
done
wait

failed=()
for t in $targets; do
  rc=$(cat "$status_dir/$t" 2> /dev/null || echo 1)
  runs=$(grep -o 'Done [0-9]* runs' "$build/logs/$t.log" | tail -1 || true)
  if [ "$rc" = 0 ]; then
    echo "  ok    $t (${runs:-no run count})"
    continue
  fi
  failed+=("$t")
  echo "  FAIL  $t (exit $rc), log: $build/logs/$t.log"
  grep -E 'ERROR:|invariant failed|SUMMARY:|runtime error:' "$build/logs/$t.log" | head -5 | sed 's/^/        /'
  for f in "$build/artifacts/$t"/*; do
    [ -e "$f" ] || continue
    echo "        reproducer: $f"
    echo "        replay:     $build/tests/fuzz/fuzz_$t $f"
  done
done

if [ ${#failed[@]} -gt 0 ]; then
  echo "==> fuzzing found problems in: ${failed[*]}" >&2
  exit 1
fi
echo "==> no findings"
