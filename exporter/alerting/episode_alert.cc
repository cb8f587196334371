// The alerts the agent pushes for an episode: the label set of the rules'
// SockPressureTCPThrottled / ...Critical, so that Alertmanager deduplicates the
// pushed and the rule-based alert, and the annotations a human reads.
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "exporter/common/cgroup_label.h"
#include "exporter/alerting/alertmanager.h"
#include "exporter/common/label_escape.h"

namespace sockpressure {

std::string DefaultAlertInstance(absl::string_view node_name, absl::string_view host_port) {
  return std::string(node_name.empty() ? host_port : node_name);
}

AlertmanagerPusher::Alert AlertmanagerPusher::NewAlert(const Episode& e, bool critical) const {
  Alert a;
  a.episode_id = e.id;
  a.starts_ms = e.start_ms;
  // Same label set as the rule in alerts/sockpressure-rules.yaml, so that
  // Alertmanager deduplicates the two paths (instance/job are what
  // Prometheus adds; they come from flags).
  a.labels["alertname"] = critical ? absl::StrCat(options_.alertname, "Critical") : options_.alertname;
  a.labels["severity"] = critical ? "critical" : options_.severity;
  // An annotation, as in the rules: as a label, a switch of the tripping
  // signal would be a new alert (resolve, then page again).
  a.annotations["signal"] = std::string(EpisodeSignalLabel(e));
  a.labels["cgroup"] = EscapeLabelValue(CgroupLabel(e.cgroup));  // as in the metrics
  for (const auto& [k, v] : e.identity) a.labels[k] = v;
  if (!options_.instance.empty()) a.labels["instance"] = options_.instance;
  for (const auto& [k, v] : options_.extra_labels) a.labels[k] = v;
  const std::string pod = NamespacedPod(LabelValue(e.identity, "namespace"), LabelValue(e.identity, "pod"));
  a.annotations["summary"] = critical
                                 ? "TCP receive windows are throttled by memcg socket pressure most of the time."
                                 : "TCP receive windows are throttled by memcg socket pressure.";
  a.annotations["description"] = absl::StrCat(
      "cgroup ", a.labels["cgroup"], pod.empty() ? "" : absl::StrCat(" (pod ", pod, ")"),
      options_.instance.empty() ? "" : absl::StrCat(" on ", options_.instance),
      " (and every cgroup below it) has been under socket pressure for ",
      absl::StrFormat("%.0f", e.throttled_seconds),
      " s in an ongoing episode (pushed by the agent). Its TCP sockets advertise receive windows of about "
      "4*advmss.");
  // The default runbook anchor is #sockpressuretcpthrottled; the critical
  // alert's heading is the same name + "critical".
  a.annotations["runbook_url"] = critical ? absl::StrCat(options_.runbook_url, "critical") : options_.runbook_url;
  if (e.remedy) {
    a.annotations["remedy"] = absl::StrCat(e.remedy->action, " (seen: ", e.remedy->evidence,
                                           "; measured: ", e.remedy->effect, ")");
  }
  a.annotations["episode_id"] = absl::StrCat(e.id);
  a.annotations["throttled_seconds"] = absl::StrFormat("%.1f", e.throttled_seconds);
  if (!options_.external_url.empty()) {
    a.generator_url = absl::StrCat(options_.external_url, "/episodes#episode-", e.id);
  }
  return a;
}

}  // namespace sockpressure
