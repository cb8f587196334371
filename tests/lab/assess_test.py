#!/usr/bin/env python3
"""Unit tests of the lab's verdicts (lab.assess) on recorded outcomes, without booting anything.

The lab holds each (kernel, reclaim) pair to what the kernel was measured to do and the agent to
what the kernel did in that boot. These cases pin that logic down with outcomes seen in real runs,
so a change to the expectations is a reviewed change, not a surprise in a 25-minute run."""
import os
import sys
import types
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lab  # noqa: E402

A, B = "/lab/A", "/lab/B"


def args(arch="amd64"):
    return types.SimpleNamespace(agent="agent", throttle_alerts=("SockPressureTCPThrottled",), cgroup_a=A,
                                 cgroup_b=B, fallback_reason=None, core=None, arch=arch)


def boot(cond, kernel, mglru, clamped, agent_says, **extra):
    """A boot's results as run_condition() leaves them: the kernel's ground truth (the receiver saw a
    clamp or not) and what the default agent's memory.stat tier and headline series said for A."""
    run = cond if (kernel, mglru) == lab.BASE else f"{cond}@{kernel}-mglru-{mglru}"
    expect = lab.SWAP_EXPECT[(kernel, mglru)] if cond in lab.PRESSURE_CONDS else "quiet"
    v = 5.0 if agent_says else 0.0
    r = {"errors": [], "run": run, "condition": cond, "kernel": kernel, "mglru": mglru, "variant": "default",
         "group": run, "expect": expect, "agents": [("default", "--signal.all-tiers")],
         "recv_kBps": 300.0 if clamped else 4000.0, "guest_clamped": clamped, "recv_clamped_frac": 0.5 * clamped,
         "guest_mglru": "0x0007" if mglru == "on" else "0x0000", "prom_up": 1, "socket_accounting": 1,
         "mglru_metric": 1 if mglru == "on" else 0, "signal_source": {"socket_pressure": "memory_stat"},
         "A_ratio_max": 1.0 if agent_says else 0.0, "A_events": v, "A_pressure_s": v, "B_events": 0,
         "alerts_firing": [], "webhook": [(1.0, "firing", "SockPressureTCPThrottled", A)] if agent_says else [],
         "tcpext": {k: 0 for k in lab.TCPEXT_KEYS},
         "agent_tiers": {"default": {"probes": [], "tiers": {"memory_stat": {
             ("socket_pressure_events_total", A): v, ("socket_pressure_events_total", B): 0.0}}}}}
    r.update(extra)
    return r


class AssessTest(unittest.TestCase):
    def failed(self, *boots):
        return [(c, n, d) for c, n, ok, d in lab.assess(args(), {b["run"]: b for b in boots}).rows if ok is False]

    def test_reference_throttled_boot_passes(self):
        self.assertEqual(self.failed(boot("swap", "6.1", "off", True, True)), [])

    def test_agent_missing_the_throttling_fails(self):
        self.assertTrue(self.failed(boot("swap", "6.1", "off", True, False)))

    def test_6_12_mglru_on_quiet_kernel_and_quiet_agent_passes(self):
        # A real CI boot: 6.12 with MGLRU on reclaimed 57 % of what it scanned in A and never clamped
        # the receiver (4,246 kB/s). Measured clamped fractions there so far: 0.52, 0.17, 0 — the
        # kernel varies, so only the agent's agreement with the kernel can be asserted.
        self.assertEqual(self.failed(boot("swap", "6.12", "on", False, False)), [])

    def test_6_12_mglru_on_clamping_kernel_needs_the_agent(self):
        self.assertEqual(self.failed(boot("swap", "6.12", "on", True, True)), [])
        self.assertTrue(self.failed(boot("swap", "6.12", "on", True, False)))

    def test_6_12_mglru_on_pressure_without_a_visible_clamp_passes(self):
        # A real CI boot (A pgscan/pgsteal 368,952 / 186,182: half of what was scanned not reclaimed):
        # the receiver never saw a clamp at 20 Hz, yet the kernel can set A's socket pressure then — the
        # clamp needs a receive queue over half full (__tcp_select_window), which a fast reader may never
        # reach. The flag itself is not observable from the guest, so the agent's pressure series for A
        # (and an alert they raise) are reported, not judged; B must stay quiet.
        b = boot("swap", "6.12", "on", False, True)
        self.assertEqual(self.failed(b), [])
        b["B_events"] = 3.0
        self.assertIn("B: no socket-pressure events", [n for _, n, _ in self.failed(b)])

    def test_6_12_mglru_on_clamps_without_pressure_fail(self):
        # A clamp needs the pressure flag: clamps on A with no socket pressure at all is a wrong agent.
        b = boot("swap", "6.12", "on", False, False, A_clamps=2.0,
                 signal_source={"socket_pressure": "memory_stat", "window_clamps": "tp_btf"})
        self.assertTrue(self.failed(b))

    def test_6_12_mglru_off_must_clamp(self):
        # Detection on 6.12 rests on this boot: there the kernel is held to clamping.
        self.assertTrue(self.failed(boot("swap", "6.12", "off", False, False)))


