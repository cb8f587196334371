#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) and runs each for a
# bounded time from its seed corpus in tests/fuzz/corpus (the seeds are not
# modified: new inputs go to a scratch copy). A crash, leak, sanitizer report
# or timeout fails the run and leaves the reproducer in build-fuzz/artifacts;
# add it to the seed corpus and a regression test with the fix.
#   scripts/fuzz.sh                 # every target, FUZZ_SECONDS each (default 15)
#   FUZZ_SECONDS=600 scripts/fuzz.sh cgroupfs
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${FUZZ_SECONDS:-15}"
targets=("$@")
[ "${#targets[@]}" -gt 0 ] || targets=(cgroupfs procfs web_config pod_list exposition)
flags="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -g"
cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Release -DSOCKPRESSURE_FUZZ=ON \
  -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 \
  -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined"
cmake --build build-fuzz -j"$(nproc)" --target "${targets[@]/#/fuzz_}"
mkdir -p build-fuzz/artifacts
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
for t in "${targets[@]}"; do
  work="build-fuzz/corpus-$t"
  rm -rf "$work"; mkdir -p "$work"
  out="build-fuzz/fuzz-$t.log"
  if ! "build-fuzz/tests/fuzz/fuzz_$t" -max_total_time="$seconds" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
      -artifact_prefix="build-fuzz/artifacts/$t-" "$work" "tests/fuzz/corpus/$t" >"$out" 2>&1; then
    tail -50 "$out"
    echo "FAIL: fuzz_$t found a crash (reproducer in build-fuzz/artifacts)" >&2
    exit 1
  fi
  echo "fuzz_$t: $(grep -Eo '#[0-9]+ *DONE.*' "$out" | tail -1 || tail -1 "$out")"
done
