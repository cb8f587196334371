// Factories of the small procfs collectors, one per file.
#pragma once

#include <memory>

#include "exporter/sources/source.h"

namespace sockpressure {

std::unique_ptr<Source> NewKernelSource(const Paths& paths);    // kernel_source.cc
std::unique_ptr<Source> NewSwapsSource(const Paths& paths);     // swaps_source.cc
std::unique_ptr<Source> NewNetstatSource(const Paths& paths);   // netstat_source.cc
std::unique_ptr<Source> NewSockstatSource(const Paths& paths);  // sockstat_source.cc
std::unique_ptr<Source> NewVmstatSource(const Paths& paths);    // vmstat_source.cc

}  // namespace sockpressure