def prune_boot(cond, tcpext, fn=None, drops=None, b=0.0):
    """A `prune`/`slowread` boot: the guest's TcpExt deltas and what the default agent's function tier
    (fentry: collapses, out-of-order prunes) and drop tier (tp_btf: memory drops, pruned segments)
    counted for A; the sums over all cgroups are A's plus B's."""
    pressure = cond == "prune"
    r = boot(cond, "6.1", "off", pressure, pressure)
    r["tcpext"] = {k: 0 for k in lab.TCPEXT_KEYS} | tcpext
    fn, drops = fn or (0.0, 0.0), drops or (0.0, 0.0)
    fams = dict(zip(lab.PRUNE_FN_FAMS, fn)) | dict(zip(lab.DROP_FAMS, drops))
    for fam, v in fams.items():
        r[f"A_{fam}"], r[f"B_{fam}"] = v, b
    tiers = r["agent_tiers"]["default"]["tiers"]
    tiers["fentry"] = {(fam, cg): (fams[fam] if cg == A else b) for fam in lab.PRUNE_FN_FAMS for cg in (A, B)}
    tiers["tp_btf"] = {(fam, cg): (fams[fam] if cg == A else b) for fam in lab.DROP_FAMS for cg in (A, B)}
    r["agent_tiers"]["default"]["probes"] = [("tcp_prunes", "fentry"), ("tcp_drops", "tp_btf")]
    r["agent_tiers"]["default"]["sums"] = {
        "fentry": {fam: fams[fam] + b for fam in lab.PRUNE_FN_FAMS},
        "tp_btf": {fam: fams[fam] + b for fam in lab.DROP_FAMS}}
    return r


