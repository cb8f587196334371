#!/usr/bin/env python3
"""Generate alerts/sockpressure-rules.yaml (recording + alerting rules).

Why a generator instead of a hand-edited rule file: every threshold, `for`
duration, rate window and the runbook base URL lives in CONFIG below, so they
are documented in exactly one place (the mixin `_config` idea without jsonnet).
The rendered YAML is committed so Prometheus users can take it as is;
`generate.py --check` (run by ctest) fails when the two drift apart.

Metric names come only from docs/metrics.md (the metric contract).
"""
import argparse
import difflib
import os
import sys

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "sockpressure-rules.yaml")

# ---------------------------------------------------------------------------
# The one place thresholds live. Change here, run `alerts/generate.py`, and
# re-run `ctest -L monitoring` (the promtool unit tests pin these values).
# ---------------------------------------------------------------------------
CONFIG = {
    # Where alert runbook_url annotations point. Runbooks live in
    # alerts/runbooks/ of this repository; anchors are the lower-cased alert
    # name (kubernetes-mixin convention) so one page can hold a family.
    "runbook_base": "https://github.com/sockpressure/sockpressure/blob/main/alerts/runbooks/",
    # Job name the ServiceMonitor / static config gives the agent's targets.
    "agent_selector": 'job="sockpressure-exporter"',
    # One rate window for all recording rules. 5m covers >= 5 vmpressure
    # hysteresis periods (1 s each) even at a 60 s scrape interval.
    "rate_window": "5m",
    # Fraction of wall time a cgroup's own socket-pressure deadline was live
    # (each vmpressure verdict >= medium arms it for 1 s). 5% = 15 s in 5 min.
    "throttled_warning_ratio": 0.05,
    "throttled_warning_clamps_per_second": 1,
    "throttled_warning_for": "10m",
    # Half the time throttled: receive windows sit at ~4*advmss for minutes;
    # throughput is capped at ~5.8 KB per RTT. Worth a page.
    "throttled_critical_ratio": 0.5,
    "throttled_critical_clamps_per_second": 10,
    "throttled_critical_for": "15m",
    # Reclaim efficiency alert (cause, not effect). The kernel's vmpressure
    # "medium" verdict (which arms socket pressure) is >= 0.60 per 512-page
    # window; averaging over 5 min hides the worst windows, so warn at 0.40.
    "scan_without_reclaim_ratio": 0.40,
    # Only judge cgroups that filled at least one vmpressure window (512 pages)
    # in the rate window; a few scanned pages say nothing.
    "scan_min_pages_per_window": 512,
    "scan_without_reclaim_for": "15m",
    # Global tcp_mem pressure: fraction of time TCPMemoryPressuresChrono grew.
    "global_tcp_pressure_ratio": 0.05,
    "global_tcp_pressure_for": "10m",
    # Agent health.
    "signal_unavailable_for": "15m",
    "signal_degraded_for": "30m",
    "collector_failing_for": "15m",
    "sampler_stale_seconds": 60,
    "sampler_stalled_for": "5m",
    "cgroups_untracked_for": "15m",
    "agent_down_for": "10m",
    "agent_absent_for": "15m",
}

# ---------------------------------------------------------------------------


def runbook(page, alert):
    return f"{CONFIG['runbook_base']}{page}.md#{alert.lower()}"


# Reused description fragments. `with` keeps the pod part out on hosts without
# Kubernetes labels instead of printing "pod /".
WHO = ('cgroup {{ $labels.cgroup }}{{ with $labels.pod }} (pod {{ $labels.namespace }}/{{ . }})'
       '{{ end }} on {{ $labels.instance }}')

W = CONFIG["rate_window"]


