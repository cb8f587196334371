// The eBPF programs in a build without them (SOCKPRESSURE_BPF=OFF, or no
// clang, bpftool or libbpf at build time): exporter/sources/bpf/CMakeLists.txt
// compiles this file instead of bpf_source.cc, tcp_census_source.cc and the
// loaders. The bpf and bpf_census collectors (bpf_collectors.cc) are the same
// in both builds; here they only ever say why there is nothing to attach.
#include "exporter/sources/bpf/bpf_source.h"
#include "exporter/sources/bpf/tcp_census_source.h"

namespace sockpressure {
namespace {

constexpr const char kNotBuiltIn[] = "not built in (SOCKPRESSURE_BPF=OFF or no clang/bpftool/libbpf at build time)";

}  // namespace

bool BpfBuiltIn() { return false; }

std::unique_ptr<BpfSource> NewBpfSource(const BpfOptions&) { return NewUnavailableBpfSource(kNotBuiltIn); }

std::unique_ptr<TcpCensusIter> TcpCensusIter::Open(std::string* why) {
  *why = kNotBuiltIn;
  return nullptr;
}

}  // namespace sockpressure