class PruneAssessTest(unittest.TestCase):
    def failed(self, b):
        return [n for c, n, ok, d in lab.assess(args(), {b["run"]: b}).rows if ok is False]

    # Shaped like a 6.1 boot: PROTO_MEM drops of arriving segments have no socket there (no rx_sk).
    PRUNED = {"PruneCalled": 40, "TCPRcvCollapsed": 300, "OfoPruned": 6, "TCPRcvQDrop": 25, "TCPOFODrop": 9}

    def test_recorded_6_1_prune_boot_passes(self):
        # The first 6.1 boot of the final workload: 34 out-of-order prunes, all of them (and 41 pruned
        # segments) on A; 164 drops of arriving segments with no socket (6.1 has no rx_sk).
        d = {"PruneCalled": 195, "OfoPruned": 34, "TCPRcvQDrop": 62, "TCPOFODrop": 102}
        self.assertEqual(self.failed(prune_boot("prune", d, fn=(0.0, 34.0), drops=(0.0, 41.0))), [])
        self.assertTrue(self.failed(prune_boot("prune", d, fn=(0.0, 33.0), drops=(0.0, 41.0))))

    def kprobe_boot(self, d, ofo):
        b = prune_boot("prune", d, fn=(0.0, ofo), drops=(0.0, d["OfoPruned"] + 10.0))
        ag = b["agent_tiers"]["default"]
        ag["tiers"]["kprobe"] = ag["tiers"].pop("fentry")
        ag["sums"]["kprobe"] = ag["sums"].pop("fentry")
        ag["probes"] = [("tcp_prunes", "kprobe"), ("tcp_drops", "tp_btf")]
        return b

    def test_recorded_kprobe_shortfall_passes(self):
        # A CI boot on 6.1 (four agents, all with the kprobe function tier): TcpExt counted 57 out-of-order
        # prunes, every agent 56. A kprobe program does not run while any kprobe program or BPF map
        # syscall is active on that CPU (bpf_prog_active), so a prune in a softirq that interrupts one is
        # not seen by any kprobe: the kprobe tier may fall short of the kernel, never exceed it.
        d = {"PruneCalled": 272, "OfoPruned": 57, "TCPRcvQDrop": 80, "TCPOFODrop": 120}
        self.assertEqual(self.failed(self.kprobe_boot(d, 56.0)), [])
        self.assertEqual(self.failed(self.kprobe_boot(d, 57.0)), [])
        name = ("tier kprobe (prunes: tcp_collapse, tcp_prune_ofo_queue) [default]: all cgroups' out-of-order "
                "prunes <= TcpExt OfoPruned, short by at most 5 % (nesting; at least 1), collapses <= PruneCalled")
        self.assertIn(name, self.failed(self.kprobe_boot(d, 58.0)))  # more than the kernel: never
        self.assertIn(name, self.failed(self.kprobe_boot(d, 50.0)))  # 7 missed: more than nesting explains

    def test_pruned_and_attributed_passes(self):
        self.assertEqual(self.failed(prune_boot("prune", self.PRUNED, fn=(2.0, 6.0), drops=(0.0, 11.0))), [])

    def test_kernel_that_never_pruned_fails_the_prune_condition(self):
        # PruneCalled alone: tcp_prune_queue() ran but only grew the buffer.
        self.assertIn("kernel pruned for the slow receiver and collapsed, pruned or dropped (TcpExt PruneCalled > 0; "
                      "TCPRcvCollapsed, OfoPruned, TCPRcvQDrop or TCPOFODrop > 0)",
                      self.failed(prune_boot("prune", {"PruneCalled": 12})))

    def test_collapses_without_out_of_order_prunes_need_the_function_tier(self):
        # The slow reader's receive queue is never empty, so a collapse step collapsed it.
        self.assertEqual(self.failed(prune_boot("prune", {"PruneCalled": 30, "TCPRcvCollapsed": 200},
                                                fn=(25.0, 0.0))), [])
        self.assertIn("tier fentry (prunes: tcp_collapse, tcp_prune_ofo_queue) [default]: verdict for A",
                      self.failed(prune_boot("prune", {"PruneCalled": 30, "TCPRcvCollapsed": 200})))

    def test_tier_missing_the_out_of_order_prunes_fails(self):
        f = self.failed(prune_boot("prune", self.PRUNED, fn=(2.0, 0.0), drops=(0.0, 11.0)))
        self.assertIn("tier fentry (prunes: tcp_collapse, tcp_prune_ofo_queue) [default]: all cgroups' out-of-order "
                      "prunes = TcpExt OfoPruned, collapses <= PruneCalled", f)

    def test_more_drops_than_the_kernel_fails(self):
        f = self.failed(prune_boot("prune", self.PRUNED, fn=(2.0, 6.0), drops=(35.0, 11.0)))
        self.assertTrue(any(n.startswith("tier tp_btf (memory drops: kfree_skb) [default]: all cgroups'") for n in f))

    def test_counts_on_b_fail(self):
        f = self.failed(prune_boot("prune", self.PRUNED, fn=(2.0, 6.0), drops=(0.0, 11.0), b=1.0))
        self.assertIn("B: no prune or memory-drop counts", f)

    def test_6_1_drops_alone_are_missing_not_failed(self):
        # Measured on 6.1: the kernel refused memory 116 times and dropped 116 arriving segments, with no
        # out-of-order queue to prune; those drops have no socket before 6.11 (no rx_sk).
        b = prune_boot("prune", {"PruneCalled": 116, "TCPRcvQDrop": 33, "TCPOFODrop": 83})
        self.assertEqual(self.failed(b), [])
        rows = lab.assess(args(), {b["run"]: b}).rows
        self.assertIn("A: prune or memory-drop counts > 0", [n for c, n, ok, d in rows if ok is None])

    def test_6_12_prune_condition_must_not_prune(self):
        # Measured: 6.12 refuses no receive memory for memcg pressure (global pressure only).
        b = prune_boot("prune", {})
        b.update(kernel="6.12", run="prune@6.12", group="prune@6.12", expect="clamped")
        self.assertEqual(self.failed(b), [])
        b["tcpext"]["PruneCalled"] = 4
        self.assertTrue(any(n.startswith("kernel refused the receiver nothing") for n in self.failed(b)))

    def test_prune_without_pressure_must_not_prune(self):
        # 6.1 with MGLRU on never scans A: no socket pressure, so `prune` is a control there.
        b = prune_boot("prune", {})
        b.update(mglru="on", run="prune@6.1-mglru-on", group="prune@6.1-mglru-on", expect="quiet",
                 guest_clamped=False, guest_mglru="0x0007", mglru_metric=1, A_events=0.0, A_pressure_s=0.0,
                 A_ratio_max=0.0, webhook=[])
        b["agent_tiers"]["default"]["tiers"]["memory_stat"][("socket_pressure_events_total", A)] = 0.0
        self.assertEqual(self.failed(b), [])

    def test_6_12_attributes_every_memory_drop(self):
        # Any boot on 6.11+ where the kernel dropped for memory (here a swap boot): rx_sk names the socket.
        d = {"PruneCalled": 116, "TCPRcvQDrop": 33, "TCPOFODrop": 83}
        b = prune_boot("prune", d, drops=(116.0, 0.0))
        b.update(condition="swap", kernel="6.12", run="swap@6.12", group="swap@6.12", expect="clamped")
        self.assertEqual(self.failed(b), [])
        b = prune_boot("prune", d, drops=(100.0, 0.0))
        b.update(condition="swap", kernel="6.12", run="swap@6.12", group="swap@6.12", expect="clamped")
        self.assertTrue(any("memory drops = TCPRcvQDrop + TCPOFODrop" in n for n in self.failed(b)))

    def test_quiet_control_passes_and_a_pruning_control_fails(self):
        # PruneCalled without a collapse, prune or drop: the buffer grew, as it may without pressure.
        self.assertEqual(self.failed(prune_boot("slowread", {"PruneCalled": 20})), [])
        self.assertIn("kernel collapsed, pruned and dropped nothing (TcpExt deltas 0 but PruneCalled, which here only "
                      "grows the buffer)", self.failed(prune_boot("slowread", {"PruneCalled": 3, "TCPRcvCollapsed": 9})))

    def test_counts_where_the_kernel_pruned_nothing_fail(self):
        f = self.failed(prune_boot("slowread", {}, fn=(1.0, 0.0)))
        self.assertIn("tier fentry (prunes: tcp_collapse, tcp_prune_ofo_queue) [default]: verdict for A", f)


