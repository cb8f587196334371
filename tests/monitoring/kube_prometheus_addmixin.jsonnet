// The mixin the way kube-prometheus' jsonnet takes it, for test_kube_prometheus_mixin.py.
// Written here (no kube-prometheus bundle is fetched) after the interface of two of its parts:
//   * lib/mixin.libsonnet's addMixin({name, namespace, labels, mixin[, dashboardFolder]}):
//     `prometheusRules`, one PrometheusRule holding the mixin's prometheusAlerts and
//     prometheusRules groups (alerts first), in `namespace` (default monitoring) with `labels`
//     (default prometheus: k8s), and `grafanaDashboards`, the mixin's map of file name ->
//     dashboard (under the folder's name when dashboardFolder is given);
//   * its Grafana component, which takes that map as values.grafana.dashboards and ships each
//     dashboard as a ConfigMap grafana-dashboard-<name> holding <file name>: <dashboard JSON>.
// Run: jsonnet -J mixin tests/monitoring/kube_prometheus_addmixin.jsonnet
local addMixin(params) =
  local p = { namespace: 'monitoring', labels: { prometheus: 'k8s' } } + params;
  local groups(key) = if std.objectHasAll(p.mixin, key) then p.mixin[key].groups else [];
  {
    prometheusRules: {
      apiVersion: 'monitoring.coreos.com/v1',
      kind: 'PrometheusRule',
      metadata: { name: p.name, namespace: p.namespace, labels: p.labels },
      spec: { groups: groups('prometheusAlerts') + groups('prometheusRules') },
    },
    grafanaDashboards:
      if std.objectHas(p, 'dashboardFolder') then { [p.dashboardFolder]: p.mixin.grafanaDashboards }
      else p.mixin.grafanaDashboards,
  };

// What a kube-prometheus user writes (mixin/README.md shows the same).
local sockpressure = addMixin({
  name: 'sockpressure',
  mixin: (import 'mixin.libsonnet') + {
    _config+:: {
      agentSelector: 'job="sp-kp", cluster="kp1"',
    },
  },
});
local values = { grafana: { dashboards: sockpressure.grafanaDashboards } };

{
  prometheusRule: sockpressure.prometheusRules,
  grafanaDashboards: sockpressure.grafanaDashboards,
  // The Grafana component's part: one ConfigMap per dashboard, serialized by jsonnet itself.
  grafanaDashboardDefinitions: {
    apiVersion: 'v1',
    kind: 'ConfigMapList',
    items: [
      {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: 'grafana-dashboard-' + std.strReplace(name, '.json', ''), namespace: 'monitoring' },
        data: { [name]: std.manifestJsonEx(values.grafana.dashboards[name], '    ') },
      }
      for name in std.objectFields(values.grafana.dashboards)
    ],
  },
}
