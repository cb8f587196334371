#include "exporter/sources/shared/census.h"

#include "absl/strings/str_cat.h"
#include "exporter/common/logging.h"

namespace sockpressure {

absl::Status TcpCensusResult::Check(absl::string_view collector, absl::string_view verb, bool* logged) const {
  if (namespaces == namespaces_failed) return absl::UnavailableError(absl::StrCat(collector, ": ", first_error));
  if (!first_error.empty() && !*logged) {
    *logged = true;
    SP_LOG_INFO(collector, ": ", namespaces_failed, " of ", namespaces, " network namespaces not ", verb,
                " (first: ", first_error, ")");
  }
  return absl::OkStatus();
}

}  // namespace sockpressure