def throttled_expr(ratio, clamps):
    # Either signal is enough: the memory.stat tier only estimates socket
    # pressure seconds, the eBPF/sock_diag tiers count clamps directly. The
    # `signal` label says which one tripped (and picks the description text);
    # `or on(...)` keeps one alert per cgroup when both trip.
    return (
        f'label_replace(cgroup:sockpressure_socket_pressure:ratio_rate{W} > {ratio}, '
        f'"signal", "socket_pressure", "", "")\n'
        f'or on(job, instance, cgroup)\n'
        f'label_replace(cgroup:sockpressure_tcp_window_clamps:rate{W} > {clamps}, '
        f'"signal", "window_clamps", "", "")'
    )


THROTTLED_VALUE = ('{{ if eq $labels.signal "socket_pressure" }}under socket pressure '
                   '{{ $value | humanizePercentage }} of the time'
                   '{{ else }}{{ printf "%.1f" $value }} receive-window clamps per second{{ end }}')


def rules():
    c = CONFIG
    recording = {
        "name": "sockpressure.rules",
        "rules": [
            # Shared by the throttling alerts and the overview/cgroup dashboards.
            # A fraction of wall time, so at most 1: rate() extrapolation and the
            # agent's sample-interval accounting can overshoot by a few per mille
            # ("100.1% of the time" was seen end to end).
            {"record": f"cgroup:sockpressure_socket_pressure:ratio_rate{W}",
             "expr": f"clamp_max(rate(sockpressure_memcg_socket_pressure_seconds_total[{W}]), 1)"},
            {"record": f"cgroup:sockpressure_tcp_window_clamps:rate{W}",
             "expr": f"rate(sockpressure_tcp_window_clamps_total[{W}])"},
            {"record": f"cgroup:sockpressure_memcg_reclaim_scanned_pages:rate{W}",
             "expr": f"rate(sockpressure_memcg_reclaim_scanned_pages_total[{W}])"},
            {"record": f"cgroup:sockpressure_memcg_reclaim_reclaimed_pages:rate{W}",
             "expr": f"rate(sockpressure_memcg_reclaim_reclaimed_pages_total[{W}])"},
            # The same 1 - reclaimed/scanned the kernel computes per 512-page
            # window, but over the rate window. Slab can make reclaimed >
            # scanned, hence clamp_min; cgroups that scanned nothing drop out
            # instead of dividing by zero.
            {"record": f"cgroup:sockpressure_memcg_scan_without_reclaim:ratio_rate{W}",
             "expr": (f"clamp_min(\n  1 - cgroup:sockpressure_memcg_reclaim_reclaimed_pages:rate{W}\n"
                      f"    / (cgroup:sockpressure_memcg_reclaim_scanned_pages:rate{W} > 0),\n  0\n)")},
        ],
    }

    alerts = [
        {
            "alert": "SockPressureTCPThrottled",
            "expr": throttled_expr(c["throttled_warning_ratio"], c["throttled_warning_clamps_per_second"]),
            "for": c["throttled_warning_for"],
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "TCP receive windows are throttled by memcg socket pressure.",
                "description": (f"{WHO} (and every cgroup below it) was {THROTTLED_VALUE} "
                                f"over the last {W}. Its TCP sockets advertise windows of about "
                                "4*advmss, so throughput per connection is capped."),
                "runbook_url": runbook("tcp-throttled", "SockPressureTCPThrottled"),
            },
        },
        {
            "alert": "SockPressureTCPThrottledCritical",
            "expr": throttled_expr(c["throttled_critical_ratio"], c["throttled_critical_clamps_per_second"]),
            "for": c["throttled_critical_for"],
            "labels": {"severity": "critical"},
            "annotations": {
                "summary": "TCP receive windows are throttled by memcg socket pressure most of the time.",
                "description": (f"{WHO} (and every cgroup below it) was {THROTTLED_VALUE} "
                                f"over the last {W}. Network throughput of its workloads is "
                                "collapsing (about 5.8 KB per round trip per connection)."),
                "runbook_url": runbook("tcp-throttled", "SockPressureTCPThrottledCritical"),
            },
        },
        {
            "alert": "SockPressureReclaimScanWithoutReclaim",
            "expr": (
                f"cgroup:sockpressure_memcg_scan_without_reclaim:ratio_rate{W} > {c['scan_without_reclaim_ratio']}\n"
                f"and cgroup:sockpressure_memcg_reclaim_scanned_pages:rate{W} * {_seconds(W)} "
                f">= {c['scan_min_pages_per_window']}\n"
                # Joined per node: swap is a node property. Without swap the
                # anon LRUs are not scanned and this pattern is rare.
                "and on(job, instance) (sockpressure_node_swap_enabled == 1)"
            ),
            "for": c["scan_without_reclaim_for"],
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "Memory reclaim scans a cgroup without reclaiming on a node with swap.",
                "description": (f"Reclaim on {WHO} left {{{{ $value | humanizePercentage }}}} of scanned "
                                f"pages unreclaimed over the last {W}. vmpressure arms socket pressure "
                                "(TCP window throttling) for every 512-page window at 60% or more."),
                "runbook_url": runbook("reclaim-scan-without-reclaim", "SockPressureReclaimScanWithoutReclaim"),
            },
        },
        {
            "alert": "SockPressureGlobalTCPMemoryPressure",
            "expr": f"rate(sockpressure_node_tcp_memory_pressure_seconds_total[{W}]) > {c['global_tcp_pressure_ratio']}",
            "for": c["global_tcp_pressure_for"],
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "The node's TCP stack is under global tcp_mem pressure.",
                "description": ("{{ $labels.instance }} was above net.ipv4.tcp_mem[1] (global TCP memory "
                                "pressure) {{ $value | humanizePercentage }} of the time over the last "
                                f"{W}. Every TCP socket on the node is throttled, not one cgroup."),
                "runbook_url": runbook("global-tcp-memory-pressure", "SockPressureGlobalTCPMemoryPressure"),
            },
        },
        {
            "alert": "SockPressureAgentSignalUnavailable",
            # reclaim and socket_pressure feed the throttling alerts; without
            # them those alerts are blind on this node.
            "expr": 'sockpressure_signal_source{signal=~"reclaim|socket_pressure", source="none"} == 1',
            "for": c["signal_unavailable_for"],
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "The sockpressure agent cannot produce a signal that alerts depend on.",
                "description": ("{{ $labels.instance }} has no source for the {{ $labels.signal }} signal; "
                                "socket-pressure alerts for this node cannot fire."),
                "runbook_url": runbook("agent-degraded", "SockPressureAgentSignalUnavailable"),
            },
        },
        {
            "alert": "SockPressureAgentSignalDegraded",
            # Info only: running on the memory.stat estimate or without clamp
            # counts is a legitimate configuration (no BTF, --no-collector.bpf),
            # but someone troubleshooting should know the numbers are weaker.
            "expr": ('sockpressure_signal_source{signal="socket_pressure", source="memory_stat"} == 1\n'
                     'or sockpressure_signal_source{signal=~"window_clamps|clamped_sockets", source="none"} == 1'),
            "for": c["signal_degraded_for"],
            "labels": {"severity": "info"},
            "annotations": {
                "summary": "The sockpressure agent fell back to a weaker signal source.",
                "description": ("{{ $labels.instance }} produces the {{ $labels.signal }} signal from "
                                "{{ $labels.source }}{{ if eq $labels.source \"memory_stat\" }} (an estimate from "
                                "memory.stat deltas){{ else }} (not at all){{ end }}."),
                "runbook_url": runbook("agent-degraded", "SockPressureAgentSignalDegraded"),
            },
        },
        {
            "alert": "SockPressureAgentCollectorFailing",
            "expr": "sockpressure_collector_success == 0",
            "for": c["collector_failing_for"],
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "A sockpressure agent collector keeps failing.",
                "description": ("Collector {{ $labels.collector }} on {{ $labels.instance }} has failed every "
                                f"sample for {c['collector_failing_for']}; its metrics are stale or missing."),
                "runbook_url": runbook("agent-degraded", "SockPressureAgentCollectorFailing"),
            },
        },
        {
            "alert": "SockPressureAgentSamplerStalled",
            # The HTTP server can keep answering while the sampler thread is
            # stuck (e.g. blocked on a hung cgroupfs read); metrics then
            # freeze instead of disappearing.
            "expr": f"time() - sockpressure_last_sample_timestamp_seconds > {c['sampler_stale_seconds']}",
            "for": c["sampler_stalled_for"],
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "The sockpressure agent stopped sampling.",
                "description": ("The last sample on {{ $labels.instance }} is {{ $value | humanizeDuration }} "
                                "old; every sockpressure metric from it is frozen."),
                "runbook_url": runbook("agent-degraded", "SockPressureAgentSamplerStalled"),
            },
        },
        {
            "alert": "SockPressureAgentCgroupsUntracked",
            "expr": "sockpressure_cgroups_untracked > 0",
            "for": c["cgroups_untracked_for"],
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "The sockpressure agent drops cgroups beyond --cgroup.max.",
                "description": ("{{ $labels.instance }} does not track {{ $value }} cgroups (over "
                                "--cgroup.max); throttling in those cgroups is invisible."),
                "runbook_url": runbook("agent-degraded", "SockPressureAgentCgroupsUntracked"),
            },
        },
        {
            "alert": "SockPressureAgentDown",
            "expr": f"up{{{c['agent_selector']}}} == 0",
            "for": c["agent_down_for"],
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "A sockpressure agent cannot be scraped.",
                "description": ("Prometheus has failed to scrape {{ $labels.instance }} for "
                                f"{c['agent_down_for']}; socket-pressure alerts for that node cannot fire."),
                "runbook_url": runbook("agent-absent", "SockPressureAgentDown"),
            },
        },
        {
            "alert": "SockPressureAgentAbsent",
            "expr": f"absent(up{{{c['agent_selector']}}} == 1)",
            "for": c["agent_absent_for"],
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "No sockpressure agent is being scraped.",
                # Saying how many targets are known separates "DaemonSet or
                # ServiceMonitor gone" (0) from "all pods failing" (> 0).
                "description": (f"No target of {c['agent_selector']} has been up for {c['agent_absent_for']} "
                                f"({{{{ with query `count(up{{{c['agent_selector']}}})` }}}}"
                                "{{ . | first | value | humanize }}{{ else }}0{{ end }} discovered); "
                                "socket-pressure monitoring is off for the whole cluster."),
                "runbook_url": runbook("agent-absent", "SockPressureAgentAbsent"),
            },
        },
    ]
    return {"groups": [recording, {"name": "sockpressure.alerts", "rules": alerts}]}