class EarlyDeathTest(unittest.TestCase):
    """A boot whose QEMU exits before the measurement began is booted again once, unless our BPF code
    crashed the guest kernel."""

    class FakeGuest:
        def __init__(self, alive, events):
            self._alive, self._events = alive, events

        def alive(self):
            return self._alive

        def first(self, kind):
            return (0.0, kind, {}, "") if kind in self._events else None

    def test_exit_during_boot_is_retried(self):
        tail = ["LAB boot cond=swap kernel=6.1.0-57-amd64 uptime=19.8", "insmod failed: crc32c-intel.ko"]
        self.assertTrue(lab.early_death(self.FakeGuest(False, {"boot"}), tail))

    def test_exit_after_the_measurement_began_is_a_failure(self):
        self.assertFalse(lab.early_death(self.FakeGuest(False, {"boot", "warmup_start"}), ["LAB warmup_start"]))

    def test_guest_setup_error_is_a_failure(self):
        self.assertFalse(lab.early_death(self.FakeGuest(False, {"boot", "fatal"}), ["LAB fatal zram swap"]))

    def test_timeout_is_a_failure(self):
        self.assertFalse(lab.early_death(self.FakeGuest(True, {"boot"}), []))

    def test_kernel_crash_in_bpf_is_a_failure(self):
        tail = ["BUG: unable to handle page fault for address: 0000000000000010", "Call Trace:",
                " bpf_prog_6deef7357e7b4530_clamp_kprobe+0x2e/0x1000", "Kernel panic - not syncing: Fatal exception"]
        self.assertFalse(lab.early_death(self.FakeGuest(False, {"boot", "agent_started"}), tail))

    def test_lost_boot_is_set_aside_whole(self):
        # A retried boot must start with an empty Prometheus: the lost boot's TSDB held up=0 for its
        # agents under the same lab_agent labels, and the retry then failed "Prometheus scraped the agent".
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            os.mkdir(os.path.join(d, "swap.stack"))
            open(os.path.join(d, "swap.stack", "prom.yml"), "w").close()
            open(os.path.join(d, "swap.console.log"), "w").close()
            lab.set_aside_lost_boot(d, "swap")
            self.assertEqual(sorted(os.listdir(d)), ["swap.lost.console.log", "swap.lost.stack"])

    def test_console_tail_drops_timestamps_and_the_command_line(self):
        import tempfile
        with tempfile.NamedTemporaryFile("w", suffix=".log", delete=False) as f:
            f.write("# qemu-system-x86_64 -kernel vmlinuz\n  19.812 LAB boot cond=swap\n  21.004 Kernel panic - x\n")
        try:
            self.assertEqual(lab.console_tail(f.name), ["LAB boot cond=swap", "Kernel panic - x"])
        finally:
            os.unlink(f.name)


