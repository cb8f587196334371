// Alerting rules (sockpressure.alerts). Metric names come only from
// docs/metrics.md (the metric contract) and the recording rules.
{
  prometheusAlerts+:: {
    local c = $._config,
    local W = c.rateWindow,
    local S = c.agentSelector,
    // Labels a join between two of the agent's series matches on: the
    // cluster and the selector's labels (a global ruler must not pair one
    // cluster's cgroup or node with another's), then its own, each once.
    local joinLabels(labels) = std.foldl(function(acc, l) if std.member(acc, l) then acc else acc + [l],
                                         [c.clusterLabel] + c.agentSelectorLabels + labels,
                                         []),
    local on(labels) = std.join(', ', joinLabels(labels)),
    // An annotation's query for the alert's own series: the selector, and
    // the join labels pinned to the alert's values (printf's matchers and
    // arguments). A label the alert lacks pins to "", which PromQL matches
    // as absent, so a Prometheus without a cluster label is served too.
    local pinned(labels) = {
      matchers: std.join(', ', [S] + ['%s=%%q' % l for l in joinLabels(labels)]),
      args: std.join(' ', ['$labels.' + l for l in joinLabels(labels)]),
    },
    local runbook(page, alert) = c.runbookURLPattern % { page: page, anchor: std.asciiLower(alert) },
    local seconds(d) =
      local n = std.parseInt(std.substr(d, 0, std.length(d) - 1));
      n * { s: 1, m: 60, h: 3600 }[d[std.length(d) - 1]],

    // Reused description fragment. `with` keeps the pod part out on hosts
    // without Kubernetes labels instead of printing "pod /".
    local who = 'cgroup {{ $labels.cgroup }}{{ with $labels.pod }} (pod {{ $labels.namespace }}/{{ . }}){{ end }} on {{ $labels.instance }}',
    // Which reclaim the node runs (sockpressure_node_mglru_enabled, absent
    // without CONFIG_LRU_GEN): in the lab, MGLRU on left the hot cgroup
    // unscanned on 6.1 but not on 6.12 (tests/lab/README.md).
    local mglruNote =
      local node = pinned(['job', 'instance']);
      'Reclaim: {{ with printf `sockpressure_node_mglru_enabled{%s}` %s | query }}' % [node.matchers, node.args]
      + '{{ if eq (. | first | value) 1.0 }}MGLRU on (it still scans hot anon on 6.12, not on 6.1)'
      + '{{ else }}classic LRUs (MGLRU off), which scan hot anon{{ end }}'
      + '{{ else }}classic LRUs (no MGLRU in this kernel){{ end }}.',

    // Either signal is enough: the memory.stat tier only estimates socket
    // pressure seconds, the eBPF/sock_diag tiers count clamps directly.
    // `or on(...)` keeps one alert per cgroup when both trip. Which signal
    // tripped goes into the `signal` annotation, not a label: as a label, a
    // switch from one signal to the other (pressure dips below its threshold
    // while clamps continue) resolved the alert and paged again after `for`.
    //
    // Pressure alone pages only where it has something to throttle: a cgroup
    // whose census counted no TCP socket in it or below it for the whole
    // window (a reader of mmap'd files is scanned without reclaim and
    // asserts pressure too) is left out. Without a census the series is
    // absent and the pressure still pages.
    local withSockets(pressure, selector, sep='\n  ') =
      '(%s%sunless on(%s) max_over_time(sockpressure_memcg_socket_pressure_sockets{%s}[%s]) == 0)'
      % [pressure, sep, on(['job', 'instance', 'cgroup']), selector, W],
    local throttledExpr(ratio, clamps) =
      '%s\nor on(%s)\ncgroup:sockpressure_tcp_window_clamps:rate%s{%s} > %g'
      % [
        withSockets('cgroup:sockpressure_socket_pressure:ratio_rate%s{%s} > %g' % [W, S, ratio], S),
        on(['job', 'instance', 'cgroup']),
        W,
        S,
        clamps,
      ],
    // Template guard: is the socket-pressure side (the left of the `or`, so
    // the one $value comes from) above its threshold for this cgroup?
    local pressureQuery(ratio) =
      local cg = pinned(['job', 'instance', 'cgroup']);
      '{{ with printf `%s` %s %s | query }}'
      % [withSockets('cgroup:sockpressure_socket_pressure:ratio_rate%s{%s} > %g' % [W, cg.matchers, ratio],
                     cg.matchers,
                     ' '), cg.args, cg.args],
    // The remedy that fits what the node shows, as the agent's own doctor
    // picks it (exporter/state/remedy.h), from the series every profile has:
    // swap on first, then MGLRU built in but off, then protection.
    local remedy =
      local node = pinned(['job', 'instance']);
      'Fits first: {{ with printf `sockpressure_node_swap_enabled{%s} == 1` %s | query }}' % [node.matchers, node.args]
      + 'memory.swap.max=0 on this cgroup (swap is on: its hot anon is scanned but not reclaimed), or swap off'
      + '{{ else }}{{ with printf `sockpressure_node_mglru_enabled{%s} == 0` %s | query }}' % [node.matchers, node.args]
      + 'MGLRU on (built in, off; in the lab on 6.1 it ended the throttling, on 6.12 not)'
      + '{{ else }}memory.low / memory.min covering its working set{{ end }}{{ end }}'
      + '; last resort cgroup.memory=nosocket. `doctor` on the node names the fitting ones with their evidence.',
    local throttledSignal(ratio) = pressureQuery(ratio) + 'socket_pressure{{ else }}window_clamps{{ end }}',
    local throttledValue(ratio) =
      pressureQuery(ratio) + 'was under socket pressure {{ $value | humanizePercentage }} of the time'
      + '{{ else }}had {{ printf "%.1f" $value }} receive-window clamps per second{{ end }}',

    groups+: [{
      name: 'sockpressure.alerts',
      rules: [
        {
          alert: 'SockPressureTCPThrottled',
          expr: throttledExpr(c.throttledWarningRatio, c.throttledWarningClampsPerSecond),
          'for': c.throttledWarningFor,
          labels: { severity: 'warning' },
          annotations: {
            summary: 'TCP receive windows are throttled by memcg socket pressure.',
            signal: throttledSignal(c.throttledWarningRatio),
            remedy: remedy,
            description: '%s (and every cgroup below it) %s over the last %s. Its TCP sockets advertise windows of about 4*advmss, so throughput per connection is capped.'
                         % [who, throttledValue(c.throttledWarningRatio), W],
            runbook_url: runbook('tcp-throttled', 'SockPressureTCPThrottled'),
          },
        },
        {
          alert: 'SockPressureTCPThrottledCritical',
          expr: throttledExpr(c.throttledCriticalRatio, c.throttledCriticalClampsPerSecond),
          'for': c.throttledCriticalFor,
          labels: { severity: 'critical' },
          annotations: {
            summary: 'TCP receive windows are throttled by memcg socket pressure most of the time.',
            signal: throttledSignal(c.throttledCriticalRatio),
            remedy: remedy,
            description: '%s (and every cgroup below it) %s over the last %s. Network throughput of its workloads is collapsing (about 5.8 KB per round trip per connection).'
                         % [who, throttledValue(c.throttledCriticalRatio), W],
            runbook_url: runbook('tcp-throttled', 'SockPressureTCPThrottledCritical'),
          },
        },
        {
          alert: 'SockPressureReclaimScanWithoutReclaim',
          // Joined per node: swap is a node property. Without swap the anon
          // LRUs are not scanned and this pattern is rare.
          expr: 'cgroup:sockpressure_memcg_scan_without_reclaim:ratio_rate%s{%s} > %g\nand cgroup:sockpressure_memcg_reclaim_scanned_pages:rate%s{%s} * %d >= %d\nand on(%s) (sockpressure_node_swap_enabled{%s} == 1)'
                % [W, S, c.scanWithoutReclaimRatio, W, S, seconds(W), c.scanMinPagesPerWindow, on(['job', 'instance']), S],
          'for': c.scanWithoutReclaimFor,
          labels: { severity: 'warning' },
          annotations: {
            summary: 'Memory reclaim scans a cgroup without reclaiming on a node with swap.',
            description: 'Reclaim on %s left {{ $value | humanizePercentage }} of scanned pages unreclaimed over the last %s. vmpressure arms socket pressure (TCP window throttling) for every 512-page window at 60%% or more. %s'
                         % [who, W, mglruNote],
            runbook_url: runbook('reclaim-scan-without-reclaim', 'SockPressureReclaimScanWithoutReclaim'),
          },
        },
        {
          alert: 'SockPressureGlobalTCPMemoryPressure',
          expr: 'rate(sockpressure_node_tcp_memory_pressure_seconds_total{%s}[%s]) > %g' % [S, W, c.globalTCPPressureRatio],
          'for': c.globalTCPPressureFor,
          labels: { severity: 'warning' },
          annotations: {
            summary: "The node's TCP stack is under global tcp_mem pressure.",
            description: '{{ $labels.instance }} was above net.ipv4.tcp_mem[1] (global TCP memory pressure) {{ $value | humanizePercentage }} of the time over the last %s. Every TCP socket on the node is throttled, not one cgroup.' % W,
            runbook_url: runbook('global-tcp-memory-pressure', 'SockPressureGlobalTCPMemoryPressure'),
          },
        },
        {
          alert: 'SockPressureAgentSignalUnavailable',
          // reclaim and socket_pressure feed the throttling alerts; without
          // them those alerts are blind on this node. Not on cgroup v1/hybrid
          // nodes (memory controller on v1): the kernel only arms memcg socket
          // pressure on cgroup v2, so there is nothing to observe or do.
          expr: 'sockpressure_signal_source{%s, signal=~"reclaim|socket_pressure", source="none"} == 1\nunless on(%s) sockpressure_node_info{%s, cgroup_mode=~"legacy|hybrid"}'
                % [S, on(['job', 'instance']), S],
          'for': c.signalUnavailableFor,
          labels: { severity: 'warning' },
          annotations: {
            summary: 'The sockpressure agent cannot produce a signal that alerts depend on.',
            description: '{{ $labels.instance }} has no source for the {{ $labels.signal }} signal; socket-pressure alerts for this node cannot fire.',
            runbook_url: runbook('agent-degraded', 'SockPressureAgentSignalUnavailable'),
          },
        },
        {
          alert: 'SockPressureAgentSignalDegraded',
          // Info only: running on the memory.stat estimate or without clamp
          // counts is a legitimate configuration (no BTF, --no-collector.bpf),
          // but someone troubleshooting should know the numbers are weaker.
          expr: 'sockpressure_signal_source{%s, signal="socket_pressure", source="memory_stat"} == 1\nor sockpressure_signal_source{%s, signal=~"window_clamps|clamped_sockets", source="none"} == 1'
                % [S, S],
          'for': c.signalDegradedFor,
          labels: { severity: 'info' },
          annotations: {
            summary: 'The sockpressure agent fell back to a weaker signal source.',
            description: '{{ $labels.instance }} produces the {{ $labels.signal }} signal from {{ $labels.source }}{{ if eq $labels.source "memory_stat" }} (an estimate from memory.stat deltas){{ else }} (not at all){{ end }}.',
            runbook_url: runbook('agent-degraded', 'SockPressureAgentSignalDegraded'),
          },
        },
        {
          alert: 'SockPressureAgentCollectorFailing',
          expr: 'sockpressure_collector_success{%s} == 0' % S,
          'for': c.collectorFailingFor,
          labels: { severity: 'warning' },
          annotations: {
            summary: 'A sockpressure agent collector keeps failing.',
            description: 'Collector {{ $labels.collector }} on {{ $labels.instance }} has failed every sample for %s; its metrics are stale or missing.' % c.collectorFailingFor,
            runbook_url: runbook('agent-degraded', 'SockPressureAgentCollectorFailing'),
          },
        },
        {
          alert: 'SockPressureAgentSamplerStalled',
          // The HTTP server can keep answering while the sampler thread is
          // stuck (e.g. blocked on a hung cgroupfs read); metrics then freeze
          // instead of disappearing.
          expr: 'time() - sockpressure_last_sample_timestamp_seconds{%s} > %d' % [S, c.samplerStaleSeconds],
          'for': c.samplerStalledFor,
          labels: { severity: 'warning' },
          annotations: {
            summary: 'The sockpressure agent stopped sampling.',
            description: 'The last sample on {{ $labels.instance }} is {{ $value | humanizeDuration }} old; every sockpressure metric from it is frozen.',
            runbook_url: runbook('agent-degraded', 'SockPressureAgentSamplerStalled'),
          },
        },
        {
          alert: 'SockPressureAgentCgroupsUntracked',
          expr: 'sockpressure_cgroups_untracked{%s} > 0' % S,
          'for': c.cgroupsUntrackedFor,
          labels: { severity: 'warning' },
          annotations: {
            summary: 'The sockpressure agent drops cgroups beyond --cgroup.max.',
            description: '{{ $labels.instance }} does not track {{ $value }} cgroups (over --cgroup.max); throttling in those cgroups is invisible.',
            runbook_url: runbook('agent-degraded', 'SockPressureAgentCgroupsUntracked'),
          },
        },
        {
          alert: 'SockPressureAgentDown',
          expr: 'up{%s} == 0' % S,
          'for': c.agentDownFor,
          labels: { severity: 'warning' },
          annotations: {
            summary: 'A sockpressure agent cannot be scraped.',
            description: 'Prometheus has failed to scrape {{ $labels.instance }} for %s; socket-pressure alerts for that node cannot fire.' % c.agentDownFor,
            runbook_url: runbook('agent-absent', 'SockPressureAgentDown'),
          },
        },
        {
          alert: 'SockPressureAgentAbsent',
          expr: 'absent(up{%s} == 1)' % S,
          'for': c.agentAbsentFor,
          labels: { severity: 'warning' },
          annotations: {
            summary: 'No sockpressure agent is being scraped.',
            // Saying how many targets are known separates "DaemonSet or
            // ServiceMonitor gone" (0) from "all pods failing" (> 0).
            description: 'No target of %s has been up for %s ({{ with query `count(up{%s})` }}{{ . | first | value | humanize }}{{ else }}0{{ end }} discovered); socket-pressure monitoring is off for the whole cluster.'
                         % [S, c.agentAbsentFor, S],
            runbook_url: runbook('agent-absent', 'SockPressureAgentAbsent'),
          },
        },
      ],
    }],
  },
}