def _seconds(duration):
    units = {"s": 1, "m": 60, "h": 3600}
    return int(duration[:-1]) * units[duration[-1]]


class _Dumper(yaml.SafeDumper):
    # Indent block sequences under their key, like the hand-written YAML here
    # (and yamllint's default).
    def increase_indent(self, flow=False, indentless=False):
        return super().increase_indent(flow, False)


def _str(dumper, s):
    # Literal blocks for multi-line PromQL keep the committed file readable.
    style = "|" if "\n" in s else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", s, style=style)


_Dumper.add_representer(str, _str)

HEADER = ("# Generated by alerts/generate.py from its CONFIG block -- edit that, not this file.\n"
          "# Thresholds, `for` durations and the runbook base URL are documented there.\n")


def render():
    return HEADER + yaml.dump(rules(), Dumper=_Dumper, sort_keys=False, width=1000, allow_unicode=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--check", action="store_true", help="fail if the committed file is out of date")
    ap.add_argument("-o", "--output", default=OUT)
    args = ap.parse_args()
    text = render()
    if args.check:
        with open(args.output) as f:
            cur = f.read()
        if cur != text:
            sys.stdout.writelines(difflib.unified_diff(cur.splitlines(True), text.splitlines(True),
                                                       "committed", "generated"))
            print(f"{args.output} is stale: run alerts/generate.py", file=sys.stderr)
            return 1
        print(f"{os.path.relpath(args.output)} is up to date")
        return 0
    with open(args.output, "w") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