class ChurnAssessTest(unittest.TestCase):
    def churn(self, **over):
        c = {"created": 8000, "rounds": 80, "seconds": 120.0, "dying": "40", "rss_before_kib": 9000,
             "rss_peak_kib": 14000, "rss_after_kib": 10000, "alive": True, "errors": [], "stale_cgroups": [],
             "seen_cgroups": 700, "pressured_cgroups": []}
        c.update(over)
        return boot("churn", "6.1", "off", True, True, churn=c)

    def failed(self, b):
        return [n for c, n, ok, d in lab.assess(args(), {b["run"]: b}).rows if ok is False]

    def test_clean_churn_passes(self):
        self.assertEqual(self.failed(self.churn()), [])

    def test_stale_series_fail(self):
        self.assertIn("churn: no series of a removed cgroup 15 s after the last removal",
                      self.failed(self.churn(stale_cgroups=["/churn/r3c7"])))

    def test_memory_not_returned_fails(self):
        self.assertIn("churn: agent RSS after the churn within 1.5x of before",
                      self.failed(self.churn(rss_after_kib=20000)))

    def test_false_pressure_on_a_churned_cgroup_fails(self):
        self.assertIn("churn: no socket pressure or clamp on any churned cgroup",
                      self.failed(self.churn(pressured_cgroups=["/churn/r1c1"])))

    def test_unseen_churn_is_not_a_pass(self):
        self.assertIn("churn: the agent exported churned cgroups while they lived",
                      self.failed(self.churn(seen_cgroups=0)))


class FallbackCoverageTest(unittest.TestCase):
    """`nopressure`, the throughput reference, boots with the default agent alone: its forced-fallback
    tiers are judged quiet in the other controls that carry the fallback agents (noswap, nosocket,
    slowread), and are MISSING only when no such control had them live."""

    def missing(self, *boots):
        return [(c, n) for c, n, ok, d in lab.assess(args(), {b["run"]: b for b in boots}).rows if ok is None]

    def control_with_kprobe_agent(self):
        b = boot("noswap", "6.1", "off", False, False)
        b["agents"] = [("default", "--signal.all-tiers"), ("kprobe", "--signal.all-tiers --bpf.vmpressure-attach=kprobe")]
        b["agent_tiers"]["kprobe"] = {"probes": [("vmpressure", "kprobe")], "tiers": {"kprobe": {
            ("socket_pressure_events_total", A): 0.0, ("socket_pressure_events_total", B): 0.0,
            ("socket_pressure_seconds_total", A): 0.0, ("socket_pressure_seconds_total", B): 0.0}}}
        return b

    def test_reference_without_fallback_boot_is_covered_by_a_control(self):
        kprobe = "tier " + lab.TIER_LABEL["kprobe"]
        alone = self.missing(boot("nopressure", "6.1", "off", False, False))
        self.assertIn(("nopressure", kprobe), alone)
        both = self.missing(boot("nopressure", "6.1", "off", False, False), self.control_with_kprobe_agent())
        self.assertNotIn(("nopressure", kprobe), both)
        # A tier no control had live stays MISSING.
        self.assertIn(("nopressure", "tier " + lab.TIER_LABEL["tp_btf"]), both)

    def test_a_throttled_column_is_never_covered_by_a_control(self):
        kprobe = "tier " + lab.TIER_LABEL["kprobe"]
        self.assertIn(("swap", kprobe), self.missing(boot("swap", "6.1", "off", True, True),
                                                     self.control_with_kprobe_agent()))

    def test_arm64_6_1_fentry_refusal_is_named_not_failed(self):
        # arm64 6.1 has no ftrace direct calls: the fentry/fexit rows are MISSING with that reason, while
        # x86-64's 6.1 names only the 7-argument tcp_collapse() for the fentry prune tier.
        def why(arch, rid):
            ck = lab.assess(args(arch), {"swap": boot("swap", "6.1", "off", True, True)})
            return [d for c, n, ok, d in ck.rows if ok is None and n == "tier " + lab.TIER_LABEL[rid]]
        self.assertIn("direct calls", why("arm64", "fentry")[0])
        self.assertIn("direct calls", why("arm64", "fentry-prunes")[0])
        self.assertNotIn("direct calls", why("amd64", "fentry")[0])
        self.assertIn("7", why("amd64", "fentry-prunes")[0])
        self.assertEqual(self.failed_rows(args("arm64")), [])

    def failed_rows(self, a):
        return [n for c, n, ok, d in lab.assess(a, {"swap": boot("swap", "6.1", "off", True, True)}).rows
                if ok is False]



