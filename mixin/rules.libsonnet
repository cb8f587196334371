// Recording rules: per-cgroup rates shared by alerts and dashboards
// (sockpressure.rules), and fleet aggregates per namespace/pod/workload and
// per node (sockpressure.fleet.rules) so fleet views read a few hundred series.
{
  prometheusRules+:: {
    local c = $._config,
    local W = c.rateWindow,
    groups+: [
      {
        name: 'sockpressure.rules',
        rules: [
          // A fraction of wall time, so at most 1: rate() extrapolation and the
          // agent's sample-interval accounting can overshoot by a few per mille
          // ("100.1% of the time" was seen end to end).
          {
            record: 'cgroup:sockpressure_socket_pressure:ratio_rate%s' % W,
            expr: 'clamp_max(rate(sockpressure_memcg_socket_pressure_seconds_total[%s]), 1)' % W,
          },
          {
            record: 'cgroup:sockpressure_tcp_window_clamps:rate%s' % W,
            expr: 'rate(sockpressure_tcp_window_clamps_total[%s])' % W,
          },
          {
            record: 'cgroup:sockpressure_memcg_reclaim_scanned_pages:rate%s' % W,
            expr: 'rate(sockpressure_memcg_reclaim_scanned_pages_total[%s])' % W,
          },
          {
            record: 'cgroup:sockpressure_memcg_reclaim_reclaimed_pages:rate%s' % W,
            expr: 'rate(sockpressure_memcg_reclaim_reclaimed_pages_total[%s])' % W,
          },
          // The same 1 - reclaimed/scanned the kernel computes per 512-page
          // window, but over the rate window. Slab can make reclaimed >
          // scanned, hence clamp_min; cgroups that scanned nothing drop out
          // instead of dividing by zero.
          {
            record: 'cgroup:sockpressure_memcg_scan_without_reclaim:ratio_rate%s' % W,
            expr: std.rstripChars(|||
              clamp_min(
                1 - cgroup:sockpressure_memcg_reclaim_reclaimed_pages:rate%(w)s
                  / (cgroup:sockpressure_memcg_reclaim_scanned_pages:rate%(w)s > 0),
                0
              )
            ||| % { w: W }, '\n'),
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
            expr: 'max by (%s, namespace, pod) (cgroup:sockpressure_socket_pressure:ratio_rate%s{pod!=""} > 0)'
                  % [c.clusterLabel, W],
          },
          {
            record: 'namespace_pod:sockpressure_tcp_window_clamps:rate%s' % W,
            // Clamps are counted per socket's own memcg: summing is exact.
            expr: 'sum by (%s, namespace, pod) (cgroup:sockpressure_tcp_window_clamps:rate%s{pod!=""} > 0)'
                  % [c.clusterLabel, W],
          },
          {
            record: 'namespace_workload:sockpressure_socket_pressure:ratio_rate%s' % W,
            expr: std.rstripChars(|||
              max by (%(cl)s, namespace, workload, workload_type) (
                namespace_pod:sockpressure_socket_pressure:ratio_rate%(w)s
                * on (%(cl)s, namespace, pod) group_left (workload, workload_type)
                  max by (%(cl)s, namespace, pod, workload, workload_type) (%(owner)s)
              )
            ||| % { cl: c.clusterLabel, w: W, owner: c.workloadOwnerMetric }, '\n'),
          },
          {
            record: 'namespace_workload:sockpressure_tcp_window_clamps:rate%s' % W,
            expr: std.rstripChars(|||
              sum by (%(cl)s, namespace, workload, workload_type) (
                namespace_pod:sockpressure_tcp_window_clamps:rate%(w)s
                * on (%(cl)s, namespace, pod) group_left (workload, workload_type)
                  max by (%(cl)s, namespace, pod, workload, workload_type) (%(owner)s)
              )
            ||| % { cl: c.clusterLabel, w: W, owner: c.workloadOwnerMetric }, '\n'),
          },
          {
            record: 'namespace:sockpressure_throttled_pods:count',
            expr: 'count by (%s, namespace) (namespace_pod:sockpressure_socket_pressure:ratio_rate%s)'
                  % [c.clusterLabel, W],
          },
          {
            // Cgroups whose own deadline was live (not inheritors: their
            // seconds counter only counts their own deadline).
            record: 'instance:sockpressure_throttled_cgroups:count',
            expr: 'count by (%s, instance) (cgroup:sockpressure_socket_pressure:ratio_rate%s > 0)'
                  % [c.clusterLabel, W],
          },
          {
            record: 'instance:sockpressure_socket_pressure:max_ratio_rate%s' % W,
            expr: 'max by (%s, instance) (cgroup:sockpressure_socket_pressure:ratio_rate%s > 0)'
                  % [c.clusterLabel, W],
          },
          {
            record: 'instance:sockpressure_tcp_window_clamps:rate%s' % W,
            expr: 'sum by (%s, instance) (cgroup:sockpressure_tcp_window_clamps:rate%s > 0)'
                  % [c.clusterLabel, W],
          },
        ],
      },
    ],
  },
}
