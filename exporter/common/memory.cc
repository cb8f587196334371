#include "exporter/common/memory.h"

#include <atomic>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace sockpressure {
namespace {
std::atomic<uint64_t> returns{0};
}  // namespace

void ReturnFreeMemory() {
  returns.fetch_add(1, std::memory_order_relaxed);
#if defined(__GLIBC__)
  ::malloc_trim(0);
#endif
}

uint64_t FreeMemoryReturns() { return returns.load(std::memory_order_relaxed); }

}  // namespace sockpressure
