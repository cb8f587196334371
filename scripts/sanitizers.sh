#!/usr/bin/env bash
# Sanitizer builds, run by scripts/test.sh after the Release tests:
#   build-asan: AddressSanitizer + UndefinedBehaviorSanitizer over the unit,
#               end-to-end, identity and alerting tests (not bpf/lab: those
#               load kernel programs or boot VMs, which the sanitizers add
#               nothing to);
#   build-tsan: ThreadSanitizer over the threaded parts: the unit tests
#               (sampler, HTTP server, cgroup churn), identity and alerting.
# Any report fails the run (halt_on_error, no recovery).
#   scripts/sanitizers.sh            # both
#   scripts/sanitizers.sh asan|tsan  # one
set -euo pipefail
cd "$(dirname "$0")/.."
which="${1:-all}"
jobs="$(nproc)"
common=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=gcc -DCMAKE_CXX_COMPILER=g++)

# Leaks: the exporter's process-lifetime singletons (protobuf descriptors,
# gRPC-free absl flags) are not leaks worth failing on, but real ones are:
# keep detection on.
export ASAN_OPTIONS="halt_on_error=1:abort_on_error=0:detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1"

if [ "$which" = all ] || [ "$which" = asan ]; then
  flags="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
  cmake -S . -B build-asan "${common[@]}" -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_C_FLAGS="$flags" \
    -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined"
  cmake --build build-asan -j"$jobs" --target sockpressure_exporter unit_tests identity_tests alerting_tests
  # Tests that bound RSS skip that bound (saying why): ASan's quarantine keeps freed memory.
  # Left out: the tests of the project's own tools, which run no agent code (the lab's verdict
  # logic, the README's flag table, the version strings of the deployment files).
  SOCKPRESSURE_SANITIZER=asan \
    ctest --test-dir build-asan --output-on-failure --timeout 600 -j"$jobs" -L 'unit|e2e|identity|alerting' -LE 'bpf|lab' \
    -E '^(lab_assess|e2e_readme_flags|e2e_version)$'
fi

if [ "$which" = all ] || [ "$which" = tsan ]; then
  flags="-fsanitize=thread -fno-omit-frame-pointer"
  cmake -S . -B build-tsan "${common[@]}" -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_C_FLAGS="$flags" \
    -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=thread"
  cmake --build build-tsan -j"$jobs" --target unit_tests identity_tests alerting_tests
  # TSan's shadow memory layout does not fit the high mmap randomisation of
  # recent kernels; running without ASLR (personality, not a sysctl) does.
  setarch "$(uname -m)" -R ctest --test-dir build-tsan --output-on-failure --timeout 600 -j"$jobs" -L 'unit|identity|alerting' \
    -E '^alerting\.|^lab_assess$'
fi
