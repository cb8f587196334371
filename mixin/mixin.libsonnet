// sockpressure monitoring mixin: alerts, recording rules and Grafana
// dashboards for the sockpressure agent, in the form kube-prometheus imports
// (prometheusAlerts, prometheusRules, grafanaDashboards, _config).
(import 'config.libsonnet') +
(import 'alerts.libsonnet') +
(import 'rules.libsonnet') +
(import 'dashboards.libsonnet')
