"""The scrape config prometheus-operator generates for a ServiceMonitor, with a static target standing
in for Kubernetes endpoints discovery.

Why: the other monitoring tests scrape with a plain static_configs job, which attaches no target
labels, so they cannot see what happens under the operator: it attaches the *agent pod's*
namespace, service, pod, container and endpoint as target labels, sets job from the Service name,
then appends the ServiceMonitor's own relabelings. Those collide with the workload labels the agent
exports. This module rebuilds that pipeline from the rendered ServiceMonitor, in the operator's
order, with the __meta_kubernetes_* labels an endpoints-role discovery would give the agent's pod:

  1. keep the Service by the ServiceMonitor's selector.matchLabels, and the endpoint port by name;
  2. node/pod from the endpoint's target, then namespace, service, pod, container;
  3. job = Service name (no jobLabel), endpoint = port name;
  4. the ServiceMonitor's `relabelings`, then the shard hashmod;
  5. `metricRelabelings` as metric_relabel_configs; honor_labels = `honorLabels`.
"""
import re

import yaml


def _snake(key):
    return re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), key)


def _relabel(r):
    out = {}
    for k, v in r.items():
        k = _snake(k)
        out[k] = v.lower() if k == "action" else v
    return out


def _meta_label(name):
    return re.sub(r"[^a-zA-Z0-9_]", "_", name)


def discovered_labels(sm, service, pod, node, container="exporter"):
    """What Kubernetes endpoints discovery attaches to the agent pod's target."""
    ns = sm["metadata"]["namespace"]
    labels = {
        "__meta_kubernetes_namespace": ns,
        "__meta_kubernetes_service_name": service["metadata"]["name"],
        "__meta_kubernetes_endpoint_port_name": sm["spec"]["endpoints"][0]["port"],
        "__meta_kubernetes_endpoint_address_target_kind": "Pod",
        "__meta_kubernetes_endpoint_address_target_name": pod,
        "__meta_kubernetes_pod_name": pod,
        "__meta_kubernetes_pod_container_name": container,
        "__meta_kubernetes_pod_node_name": node,
        "__meta_kubernetes_pod_phase": "Running",
    }
    for k, v in service["metadata"].get("labels", {}).items():
        labels["__meta_kubernetes_service_label_" + _meta_label(k)] = v
        labels["__meta_kubernetes_service_labelpresent_" + _meta_label(k)] = "true"
    return labels


def scrape_config(sm, target, target_labels, interval="1s", timeout="1s"):
    """One operator-style job per ServiceMonitor endpoint (the shipped one has one)."""
    ns, name = sm["metadata"]["namespace"], sm["metadata"]["name"]
    jobs = []
    for i, ep in enumerate(sm["spec"]["endpoints"]):
        rc = [{"source_labels": ["job"], "target_label": "__tmp_prometheus_job_name"}]
        for k, v in sorted(sm["spec"]["selector"].get("matchLabels", {}).items()):
            rc.append({"action": "keep", "source_labels": ["__meta_kubernetes_service_label_" + _meta_label(k),
                                                           "__meta_kubernetes_service_labelpresent_" + _meta_label(k)],
                       "regex": f"({v});true"})
        rc.append({"action": "keep", "source_labels": ["__meta_kubernetes_endpoint_port_name"], "regex": ep["port"]})
        rc += [
            {"source_labels": ["__meta_kubernetes_endpoint_address_target_kind",
                               "__meta_kubernetes_endpoint_address_target_name"],
             "separator": ";", "regex": "Node;(.*)", "replacement": "$1", "target_label": "node"},
            {"source_labels": ["__meta_kubernetes_endpoint_address_target_kind",
                               "__meta_kubernetes_endpoint_address_target_name"],
             "separator": ";", "regex": "Pod;(.*)", "replacement": "$1", "target_label": "pod"},
            {"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"},
            {"source_labels": ["__meta_kubernetes_service_name"], "target_label": "service"},
            {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
            {"source_labels": ["__meta_kubernetes_pod_container_name"], "target_label": "container"},
            {"action": "drop", "source_labels": ["__meta_kubernetes_pod_phase"], "regex": "(Failed|Succeeded)"},
            {"source_labels": ["__meta_kubernetes_service_name"], "target_label": "job", "replacement": "$1"},
            {"target_label": "endpoint", "replacement": ep["port"]},
        ]
        rc += [_relabel(r) for r in ep.get("relabelings", [])]
        rc += [{"source_labels": ["__address__"], "target_label": "__tmp_hash", "modulus": 1, "action": "hashmod"},
               {"source_labels": ["__tmp_hash"], "regex": "0", "action": "keep"}]
        jobs.append({
            "job_name": f"serviceMonitor/{ns}/{name}/{i}",
            "honor_labels": bool(ep.get("honorLabels", False)),
            "honor_timestamps": True,
            "scrape_interval": interval,
            "scrape_timeout": timeout,
            "metrics_path": ep.get("path", "/metrics"),
            "scheme": ep.get("scheme", "http"),
            "static_configs": [{"targets": [target], "labels": target_labels}],
            "relabel_configs": rc,
            "metric_relabel_configs": [_relabel(r) for r in ep.get("metricRelabelings", [])],
        })
    return yaml.safe_dump(jobs, sort_keys=False, width=1000)
