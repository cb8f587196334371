#include "exporter/identity/pod_index.h"

#include <google/protobuf/util/json_util.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "exporter/identity/pod_list.pb.h"

namespace sockpressure {
namespace {

void AddStatuses(const google::protobuf::RepeatedPtrField<kubelet::ContainerStatus>& statuses, PodInfo* pod) {
  for (const kubelet::ContainerStatus& s : statuses) {
    // A container that has not started yet has no ID, and no cgroup either.
    if (s.container_id().empty() || s.name().empty()) continue;
    pod->containers[StripContainerIdScheme(s.container_id())] = s.name();
  }
}

}  // namespace

std::string StripContainerIdScheme(absl::string_view id) {
  size_t pos = id.find("://");
  if (pos != absl::string_view::npos) id.remove_prefix(pos + 3);
  return absl::AsciiStrToLower(id);
}

absl::StatusOr<PodIndex> ParsePodList(absl::string_view json) {
  kubelet::PodList list;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  auto status = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(json.data(), json.size()), &list, options);
  if (!status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("parsing pod list: ", std::string(status.message())));
  }
  PodIndex index;
  for (const kubelet::Pod& p : list.items()) {
    if (p.metadata().uid().empty()) continue;
    PodInfo pod;
    pod.uid = absl::AsciiStrToLower(p.metadata().uid());
    pod.namespace_name = p.metadata().namespace_();
    pod.name = p.metadata().name();
    pod.qos = absl::AsciiStrToLower(p.status().qos_class());
    AddStatuses(p.status().container_statuses(), &pod);
    AddStatuses(p.status().init_container_statuses(), &pod);
    AddStatuses(p.status().ephemeral_container_statuses(), &pod);
    index[pod.uid] = std::move(pod);
  }
  return index;
}

}  // namespace sockpressure
