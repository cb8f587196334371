// Lookups in a Sample for the bpf collector's tests: the probe loaded under
// a name, a program's stats by name. Null when absent.
#pragma once

#include <string>
#include <vector>

#include "exporter/sources/sample.h"

namespace sockpressure::testing {

inline const ProbeStatus* LoadedProbe(const std::vector<ProbeStatus>& ps, const std::string& probe) {
  for (const ProbeStatus& p : ps) {
    if (p.probe == probe && p.loaded) return &p;
  }
  return nullptr;
}

inline const ProgramStats* ProgramNamed(const Sample& s, const std::string& name) {
  for (const ProgramStats& p : s.program_stats) {
    if (p.program == name) return &p;
  }
  return nullptr;
}

}  // namespace sockpressure::testing