def proxy_boot(**extra):
    """The reporter's workload as recorded on 6.1 (2026-12-04): the proxy's upstream socket clamped in
    8 of 11 ss samples, quiet in the control phase, B (fio) under socket pressure with no socket, and
    doctor naming /lab/A with memory.swap.max=0 first."""
    r = boot("swap", "6.1", "off", True, True, run="proxy", condition="proxy", group="proxy", expect="throttled",
             recv_kBps=1117.0, control_kBps=3650.0, control_checks=6, control_clamped=0, ss_clamped=8,
             ss_samples=11, control_end_s=57.9, webhook=[(120.0, "firing", "SockPressureTCPThrottled", A)],
             control_agent={"ok": True, "values": {"A memcg_socket_pressure_events_total": 0.0}},
             fio_bw_kibps=5130.0, B_events=18.0, B_pressure_sockets_max=0.0,
             signal_source={"socket_pressure": "fentry", "clamped_sockets": "iter"}, A_clamped_sockets_max=1.0,
             vmp={"calls": 28030, "A_assertions": 742, "B_assertions": 17, "B_windows": 351, "overrun": 0},
             doctor={"rc": "1", "names_a": True, "a_line": "- /lab/A: own socket pressure asserted",
                     "first": "set memory.swap.max=0 on /lab/A", "first_measured": "lab, 6.1: ...",
                     "remedies_b": False, "lines": 60})
    r["agent_tiers"]["default"]["tiers"]["fentry"] = {("socket_pressure_events_total", A): 558.0,
                                                       ("socket_pressure_events_total", B): 18.0}
    r["agent_tiers"]["default"]["events_at_trace_end"] = {("fentry", A): 557.0, ("fentry", B): 17.0}
    r["agent_tiers"]["default"]["probes"] = [("vmpressure", "fentry")]
    r.update(extra)
    return r


class ProxyTest(unittest.TestCase):
    failed = AssessTest.failed

    def test_recorded_proxy_boot_passes(self):
        self.assertEqual(self.failed(proxy_boot()), [])

    def test_control_phase_pressure_fails(self):
        b = proxy_boot(control_agent={"ok": True, "values": {"A memcg_socket_pressure_events_total": 3.0}})
        self.assertIn("control phase: the agent saw no socket pressure, clamp or clamped socket for A or B",
                      [n for _, n, _ in self.failed(b)])

    def test_control_without_scrapes_is_no_proof(self):
        b = proxy_boot(control_agent={"ok": False, "values": {}})
        self.assertTrue(self.failed(b))

    def test_agent_off_the_kernel_trace_for_b_fails(self):
        b = proxy_boot()
        b["agent_tiers"]["default"]["events_at_trace_end"][("fentry", B)] = 0.0
        self.assertTrue(any("traced" in n for _, n, _ in self.failed(b)))

    def test_pressure_after_the_trace_stopped_is_not_held_against_the_agent(self):
        # CI, 6.1 (2026-12-06) failed on kernel 21 vs the agent's 24 read at the boot's end: that count
        # also holds what the ballast's reclaim of the shared limit asserted on B after the trace stopped.
        # Only the count at the trace's end is comparable.
        b = proxy_boot()
        b["vmp"]["B_assertions"] = 21
        b["agent_tiers"]["default"]["events_at_trace_end"][("fentry", B)] = 21.0
        b["agent_tiers"]["default"]["tiers"]["fentry"][("socket_pressure_events_total", B)] = 24.0
        self.assertEqual(self.failed(b), [])

    def test_no_trace_is_missing_not_passed(self):
        b = proxy_boot(vmp=None, vmp_trace="no lab.vmp_offsets")
        rows = lab.assess(args(), {"proxy": b}).rows
        self.assertIn(None, [ok for _, n, ok, _ in rows if "traced vmpressure" in n])

    def test_doctor_with_another_first_remedy_fails(self):
        b = proxy_boot()
        b["doctor"]["first"] = "turn swap off on the node (swapoff -a)"
        self.assertTrue(any("first fitting remedy" in n for _, n, _ in self.failed(b)))

    def test_doctor_remedy_for_b_fails(self):
        b = proxy_boot()
        b["doctor"]["remedies_b"] = True
        self.assertTrue(any("no remedy for B" in n for _, n, _ in self.failed(b)))

    def test_nosocket_marks_are_not_events(self):
        # Recorded: under cgroup.memory=nosocket the kernel traced 22 marks on B, the agent 0 (right).
        b = proxy_boot(run="proxy-nosocket", condition="proxy-nosocket", expect="varies", guest_clamped=False,
                       socket_accounting=0, B_events=0.0)
        b["agent_tiers"]["default"]["events_at_trace_end"][("fentry", B)] = 0.0
        b["vmp"]["B_assertions"] = 22
        self.assertFalse(any("traced" in n or "under cgroup.memory=nosocket" in n for _, n, _ in self.failed(b)))
        b["agent_tiers"]["default"]["events_at_trace_end"][("fentry", B)] = 22.0
        self.assertTrue(any("under cgroup.memory=nosocket" in n for _, n, _ in self.failed(b)))

    def test_missing_doctor_fails(self):
        self.assertTrue(self.failed(proxy_boot(doctor=None)))

