// Returning freed heap memory to the kernel after a large release (thousands
// of cgroups gone, a large /metrics body dropped).
#pragma once

#include <cstdint>

namespace sockpressure {

// glibc keeps freed pages in its arena, so the RSS of a process that once
// held a large heap stays at its high-water mark; this hands every whole
// free page back. It walks the whole heap: call it when a large holder has
// just let go, not periodically.
void ReturnFreeMemory();
// How many times ReturnFreeMemory() ran in this process (tests).
uint64_t FreeMemoryReturns();

}  // namespace sockpressure
