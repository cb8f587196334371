// Grafana dashboards. Conventions (kubernetes-mixin / node-mixin): $datasource,
// $cluster, $instance, $namespace, $pod, $cgroup variables; every range uses
// $__rate_interval; stable UIDs; metric names only from docs/metrics.md plus
// the recording rules of this mixin.
local g = import 'lib/grafana.libsonnet';
local t = g.target;

{
  grafanaDashboards+:: {
    local c = $._config,
    local cl = c.clusterLabel,
    // The agent selector first in every selector (config.libsonnet), then the
    // variables.
    local S = c.agentSelector,
    local NODE = '%s, %s=~"$cluster", instance=~"$instance"' % [S, cl],
    local CG = NODE + ', namespace=~"$namespace", pod=~"$pod", cgroup=~"$cgroup"',
    local RI = '$__rate_interval',
    local UID = c.dashboardUIDs,
    // Panels over series the agent exports only with --metrics.profile=context say so.
    local CTX = "Needs the agent's context profile (--metrics.profile=context); empty in the default profile.",

    local variable(name, label, query, multi=true, includeAll=true) = {
      name: name,
      label: label,
      type: 'query',
      datasource: g.ds,
      query: { query: query, refId: name + '-variable' },
      definition: query,
      refresh: 2,
      sort: 1,
      multi: multi,
      includeAll: includeAll,
      allValue: if includeAll then '.*' else null,
      hide: 0,
      current: if includeAll then { selected: true, text: ['All'], value: ['$__all'] } else {},
      options: [],
      regex: '',
    },
    local templating(cgroupMulti) = {
      list: [
        { name: 'datasource', label: 'Data source', type: 'datasource', query: 'prometheus', current: {}, hide: 0, refresh: 1, regex: '', options: [] },
        variable('cluster', 'cluster', 'label_values(sockpressure_build_info{%s}, %s)' % [S, cl]),
        variable('instance', 'instance', 'label_values(sockpressure_build_info{%s, %s=~"$cluster"}, instance)' % [S, cl]),
        // A core series every tracked cgroup has from its first sample on (a
        // counter, exported at 0), so the lists work in the default profile.
        variable('namespace', 'namespace', 'label_values(sockpressure_memcg_socket_pressure_seconds_total{%s}, namespace)' % NODE),
        variable('pod', 'pod', 'label_values(sockpressure_memcg_socket_pressure_seconds_total{%s, namespace=~"$namespace"}, pod)' % NODE),
        variable('cgroup',
                 'cgroup',
                 'label_values(sockpressure_memcg_socket_pressure_seconds_total{%s, namespace=~"$namespace", pod=~"$pod"}, cgroup)' % NODE,
                 multi=cgroupMulti,
                 includeAll=cgroupMulti),
      ],
    },
    local dashboard(key, title, description, items, cgroupMulti=true, tmpl=null) = {
      uid: UID[key],
      title: title,
      description: description,
      tags: c.dashboardTags,
      editable: true,
      graphTooltip: 1,
      refresh: c.dashboardRefresh,
      schemaVersion: 39,
      version: 1,
      time: { from: 'now-1h', to: 'now' },
      timezone: '',
      fiscalYearStartMonth: 0,
      timepicker: {},
      liveNow: false,
      weekStart: '',
      annotations: { list: [{ builtIn: 1, datasource: { type: 'grafana', uid: '-- Grafana --' }, enable: true, hide: true, iconColor: 'rgba(0, 211, 255, 1)', name: 'Annotations & Alerts', type: 'dashboard' }] },
      links: [{ type: 'dashboards', tags: c.dashboardTags, asDropdown: true, title: 'sockpressure', includeVars: true, keepTime: true }],
      templating: if tmpl != null then tmpl else templating(cgroupMulti),
      panels: g.layout(items),
    },
    local P = g.panel,
    local R = g.row,
    local yesNo = [{ id: 'mappings', value: [{ type: 'value', options: { '0': { text: 'no', index: 0 }, '1': { text: 'yes', index: 1 } } }] }],
    local vmLevels = [[0.60, 'orange'], [0.95, 'red']],

    'sockpressure-overview.json': dashboard('overview',
                                            'sockpressure / overview',
                                            'Which cgroups on which nodes have TCP receive windows throttled by memcg socket pressure.',
                                            [
                                              R('Throttled now'),
                                              // Not sockpressure_memcg_socket_pressure_active: it is 1 on every
                                              // descendant that only inherits an ancestor's pressure, so one
                                              // pressured slice counted as its whole subtree.
                                              P(g.stat('Cgroups under socket pressure now',
                                                       'count(rate(sockpressure_memcg_socket_pressure_seconds_total{%s}[%s]) > 0) or vector(0)' % [CG, RI],
                                                       description='Cgroups whose own vmpressure socket-pressure deadline was live in the last interval (every socket below them is clamped to 4*advmss; descendants that only inherit it are not counted again).'), w=6, h=5),
                                              P(g.stat('Nodes with throttled cgroups',
                                                       'count(count by (%s, instance) (rate(sockpressure_memcg_socket_pressure_seconds_total{%s}[%s]) > 0)) or vector(0)' % [cl, CG, RI]), w=6, h=5),
                                              P(g.stat('Window clamps/s (all cgroups)',
                                                       'sum(rate(sockpressure_tcp_window_clamps_total{%s}[%s])) or vector(0)' % [CG, RI],
                                                       unit='ops',
                                                       description='Needs the eBPF or sock_diag tier; 0 without them (see agent health).'), w=6, h=5),
                                              P(g.stat('Clamped sockets now', 'sum(sockpressure_tcp_clamped_sockets{%s}) or vector(0)' % CG), w=6, h=5),
                                              P(g.table('Throttled cgroups (last 5m)',
                                                        [
                                                          t('cgroup:sockpressure_socket_pressure:ratio_rate5m{%s} > 0' % CG),
                                                          t('cgroup:sockpressure_tcp_window_clamps:rate5m{%s} > 0' % CG),
                                                          t('cgroup:sockpressure_memcg_scan_without_reclaim:ratio_rate5m{%s}' % CG),
                                                          t('max_over_time(sockpressure_memcg_socket_pressure_sockets{%s}[%s])' % [CG, RI]),
                                                        ],
                                                        description='Fraction of time under socket pressure, clamps/s and reclaim scan-without-reclaim ratio per cgroup (recording rules from alerts/), and the TCP sockets in the cgroup and below it: 0 is pressure with nothing to throttle (the kernel asserted it; no alert pages for it). Click a cgroup for its detail dashboard.',
                                                        links=[{ title: 'cgroup detail', url: '/d/%s?var-datasource=${datasource}&var-instance=${__data.fields.instance}&var-cgroup=${__data.fields.cgroup}&${__url_time_range}' % UID.cgroup }],
                                                        overrides=[
                                                          { matcher: { id: 'byName', options: 'Value #A' }, properties: [{ id: 'displayName', value: 'time under pressure' }, { id: 'unit', value: 'percentunit' }] },
                                                          { matcher: { id: 'byName', options: 'Value #B' }, properties: [{ id: 'displayName', value: 'clamps/s' }] },
                                                          { matcher: { id: 'byName', options: 'Value #C' }, properties: [{ id: 'displayName', value: 'scan w/o reclaim' }, { id: 'unit', value: 'percentunit' }] },
                                                          { matcher: { id: 'byName', options: 'Value #D' }, properties: [{ id: 'displayName', value: 'sockets (0: nothing to throttle)' }] },
                                                        ]), w=24, h=8),
                                              P(g.timeseries('Top cgroups by time under socket pressure', [
                                                t('topk(10, rate(sockpressure_memcg_socket_pressure_seconds_total{%s}[%s]) > 0)' % [CG, RI], '{{instance}} {{cgroup}}'),
                                              ], unit='percentunit', min=0, max=1, description="Share of wall time each cgroup's own socket-pressure deadline was live.")),
                                              P(g.timeseries('Top cgroups by window clamp rate', [
                                                t('topk(10, rate(sockpressure_tcp_window_clamps_total{%s}[%s]) > 0)' % [CG, RI], '{{instance}} {{cgroup}}'),
                                              ], unit='ops')),
                                              P(g.timeseries('Top cgroups by reclaim scan-without-reclaim',
                                                             [
                                                               t('topk(10, 1 - rate(sockpressure_memcg_reclaim_reclaimed_pages_total{%s}[%s]) / (rate(sockpressure_memcg_reclaim_scanned_pages_total{%s}[%s]) > 0))' % [CG, RI, CG, RI], '{{instance}} {{cgroup}}'),
                                                             ],
                                                             unit='percentunit',
                                                             min=0,
                                                             max=1,
                                                             thresholds=vmLevels,
                                                             description='1 - reclaimed/scanned per cgroup. vmpressure arms socket pressure at >= 60% (medium).')),
                                              P(g.timeseries('Top cgroups by clamped sockets', [
                                                t('topk(10, sockpressure_tcp_clamped_sockets{%s} > 0)' % CG, '{{instance}} {{cgroup}}'),
                                              ])),

                                              R('Node preconditions'),
                                              P(g.table('Nodes',
                                                        [
                                                          t('sockpressure_node_swap_enabled{%s}' % NODE),
                                                          t('sockpressure_node_socket_accounting_enabled{%s}' % NODE),
                                                          t('sockpressure_node_tcp_memory_pressure{%s}' % NODE),
                                                          t('sockpressure_node_info{%s}' % NODE),
                                                        ],
                                                        description='Preconditions: swap on (anon gets scanned), socket accounting on (no cgroup.memory=nosocket), global tcp_mem pressure (a different cause of the same clamp), kernel and cgroup mode.',
                                                        hide=['Time', '__name__', 'job', 'Value #D'],
                                                        overrides=[
                                                          { matcher: { id: 'byName', options: 'Value #A' }, properties: [{ id: 'displayName', value: 'swap' }] + yesNo },
                                                          { matcher: { id: 'byName', options: 'Value #B' }, properties: [{ id: 'displayName', value: 'socket accounting' }] + yesNo },
                                                          { matcher: { id: 'byName', options: 'Value #C' }, properties: [{ id: 'displayName', value: 'global tcp_mem pressure' }] + yesNo },
                                                        ]), w=24, h=7),
                                              P(g.table('Signal sources',
                                                        [t('sockpressure_signal_source{%s} == 1' % NODE)],
                                                        description='Which tier produced each signal: fentry/kprobe/iter/tp_btf/raw_tp are exact, memory_stat is an estimate, none means not measured.',
                                                        hide=['Time', '__name__', 'job', 'Value']), w=12),
                                              P(g.timeseries('Swap used', [
                                                t('sockpressure_node_swap_used_bytes{%s}' % NODE, '{{instance}} used'),
                                                t('sockpressure_node_swap_size_bytes{%s}' % NODE, '{{instance}} size'),
                                              ], unit='bytes')),
                                              P(g.timeseries('Node: TCP memory vs tcp_mem', [
                                                t('sockpressure_node_tcp_memory_pages{%s}' % NODE, '{{instance}} TCP mem'),
                                                t('sockpressure_node_tcp_mem_limit_pages{%s, threshold="pressure"}' % NODE, '{{instance}} tcp_mem[1]'),
                                              ], description='Above tcp_mem[1] every socket on the node is throttled (global pressure).')),
                                              P(g.timeseries('Node: reclaim scan-without-reclaim', [
                                                t('1 - rate(sockpressure_node_vmscan_reclaimed_pages_total{%s}[%s]) / (rate(sockpressure_node_vmscan_scanned_pages_total{%s}[%s]) > 0)' % [NODE, RI, NODE, RI], '{{instance}}'),
                                              ], unit='percentunit', min=0, max=1, thresholds=vmLevels)),
                                              P(g.timeseries('Node: TCP prune / zero-window events', [
                                                t('rate(sockpressure_node_tcp_prune_called_total{%s}[%s])' % [NODE, RI], '{{instance}} prune called'),
                                                t('rate(sockpressure_node_tcp_want_zero_window_adv_total{%s}[%s])' % [NODE, RI], '{{instance}} want zero window'),
                                                t('rate(sockpressure_node_tcp_memory_pressure_seconds_total{%s}[%s])' % [NODE, RI], '{{instance}} global pressure s/s'),
                                              ], unit='ops')),
                                            ]),

    'sockpressure-cgroup.json': dashboard('cgroup',
                                          'sockpressure / cgroup detail',
                                          'One cgroup: reclaim efficiency against the vmpressure levels, socket pressure, clamps, memory.',
                                          [
                                            R('Reclaim (the cause)'),
                                            P(g.timeseries('Reclaim: scanned vs reclaimed (own LRUs)', [
                                              t('rate(sockpressure_memcg_reclaim_scanned_pages_total{%s}[%s])' % [CG, RI], 'scanned {{cgroup}}'),
                                              t('rate(sockpressure_memcg_reclaim_reclaimed_pages_total{%s}[%s])' % [CG, RI], 'reclaimed {{cgroup}}'),
                                            ], unit='suffix: pages/s', description='Local (not hierarchical) pages/s, the input of vmpressure().')),
                                            P(g.timeseries('Scan-without-reclaim ratio',
                                                           [
                                                             t('sockpressure_memcg_scan_without_reclaim_ratio{%s}' % CG, 'last 512-page window {{cgroup}}'),
                                                             t('1 - rate(sockpressure_memcg_reclaim_reclaimed_pages_total{%s}[%s]) / (rate(sockpressure_memcg_reclaim_scanned_pages_total{%s}[%s]) > 0)' % [CG, RI, CG, RI], 'interval {{cgroup}}'),
                                                           ],
                                                           unit='percentunit',
                                                           min=0,
                                                           max=1,
                                                           thresholds=vmLevels,
                                                           description='1 - reclaimed/scanned. Lines: vmpressure medium (0.60) and critical (0.95); medium or worse arms socket pressure for 1 s.')),
                                            P(g.timeseries('vmpressure windows by verdict (context profile)', [
                                              t('rate(sockpressure_memcg_vmpressure_windows_total{%s}[%s])' % [CG, RI], '{{level}} {{cgroup}}'),
                                            ], unit='ops', stack=true, description=CTX)),
                                            P(g.timeseries('Memory pressure stall (PSI, context profile)', [
                                              t('rate(sockpressure_memcg_psi_stall_seconds_total{%s}[%s])' % [CG, RI], '{{kind}} {{cgroup}}'),
                                            ], unit='percentunit', description='Share of time tasks stalled on memory. A co-signal only: socket pressure can be high with PSI near zero. ' + CTX)),
                                            R('Socket pressure (the effect)'),
                                            P(g.timeseries('Time under socket pressure', [
                                              t('rate(sockpressure_memcg_socket_pressure_seconds_total{%s}[%s])' % [CG, RI], 'own deadline {{cgroup}}'),
                                              t('sockpressure_memcg_socket_pressure_active{%s}' % CG, 'active now (incl. ancestors) {{cgroup}}'),
                                            ], unit='percentunit', min=0, max=1, description="`active` appears with a cgroup's first vmpressure window, or while an ancestor's pressure covers it; absent means it never was under pressure.")),
                                            P(g.timeseries('Socket pressure events', [
                                              t('rate(sockpressure_memcg_socket_pressure_events_total{%s}[%s])' % [CG, RI], '(re)asserted {{cgroup}}'),
                                              t('rate(sockpressure_memcg_sock_throttled_total{%s}[%s])' % [CG, RI], 'sock_throttled (6.19+) {{cgroup}}'),
                                              t('sockpressure_memcg_socket_pressure_sockets{%s} == 0' % CG, 'pressure, nothing to throttle (no socket in or below) {{cgroup}}'),
                                            ], unit='ops')),
                                            P(g.timeseries('Window clamps', [
                                              t('rate(sockpressure_tcp_window_clamps_total{%s}[%s])' % [CG, RI], 'clamps/s {{cgroup}}'),
                                            ], unit='ops', description='rcv_ssthresh pulled to <= 4*advmss under socket pressure (eBPF / sock_diag tiers).')),
                                            // Beside the clamps: what the kernel did next to the same
                                            // receivers when the clamped window was not enough.
                                            P(g.timeseries('Pruning and receive drops', [
                                              t('rate(sockpressure_tcp_prune_collapses_total{%s}[%s])' % [CG, RI], 'receive queue collapsed {{cgroup}}'),
                                              t('rate(sockpressure_tcp_ofo_prunes_total{%s}[%s])' % [CG, RI], 'out-of-order queue pruned {{cgroup}}'),
                                              t('rate(sockpressure_tcp_ofo_pruned_segments_total{%s}[%s])' % [CG, RI], 'out-of-order segments thrown away {{cgroup}}'),
                                              t('rate(sockpressure_tcp_rcv_mem_drops_total{%s}[%s])' % [CG, RI], 'segments dropped: no receive memory {{cgroup}}'),
                                            ], unit='ops', description="tcp_prune_queue() at work on this cgroup's sockets: collapses and out-of-order prunes (fentry/kprobe tier), segments dropped for lack of receive memory (skb:kfree_skb drop reasons). Drops cost the sender a retransmission. Pruning without socket pressure is a socket overrunning its own SO_RCVBUF. Runbook: tcp-pruning.md.")),
                                            P(g.timeseries('Sockets (all: context profile)', [
                                              t('sockpressure_tcp_sockets{%s}' % CG, 'sockets {{cgroup}}'),
                                              t('sockpressure_tcp_clamped_sockets{%s}' % CG, 'clamped now {{cgroup}}'),
                                            ], description='Clamped sockets are core (shown while the cgroup has sockets). All sockets: ' + CTX)),
                                            R('Memory (context profile)'),
                                            P(g.timeseries('Memory by type (context profile)', [
                                              t('sockpressure_memcg_anon_bytes{%s}' % CG, 'anon {{cgroup}}'),
                                              t('sockpressure_memcg_file_bytes{%s}' % CG, 'file {{cgroup}}'),
                                              t('sockpressure_memcg_sock_bytes{%s}' % CG, 'sock {{cgroup}}'),
                                              t('sockpressure_memcg_swap_bytes{%s}' % CG, 'swap {{cgroup}}'),
                                            ], unit='bytes', description=CTX)),
                                            P(g.timeseries('Usage vs limits (context profile)', [
                                              t('sockpressure_memcg_usage_bytes{%s}' % CG, 'usage {{cgroup}}'),
                                              t('sockpressure_memcg_limit_bytes{%s, limit=~"max|high|low|min"} < +Inf' % CG, '{{limit}} {{cgroup}}'),
                                            ], unit='bytes', description='Unlimited limits (+Inf) are not drawn. ' + CTX)),
                                            // Bytes and counts on separate axes: one axis scaled in GiB shows a
                                            // count as 0.
                                            P(g.timeseries('Swap vs swap.max (context profile)', [
                                              t('sockpressure_memcg_swap_bytes{%s}' % CG, 'swap {{cgroup}}'),
                                              t('sockpressure_memcg_limit_bytes{%s, limit="swap_max"} < +Inf' % CG, 'swap.max {{cgroup}}'),
                                            ], unit='bytes', description=CTX), w=12),
                                            P(g.timeseries('OOM kills (context profile)', [
                                              t('increase(sockpressure_memcg_oom_kills_total{%s}[%s])' % [CG, RI], 'OOM kills {{cgroup}}'),
                                            ], description=CTX), w=12),
                                            P(g.timeseries('cgroup v1 TCP kmem (context profile)', [
                                              t('sockpressure_memcg_kmem_tcp_usage_bytes{%s}' % CG, 'usage {{cgroup}}'),
                                              t('sockpressure_memcg_kmem_tcp_limit_bytes{%s} < +Inf' % CG, 'limit {{cgroup}}'),
                                            ], unit='bytes', description='cgroup v1 only: memory.kmem.tcp.* (the v1 pressure source since v6.6). ' + CTX)),
                                            P(g.timeseries('cgroup v1 TCP kmem failcnt (context profile)', [
                                              t('increase(sockpressure_memcg_kmem_tcp_failcnt_total{%s}[%s])' % [CG, RI], 'failcnt {{cgroup}}'),
                                            ], description='cgroup v1 only: charges refused at memory.kmem.tcp.limit_in_bytes. ' + CTX)),
                                          ],
                                          cgroupMulti=false),

    // Fleet: reads only the sockpressure.fleet.rules series (one per throttled
    // pod, workload, namespace or node) and build_info, so it stays cheap
    // across many nodes and clusters.
    local FL = '%s, %s=~"$cluster"' % [S, cl],
    local FN = FL + ', namespace=~"$namespace"',
    local fleetVars = {
      list: [
        { name: 'datasource', label: 'Data source', type: 'datasource', query: 'prometheus', current: {}, hide: 0, refresh: 1, regex: '', options: [] },
        variable('cluster', 'cluster', 'label_values(sockpressure_build_info{%s}, %s)' % [S, cl]),
        variable('namespace', 'namespace', 'label_values(namespace:sockpressure_throttled_pods:count{%s}, namespace)' % FL),
      ],
    },
    'sockpressure-fleet.json': dashboard('fleet',
                                         'sockpressure / fleet',
                                         'Top throttled workloads, namespaces and nodes across the fleet, from the fleet recording rules.',
                                         [
                                           R('Now'),
                                           P(g.stat('Throttled pods',
                                                    'sum(namespace:sockpressure_throttled_pods:count{%s}) or vector(0)' % FN,
                                                    description='Pods with a cgroup under its own socket pressure over the last 5m.'), w=8, h=5),
                                           P(g.stat('Nodes with throttled cgroups', 'count(instance:sockpressure_throttled_cgroups:count{%s}) or vector(0)' % FL), w=8, h=5),
                                           P(g.stat('Agents reporting', 'count(sockpressure_build_info{%s}) or vector(0)' % FL, thresholds=[]), w=8, h=5),
                                           P(g.table('Top throttled workloads',
                                                     [
                                                       t('topk(25, namespace_workload:sockpressure_socket_pressure:ratio_rate5m{%s})' % FN),
                                                       t('namespace_workload:sockpressure_tcp_window_clamps:rate5m{%s}' % FN),
                                                     ],
                                                     description='Worst pod of each workload (kube-state-metrics owner, as kubernetes-mixin records it). Empty without kube-state-metrics: use the pods table.',
                                                     overrides=[
                                                       { matcher: { id: 'byName', options: 'Value #A' }, properties: [{ id: 'displayName', value: 'time under pressure' }, { id: 'unit', value: 'percentunit' }] },
                                                       { matcher: { id: 'byName', options: 'Value #B' }, properties: [{ id: 'displayName', value: 'clamps/s' }] },
                                                     ]), w=12, h=10),
                                           P(g.table('Top throttled pods',
                                                     [
                                                       t('topk(25, namespace_pod:sockpressure_socket_pressure:ratio_rate5m{%s})' % FN),
                                                       t('namespace_pod:sockpressure_tcp_window_clamps:rate5m{%s}' % FN),
                                                     ],
                                                     description='Worst cgroup of each pod.',
                                                     overrides=[
                                                       { matcher: { id: 'byName', options: 'Value #A' }, properties: [{ id: 'displayName', value: 'time under pressure' }, { id: 'unit', value: 'percentunit' }] },
                                                       { matcher: { id: 'byName', options: 'Value #B' }, properties: [{ id: 'displayName', value: 'clamps/s' }] },
                                                     ]), w=12, h=10),
                                           R('Trends'),
                                           P(g.timeseries('Throttled pods per namespace', [
                                             t('namespace:sockpressure_throttled_pods:count{%s}' % FN, '{{%s}} {{namespace}}' % cl),
                                           ], stack=true)),
                                           P(g.timeseries('Top workloads by time under socket pressure', [
                                             t('topk(10, namespace_workload:sockpressure_socket_pressure:ratio_rate5m{%s})' % FN, '{{%s}} {{namespace}}/{{workload}}' % cl),
                                           ], unit='percentunit', min=0, max=1)),
                                           R('Nodes'),
                                           P(g.table('Throttled nodes',
                                                     [
                                                       t('topk(25, instance:sockpressure_socket_pressure:max_ratio_rate5m{%s})' % FL),
                                                       t('instance:sockpressure_throttled_cgroups:count{%s}' % FL),
                                                       t('instance:sockpressure_tcp_window_clamps:rate5m{%s}' % FL),
                                                     ],
                                                     description='Click a node for its overview.',
                                                     links=[{ title: 'node overview', url: '/d/%s?var-datasource=${datasource}&var-cluster=${__data.fields.%s}&var-instance=${__data.fields.instance}&${__url_time_range}' % [UID.overview, cl] }],
                                                     overrides=[
                                                       { matcher: { id: 'byName', options: 'Value #A' }, properties: [{ id: 'displayName', value: 'worst cgroup time under pressure' }, { id: 'unit', value: 'percentunit' }] },
                                                       { matcher: { id: 'byName', options: 'Value #B' }, properties: [{ id: 'displayName', value: 'throttled cgroups' }] },
                                                       { matcher: { id: 'byName', options: 'Value #C' }, properties: [{ id: 'displayName', value: 'clamps/s' }] },
                                                     ]), w=24, h=10),
                                         ],
                                         tmpl=fleetVars),

    'sockpressure-agent.json': dashboard('agent',
                                         'sockpressure / agent health',
                                         'Signal sources, probe attach state, collector health and cgroup tracking of the agents.',
                                         [
                                           P(g.table('Agents',
                                                     [t('up{%s}' % NODE), t('sockpressure_build_info{%s}' % NODE)],
                                                     hide=['Time', '__name__', 'Value #B'],
                                                     overrides=[{ matcher: { id: 'byName', options: 'Value #A' }, properties: [{ id: 'displayName', value: 'up' }] }]), w=24, h=6),
                                           P(g.table('Signal sources', [t('sockpressure_signal_source{%s} == 1' % NODE)], hide=['Time', '__name__', 'job', 'Value'])),
                                           P(g.table('Probe attach state',
                                                     [t('sockpressure_probe_attached{%s}' % NODE)],
                                                     description='1 attached, 0 tried and skipped (a fallback was used).',
                                                     hide=['Time', '__name__', 'job'])),
                                           P(g.timeseries('Collector success', [t('sockpressure_collector_success{%s}' % NODE, '{{instance}} {{collector}}')], min=0, max=1)),
                                           P(g.timeseries('Collector duration', [t('sockpressure_collector_duration_seconds{%s}' % NODE, '{{instance}} {{collector}}')], unit='s')),
                                           P(g.timeseries('Cgroups tracked', [
                                             t('sockpressure_cgroups_tracked{%s}' % NODE, '{{instance}} tracked'),
                                             t('sockpressure_cgroups_untracked{%s}' % NODE, '{{instance}} over --cgroup.max'),
                                             t('increase(sockpressure_cgroups_overflow_total{%s}[%s])' % [NODE, RI], '{{instance}} overflowing samples'),
                                           ])),
                                           P(g.timeseries('Sampler', [
                                             t('rate(sockpressure_samples_total{%s}[%s])' % [NODE, RI], '{{instance}} samples/s'),
                                             t('time() - sockpressure_last_sample_timestamp_seconds{%s}' % NODE, '{{instance}} last sample age (s)'),
                                             t('sockpressure_sample_cpu_seconds{%s}' % NODE, '{{instance}} CPU s per sample'),
                                           ])),
                                           P(g.timeseries('BPF program cost', [
                                             t('rate(sockpressure_bpf_program_run_seconds_total{%s}[%s]) / (rate(sockpressure_bpf_program_runs_total{%s}[%s]) > 0)' % [NODE, RI, NODE, RI], '{{instance}} {{program}}'),
                                           ], unit='s', description='Average run time per program (needs kernel.bpf_stats_enabled=1).')),
                                           P(g.timeseries('BPF events lost / HTTP', [
                                             t('rate(sockpressure_bpf_events_lost_total{%s}[%s])' % [NODE, RI], '{{instance}} BPF events lost'),
                                             t('sum by (instance, handler, code) (rate(sockpressure_http_requests_total{%s}[%s]))' % [NODE, RI], '{{instance}} {{handler}} {{code}}'),
                                           ], unit='ops')),
                                         ]),
  },
}
