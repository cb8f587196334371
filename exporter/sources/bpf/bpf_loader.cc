#include "exporter/sources/bpf/bpf_loader.h"

#include <bpf/btf.h>
#include <time.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_join.h"
#include "exporter/common/file_reader.h"
#include "exporter/common/logging.h"

namespace sockpressure {
namespace {

int LibbpfPrint(enum libbpf_print_level level, const char* fmt, va_list args) {
  if (level == LIBBPF_DEBUG && !LogEnabled(LogLevel::kDebug)) return 0;
  std::string line(16384, '\0');  // verifier logs are long
  int n = std::vsnprintf(line.data(), line.size(), fmt, args);
  line.resize(n > 0 ? std::min<size_t>(static_cast<size_t>(n), line.size() - 1) : 0);
  while (!line.empty() && line.back() == '\n') line.pop_back();
  SP_LOG_DEBUG("libbpf: ", line);
  return 0;
}

}  // namespace

std::string Errno(int err) { return std::strerror(err < 0 ? -err : err); }

uint64_t MonotonicNs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

bool KallsymsHas(const std::string& procfs, absl::string_view sym) {
  absl::StatusOr<std::string> text = ReadFileToString(JoinPath(procfs, "kallsyms"));
  if (!text.ok()) return false;
  std::string needle = absl::StrCat(" ", sym, "\n");
  // "addr T sym\n" or "addr t sym\t[module]\n"
  return text->find(absl::StrCat(" T", needle)) != std::string::npos ||
         text->find(absl::StrCat(" t", needle)) != std::string::npos;
}

void RouteLibbpfLogs() { libbpf_set_print(LibbpfPrint); }

bool BpfEnv::HasBtfFunc(const char* name) const {
  return btf__find_by_name_kind(vmlinux, name, BTF_KIND_FUNC) > 0;
}

void ProbeLog::LogOnce() const {
  std::vector<std::string> attached;
  for (const ProbeStatus& p : probes_) {
    if (p.attached) attached.push_back(absl::StrCat(p.probe, "/", p.attach));
  }
  SP_LOG_INFO("eBPF probes attached: ", attached.empty() ? "none" : absl::StrJoin(attached, ", "));
  for (const std::string& s : skipped_) SP_LOG_INFO("eBPF tier skipped: ", s);
}

}  // namespace sockpressure