class TraceIntervalTest(unittest.TestCase):
    """The kernel's traced pressure intervals against a tier's 1 s steps (lab.interval_agreement)."""

    class FakeGuest:
        def __init__(self, events):
            self.events = events

        def first(self, kind):
            return next((e for e in self.events if e[1] == kind), None)

    def test_intervals_are_placed_by_the_marker_line(self):
        g = self.FakeGuest([
            (1000.0, "vmp_trace", {"offsets": "1,2,3"}, "LAB vmp_trace on offsets=1,2,3"),
            (1100.0, "vmp_mark", {}, "LAB vmp_mark"),
            (1102.5, "vmp_live", {"mark": "ok", "A_live": "-10.0~-8.5,-7.0~-6.0", "B_live": "truncated"}, ""),
        ])
        live, span = lab.trace_live(g)
        self.assertEqual(span, (1002.0, 1100.0))
        self.assertEqual(live["A"], [(1090.0, 1091.5), (1093.0, 1094.0)])
        self.assertIsNone(live["B"])

    def test_no_marker_no_judge(self):
        g = self.FakeGuest([(1000.0, "vmp_trace", {}, "LAB vmp_trace off reason=x")])
        self.assertEqual(lab.trace_live(g), ({}, None))

    def test_a_tier_that_follows_the_kernel_within_the_lag(self):
        live = [(100.2, 103.5)]  # kernel steps 101, 102, 103, 104
        j = lab.interval_agreement(live, [102, 103, 104, 105], 90, 120)
        self.assertEqual(j, {"kernel": 4, "recalled": 4, "tier": 4, "false": 0})

    def test_a_blind_tier_recalls_nothing(self):
        j = lab.interval_agreement([(100.2, 103.5)], [], 90, 120)
        self.assertEqual((j["kernel"], j["recalled"]), (4, 0))

    def test_moves_far_from_any_kernel_step_are_false(self):
        j = lab.interval_agreement([(100.2, 101.0)], [101, 110, 111], 90, 120)
        self.assertEqual((j["recalled"], j["false"], j["tier"]), (1, 2, 3))

    def test_only_tiers_that_serve_pressure_are_judged(self):
        probes = [("vmpressure", "fentry"), ("socket_pressure", "iter"), ("window_clamps", "fexit")]
        self.assertEqual([s for s in ("fentry", "kprobe", "iter", "memory_stat", "sock_diag", "tp_btf")
                          if lab.serves_pressure(s, probes)], ["fentry", "iter", "memory_stat"])

    def test_moves_the_trace_cannot_judge_are_left_out(self):
        # Before start + lag and after the stop the kernel's side is not known.
        j = lab.interval_agreement([], [91, 125], 90, 120)
        self.assertEqual((j["tier"], j["false"]), (0, 0))


if __name__ == "__main__":
    unittest.main()
