// Everything a user may want to change when importing the mixin, in one place.
// Thresholds are documented next to their value; alerts/README.md explains the
// timing they produce and tests/monitoring/rules_test.yaml pins them.

// The label names a selector matches on: 'job="a", env=~"b,c"' -> ['env', 'job'].
// Quoted values are dropped first, so commas and operators inside them do not count.
local selectorLabels(sel) =
  local unquoted = std.foldl(
    function(st, ch)
      if st.q != '' then
        if st.esc then st { esc: false }
        else if ch == '\\' && st.q != '`' then st { esc: true }
        else if ch == st.q then st { q: '' }
        else st
      else if ch == '"' || ch == "'" || ch == '`' then st { q: ch }
      else st { out+: ch },
    std.stringChars(sel),
    { q: '', esc: false, out: '' }
  ).out;
  local name(m) = std.stripChars(std.split(std.strReplace(std.strReplace(m, '!', '='), '~', '='), '=')[0], ' \t\n');
  std.set([name(m) for m in std.split(unquoted, ',') if name(m) != '']);

{
  _config+:: {
    // Selects the agent's series: it is in every selector of an agent series
    // (raw or recorded) in every rule, alert and dashboard query, as node-mixin
    // does with its nodeExporterSelector, so several agents (or clusters) in one
    // Prometheus do not mix. prometheus-operator's job label is the Service
    // name, `sockpressure-exporter` in deploy/base and in the Helm chart
    // (jobLabel), and the job_name of deploy/prometheus/scrape-config.yaml.
    agentSelector: 'job="sockpressure-exporter"',
    // The labels agentSelector matches on, derived from it. Two ways exist to
    // select recorded series: apply the selector only to the raw series, or
    // also keep its labels on what the rules record. Both are done: the
    // per-cgroup rules keep every label anyway, and the fleet aggregates group
    // `by` these labels besides their own (cluster, namespace, pod...). Raw-only
    // would record one fleet series for two agents of one cluster if a selector
    // took both (a regex), and leave dashboards nothing to tell them apart by;
    // kept labels let every query on a recorded series carry the selector too.
    // Joins with series that are not the agent's (kube-state-metrics' owner)
    // match `on` their own labels and never get the agent selector.
    agentSelectorLabels: selectorLabels(self.agentSelector),
    // Label that tells clusters apart in a global view (Thanos, Mimir, a
    // federation); Prometheus' external_labels usually add it. The dashboards
    // get a $cluster variable on it; rules keep it through every aggregation
    // and join on it (a global ruler must not match one cluster's node with
    // another's), though alerts usually run per Prometheus, without it.
    clusterLabel: 'cluster',

    // runbook_url of every alert: this pattern with %(page)s (a file under
    // alerts/runbooks/) and %(anchor)s (the lower-cased alert name, the
    // kubernetes-mixin convention, so one page holds a family).
    runbookURLPattern: 'https://github.com/sockpressure/sockpressure/blob/main/alerts/runbooks/%(page)s.md#%(anchor)s',

    // One rate window for all recording rules. 5m covers >= 5 vmpressure
    // hysteresis periods (1 s each) even at a 60 s scrape interval.
    rateWindow: '5m',

    // Fraction of wall time a cgroup's own socket-pressure deadline was live
    // (each vmpressure verdict >= medium arms it for 1 s). 5% = 15 s in 5 min.
    throttledWarningRatio: 0.05,
    throttledWarningClampsPerSecond: 1,
    throttledWarningFor: '10m',
    // Half the time throttled: receive windows sit at ~4*advmss for minutes;
    // throughput is capped at ~5.8 KB per RTT. Worth a page.
    throttledCriticalRatio: 0.5,
    throttledCriticalClampsPerSecond: 10,
    throttledCriticalFor: '15m',
    // Reclaim efficiency alert (cause, not effect). The kernel's vmpressure
    // "medium" verdict (which arms socket pressure) is >= 0.60 per 512-page
    // window; averaging over 5 min hides the worst windows, so warn at 0.40.
    scanWithoutReclaimRatio: 0.40,
    // Only judge cgroups that filled at least one vmpressure window (512 pages)
    // in the rate window; a few scanned pages say nothing.
    scanMinPagesPerWindow: 512,
    scanWithoutReclaimFor: '15m',
    // Global tcp_mem pressure: fraction of time TCPMemoryPressuresChrono grew.
    globalTCPPressureRatio: 0.05,
    globalTCPPressureFor: '10m',
    // Agent health.
    signalUnavailableFor: '15m',
    signalDegradedFor: '30m',
    collectorFailingFor: '15m',
    samplerStaleSeconds: 60,
    samplerStalledFor: '5m',
    cgroupsUntrackedFor: '15m',
    agentDownFor: '10m',
    agentAbsentFor: '15m',

    // Fleet rules: kube-state-metrics' pod owner as kubernetes-mixin records it
    // (namespace, pod -> workload, workload_type). Without it the workload
    // rules are empty and the fleet dashboard falls back to pods.
    workloadOwnerMetric: 'namespace_workload_pod:kube_pod_owner:relabel',

    // Grafana.
    dashboardTags: ['sockpressure'],
    dashboardRefresh: '30s',
    dashboardUIDs: {
      overview: 'sockpressure-overview',
      cgroup: 'sockpressure-cgroup',
      agent: 'sockpressure-agent',
      fleet: 'sockpressure-fleet',
    },
  },
}
