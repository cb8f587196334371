// Recording rules: per-cgroup rates shared by alerts and dashboards
// (sockpressure.rules), and fleet aggregates per namespace/pod/workload and
// per node (sockpressure.fleet.rules) so fleet views read a few hundred series.
{
  prometheusRules+:: {
    local c = $._config,
    local W = c.rateWindow,
    local S = c.agentSelector,
    // Grouping of a fleet aggregate: the cluster and the selector's labels
    // (config.libsonnet says why), then its own, each once.
    local by(labels) = std.join(', ', std.foldl(function(acc, l) if std.member(acc, l) then acc else acc + [l],
                                                [c.clusterLabel] + c.agentSelectorLabels + labels,
                                                [])),
    groups+: [
      {
        name: 'sockpressure.rules',
        rules: [
          // A fraction of wall time, so at most 1: rate() extrapolation and the
          // agent's sample-interval accounting can overshoot by a few per mille
          // ("100.1% of the time" was seen end to end).
          {
            record: 'cgroup:sockpressure_socket_pressure:ratio_rate%s' % W,
            expr: 'clamp_max(rate(sockpressure_memcg_socket_pressure_seconds_total{%s}[%s]), 1)' % [S, W],
          },
          {
            record: 'cgroup:sockpressure_tcp_window_clamps:rate%s' % W,
            expr: 'rate(sockpressure_tcp_window_clamps_total{%s}[%s])' % [S, W],
          },
          {
            record: 'cgroup:sockpressure_memcg_reclaim_scanned_pages:rate%s' % W,
            expr: 'rate(sockpressure_memcg_reclaim_scanned_pages_total{%s}[%s])' % [S, W],
          },
          {
            record: 'cgroup:sockpressure_memcg_reclaim_reclaimed_pages:rate%s' % W,
            expr: 'rate(sockpressure_memcg_reclaim_reclaimed_pages_total{%s}[%s])' % [S, W],
          },
          // The same 1 - reclaimed/scanned the kernel computes per 512-page
          // window, but over the rate window. Slab can make reclaimed >
          // scanned, hence clamp_min; cgroups that scanned nothing drop out
          // instead of dividing by zero.
          {
            record: 'cgroup:sockpressure_memcg_scan_without_reclaim:ratio_rate%s' % W,
            expr: std.rstripChars(|||
              clamp_min(
                1 - cgroup:sockpressure_memcg_reclaim_reclaimed_pages:rate%(w)s{%(s)s}
                  / (cgroup:sockpressure_memcg_reclaim_scanned_pages:rate%(w)s{%(s)s} > 0),
                0
              )
            ||| % { w: W, s: S }, '\n'),
          },
        ],
      },
      {
        // Fleet views: one series per throttled pod, workload, namespace or
        // node instead of one per cgroup. Only non-zero cgroups enter the
        // aggregates, so a quiet fleet records almost nothing. A pod's value
        // is the max over its cgroups (pod slice and containers): socket
        // pressure is inherited, summing would count it once per level.
        name: 'sockpressure.fleet.rules',
        rules: [
          {
            record: 'namespace_pod:sockpressure_socket_pressure:ratio_rate%s' % W,
            expr: 'max by (%s) (cgroup:sockpressure_socket_pressure:ratio_rate%s{%s, pod!=""} > 0)'
                  % [by(['namespace', 'pod']), W, S],
          },
          {
            record: 'namespace_pod:sockpressure_tcp_window_clamps:rate%s' % W,
            // Clamps are counted per socket's own memcg: summing is exact.
            expr: 'sum by (%s) (cgroup:sockpressure_tcp_window_clamps:rate%s{%s, pod!=""} > 0)'
                  % [by(['namespace', 'pod']), W, S],
          },
          {
            record: 'namespace_workload:sockpressure_socket_pressure:ratio_rate%s' % W,
            expr: std.rstripChars(|||
              max by (%(by)s) (
                namespace_pod:sockpressure_socket_pressure:ratio_rate%(w)s{%(s)s}
                * on (%(cl)s, namespace, pod) group_left (workload, workload_type)
                  max by (%(cl)s, namespace, pod, workload, workload_type) (%(owner)s)
              )
            ||| % { by: by(['namespace', 'workload', 'workload_type']), cl: c.clusterLabel, w: W, s: S, owner: c.workloadOwnerMetric }, '\n'),
          },
          {
            record: 'namespace_workload:sockpressure_tcp_window_clamps:rate%s' % W,
            expr: std.rstripChars(|||
              sum by (%(by)s) (
                namespace_pod:sockpressure_tcp_window_clamps:rate%(w)s{%(s)s}
                * on (%(cl)s, namespace, pod) group_left (workload, workload_type)
                  max by (%(cl)s, namespace, pod, workload, workload_type) (%(owner)s)
              )
            ||| % { by: by(['namespace', 'workload', 'workload_type']), cl: c.clusterLabel, w: W, s: S, owner: c.workloadOwnerMetric }, '\n'),
          },
          {
            record: 'namespace:sockpressure_throttled_pods:count',
            expr: 'count by (%s) (namespace_pod:sockpressure_socket_pressure:ratio_rate%s{%s})'
                  % [by(['namespace']), W, S],
          },
          {
            // Cgroups whose own deadline was live (not inheritors: their
            // seconds counter only counts their own deadline).
            record: 'instance:sockpressure_throttled_cgroups:count',
            expr: 'count by (%s) (cgroup:sockpressure_socket_pressure:ratio_rate%s{%s} > 0)'
                  % [by(['instance']), W, S],
          },
          {
            record: 'instance:sockpressure_socket_pressure:max_ratio_rate%s' % W,
            expr: 'max by (%s) (cgroup:sockpressure_socket_pressure:ratio_rate%s{%s} > 0)'
                  % [by(['instance']), W, S],
          },
          {
            record: 'instance:sockpressure_tcp_window_clamps:rate%s' % W,
            expr: 'sum by (%s) (cgroup:sockpressure_tcp_window_clamps:rate%s{%s} > 0)'
                  % [by(['instance']), W, S],
          },
        ],
      },
    ],
  },
}
