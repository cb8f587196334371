#include <gtest/gtest.h>

#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <google/protobuf/util/delimited_message_util.h>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "exporter/cli/flag_set.h"
#include "exporter/outputs/http_flags.h"
#include "exporter/outputs/metrics_endpoint.h"
#include "exporter/outputs/proto_writer.h"
#include "exporter/outputs/snapshot_families.h"
#include "exporter/outputs/snapshot_metrics.h"
#include "exporter/outputs/text_writer.h"
#include "exporter/proto/metrics.pb.h"

namespace sockpressure {
namespace {

Snapshot SmallSnapshot() {
  Snapshot s;
  s.sequence = 1;
  s.cgroup_mode = CgroupMode::kUnified;
  s.node.kernel_release = "6.1.0";
  s.node.swaps = Swaps{1, 1024, 0, false};
  s.swap_enabled = true;
  s.node.nosocket = false;
  CgroupView root;
  root.path = "/";
  CgroupView a;
  a.path = "/w/a \"quoted\"";
  a.parent = 0;
  a.identity = {{"namespace", "default"}, {"pod", "proxy-1"}};
  a.tier[static_cast<int>(Signal::kReclaim)] = Tier::kMemoryStat;
  a.tier[static_cast<int>(Signal::kSocketPressure)] = Tier::kMemoryStat;
  a.best.scanned_total = 20000;
  a.best.reclaimed_total = 10;
  a.best.windows_total[2] = 39;
  a.best.ratio = 0.9995;
  a.best.pressure_events_total = 39;
  a.best.pressure_seconds_total = 1.5;
  a.pressure_active = true;
  CgroupLimits unlimited;
  unlimited.memory_max = UINT64_MAX;
  a.limits = std::make_shared<const CgroupLimits>(unlimited);
  s.cgroups = {root, a};
  s.signal_tier[static_cast<int>(Signal::kReclaim)] = Tier::kMemoryStat;
  s.collectors = {{"cgroupfs", true, 0.01, ""}};
  return s;
}

EmitOptions ContextProfile() {
  EmitOptions o;
  o.context = true;
  return o;
}

TEST(TextWriterTest, FamiliesLabelsAndEscaping) {
  auto w = NewTextWriter();
  WriteSnapshotMetrics(SmallSnapshot(), {"0.1.0", "abc", "GNU 12"}, ContextProfile(), *w);
  std::string text = w->Finish();
  EXPECT_TRUE(absl::StrContains(
      text, "sockpressure_memcg_scan_without_reclaim_ratio{cgroup=\"/w/a \\\"quoted\\\"\",namespace=\"default\","
            "pod=\"proxy-1\"} 0.9995\n"));
  EXPECT_TRUE(absl::StrContains(text, "# TYPE sockpressure_memcg_socket_pressure_events_total counter\n"));
  EXPECT_TRUE(absl::StrContains(text, "level=\"critical\"} 39\n"));
  EXPECT_TRUE(absl::StrContains(text, "sockpressure_memcg_limit_bytes{cgroup=\"/w/a \\\"quoted\\\"\",namespace="
                                      "\"default\",pod=\"proxy-1\",limit=\"max\"} +Inf\n"));
  EXPECT_TRUE(absl::StrContains(text, "sockpressure_signal_source{signal=\"reclaim\",source=\"memory_stat\"} 1\n"));
  EXPECT_TRUE(absl::StrContains(text, "sockpressure_signal_source{signal=\"window_clamps\",source=\"none\"} 1\n"));
  EXPECT_FALSE(absl::StrContains(text, "sockpressure_memcg_scan_without_reclaim_ratio{cgroup=\"/\"}"))
      << "absent before the first completed window";
  EXPECT_FALSE(absl::StrContains(text, "sockpressure_tcp_window_clamps_total")) << "no tier: no series";
  EXPECT_FALSE(absl::StrContains(text, "# HELP sockpressure_memcg_kmem_tcp_usage_bytes")) << "no empty families";
}

// The default (core) profile: the signal only. A cgroup where nothing
// happened has its counters at 0 from the first sample (so that rate() sees
// the first event) and none of the episode gauges.
TEST(SnapshotMetricsTest, CoreProfileByDefault) {
  Snapshot s = SmallSnapshot();
  CgroupView quiet;
  quiet.path = "/w/quiet";
  quiet.parent = 0;
  quiet.tier = s.cgroups[1].tier;
  quiet.tier[static_cast<int>(Signal::kWindowClamps)] = Tier::kTpBtf;
  quiet.tier[static_cast<int>(Signal::kClampedSockets)] = Tier::kTpBtf;
  quiet.best.census = SocketCensus{};  // no sockets
  quiet.anon_bytes = 4096;
  CgroupLimits unlimited;
  unlimited.memory_max = UINT64_MAX;
  quiet.limits = std::make_shared<const CgroupLimits>(unlimited);
  s.cgroups.push_back(quiet);
  auto w = NewTextWriter();
  WriteSnapshotMetrics(s, {"0.1.0", "abc", "GNU 12"}, {}, *w);
  std::string text = w->Finish();
  for (const char* family : {"sockpressure_memcg_reclaim_scanned_pages_total",
                             "sockpressure_memcg_reclaim_reclaimed_pages_total",
                             "sockpressure_memcg_socket_pressure_events_total",
                             "sockpressure_memcg_socket_pressure_seconds_total", "sockpressure_tcp_window_clamps_total"}) {
    EXPECT_TRUE(absl::StrContains(text, absl::StrCat(family, "{cgroup=\"/w/quiet\"} 0\n"))) << family;
  }
  for (const char* family : {"sockpressure_memcg_scan_without_reclaim_ratio", "sockpressure_memcg_socket_pressure_active",
                             "sockpressure_tcp_clamped_sockets"}) {
    EXPECT_FALSE(absl::StrContains(text, absl::StrCat(family, "{cgroup=\"/w/quiet\"}"))) << family;
  }
  // The throttled cgroup has its episode gauges.
  EXPECT_TRUE(absl::StrContains(text, "sockpressure_memcg_socket_pressure_active{cgroup=\"/w/a \\\"quoted\\\"\","
                                      "namespace=\"default\",pod=\"proxy-1\"} 1\n"));
  // No context family, not even its header.
  for (const char* family : {"sockpressure_memcg_anon_bytes", "sockpressure_memcg_limit_bytes", "sockpressure_tcp_sockets",
                             "sockpressure_memcg_vmpressure_windows_total", "sockpressure_memcg_psi_stall_seconds_total"}) {
    EXPECT_FALSE(absl::StrContains(text, family)) << family;
  }
  // At most 8 series per cgroup in the core profile on this node (no sock_throttled).
  size_t quiet_series = 0, a_series = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::StrContains(line, "cgroup=\"/w/quiet\"")) ++quiet_series;
    if (absl::StrContains(line, "cgroup=\"/w/a ")) ++a_series;
  }
  EXPECT_EQ(quiet_series, 5u);
  EXPECT_LE(a_series, 8u);

  EXPECT_FALSE(absl::StrContains(text, "sockpressure_memcg_socket_pressure_sockets{cgroup=\"/w/quiet\"}"))
      << "never under pressure: no socket count";

  // Under pressure once, with a census: the sockets its pressure throttles
  // (0: nothing to throttle); without a census, none.
  CgroupView& q = s.cgroups.Mutable(s.cgroups.size() - 1);
  q.tier[static_cast<int>(Signal::kSocketPressure)] = Tier::kTpBtf;
  q.best.pressure_events_total = 3;
  q.subtree_sockets = 0;
  auto w1 = NewTextWriter();
  WriteSnapshotMetrics(s, {"0.1.0", "abc", "GNU 12"}, {}, *w1);
  const std::string with_census = w1->Finish();
  EXPECT_TRUE(absl::StrContains(with_census, "sockpressure_memcg_socket_pressure_sockets{cgroup=\"/w/quiet\"} 0\n"));
  EXPECT_TRUE(absl::StrContains(with_census, "# TYPE sockpressure_memcg_socket_pressure_sockets gauge\n"));
  s.cgroups.Mutable(s.cgroups.size() - 1).subtree_sockets.reset();
  auto w3 = NewTextWriter();
  WriteSnapshotMetrics(s, {"0.1.0", "abc", "GNU 12"}, {}, *w3);
  EXPECT_FALSE(absl::StrContains(w3->Finish(), "sockpressure_memcg_socket_pressure_sockets{cgroup=\"/w/quiet\"}"));

  // An ancestor's pressure covers a quiet cgroup: `active` appears, as 1.
  s.cgroups.Mutable(s.cgroups.size() - 1).pressure_active = true;
  auto w2 = NewTextWriter();
  WriteSnapshotMetrics(s, {"0.1.0", "abc", "GNU 12"}, {}, *w2);
  EXPECT_TRUE(absl::StrContains(w2->Finish(), "sockpressure_memcg_socket_pressure_active{cgroup=\"/w/quiet\"} 1\n"));
}

// Issue 48: a loaded window-clamp probe detached for want of socket
// pressure is loaded but not attached, and each program says how long and
// how often it was attached.
TEST(SnapshotMetricsTest, ProbeLoadedAttachedAndProgramLinks) {
  Snapshot s = SmallSnapshot();
  s.probes = {{"window_clamps", "fexit", false, false}, {"window_clamps", "tp_btf", false, true},
              {"socket_pressure", "iter", true, true}};
  ProgramStats clamp;
  clamp.program = "clamp_tp_btf";
  clamp.missed_runs = 3;
  clamp.attached_seconds = 12.5;
  clamp.attaches = 2;
  clamp.attach_failures = 1;
  s.program_stats = {clamp};
  auto w = NewTextWriter();
  WriteSnapshotMetrics(s, {"0.1.0", "abc", "GNU 12"}, {}, *w);
  std::string text = w->Finish();
  for (const char* line : {"sockpressure_probe_attached{probe=\"window_clamps\",attach=\"fexit\"} 0\n",
                           "sockpressure_probe_loaded{probe=\"window_clamps\",attach=\"fexit\"} 0\n",
                           "sockpressure_probe_attached{probe=\"window_clamps\",attach=\"tp_btf\"} 0\n",
                           "sockpressure_probe_loaded{probe=\"window_clamps\",attach=\"tp_btf\"} 1\n",
                           "sockpressure_probe_attached{probe=\"socket_pressure\",attach=\"iter\"} 1\n",
                           "sockpressure_bpf_program_missed_runs_total{program=\"clamp_tp_btf\"} 3\n",
                           "sockpressure_bpf_program_attached_seconds_total{program=\"clamp_tp_btf\"} 12.5\n",
                           "sockpressure_bpf_program_attaches_total{program=\"clamp_tp_btf\"} 2\n",
                           "sockpressure_bpf_program_attach_failures_total{program=\"clamp_tp_btf\"} 1\n"}) {
    EXPECT_TRUE(absl::StrContains(text, line)) << line;
  }
}

TEST(TextWriterTest, Values) {
  EXPECT_EQ(FormatSampleValue(3), "3");
  EXPECT_EQ(FormatSampleValue(0.25), "0.25");
  EXPECT_EQ(FormatSampleValue(1e20), "1e+20");
  EXPECT_EQ(FormatSampleValue(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(FormatSampleValue(std::nan("")), "NaN");
}

TEST(ProtoWriterTest, RoundTripsDelimitedFamilies) {
  auto w = NewProtoWriter();
  WriteSnapshotMetrics(SmallSnapshot(), {"0.1.0", "abc", "GNU 12"}, {}, *w);
  std::string bytes = w->Finish();
  google::protobuf::io::ArrayInputStream in(bytes.data(), static_cast<int>(bytes.size()));
  int families = 0;
  bool found = false;
  for (;;) {
    io::prometheus::client::MetricFamily f;
    bool clean_eof = false;
    if (!google::protobuf::util::ParseDelimitedFromZeroCopyStream(&f, &in, &clean_eof)) {
      EXPECT_TRUE(clean_eof);
      break;
    }
    ++families;
    EXPECT_GT(f.metric_size(), 0) << f.name();
    if (f.name() == "sockpressure_memcg_socket_pressure_seconds_total") {
      found = true;
      EXPECT_EQ(f.type(), io::prometheus::client::COUNTER);
      ASSERT_EQ(f.metric_size(), 1);
      EXPECT_DOUBLE_EQ(f.metric(0).counter().value(), 1.5);
      EXPECT_EQ(f.metric(0).label(0).name(), "cgroup");
      EXPECT_EQ(f.metric(0).label(2).value(), "proxy-1");
    }
  }
  EXPECT_TRUE(found);
  EXPECT_GT(families, 10);
}

// The hand-written wire format is byte for byte what the generated classes
// write: parse every family back and serialise it again.
TEST(ProtoWriterTest, SameBytesAsTheGeneratedClasses) {
  Snapshot s = SmallSnapshot();
  s.cgroups.Mutable(1).path = std::string(300, 'p') + "/\xff\xfe";  // long (2-byte varints) and escaped
  auto w = NewProtoWriter();
  EmitOptions options;
  options.context = true;
  WriteSnapshotMetrics(s, {"0.1.0", "abc", "GNU 12"}, options, *w);
  std::string bytes = w->Finish();
  google::protobuf::io::ArrayInputStream in(bytes.data(), static_cast<int>(bytes.size()));
  std::string again;
  {
    google::protobuf::io::StringOutputStream out(&again);
    for (;;) {
      io::prometheus::client::MetricFamily f;
      bool clean_eof = false;
      if (!google::protobuf::util::ParseDelimitedFromZeroCopyStream(&f, &in, &clean_eof)) {
        ASSERT_TRUE(clean_eof);
        break;
      }
      ASSERT_TRUE(google::protobuf::util::SerializeDelimitedToZeroCopyStream(f, &out));
    }
  }
  EXPECT_EQ(bytes, again);
  EXPECT_GT(bytes.size(), 1000u);
}

TEST(SnapshotMetricsTest, TcpExtNames) {
  EXPECT_EQ(TcpExtMetricPart("PruneCalled"), "prune_called");
  EXPECT_EQ(TcpExtMetricPart("TCPRcvQDrop"), "rcv_q_drop");
  EXPECT_EQ(TcpExtMetricPart("TCPOFODrop"), "ofo_drop");
  EXPECT_EQ(TcpExtMetricPart("OfoPruned"), "ofo_pruned");
  EXPECT_EQ(TcpExtMetricPart("TCPWantZeroWindowAdv"), "want_zero_window_adv");
  EXPECT_EQ(TcpExtMetricPart("TCPMemoryPressures"), "memory_pressures");
}

// The node table has a row for every TcpExt counter the netstat collector
// reads, named from it, in the collector's order: a counter added there and
// not here would be read and never exported.
TEST(SnapshotMetricsTest, EveryTcpExtCounterHasItsNodeFamily) {
  std::vector<std::string> tcp_families;
  for (const SnapshotFamily& f : NodeFamilies()) {
    std::string name = f.name;
    if (absl::StartsWith(name, "sockpressure_node_tcp_") && absl::EndsWith(name, "_total")) {
      tcp_families.push_back(name);
    }
  }
  std::vector<std::string> expected;
  for (absl::string_view counter : ExportedTcpExtCounters()) {
    // Milliseconds, exported as seconds under a name of its own.
    expected.push_back(counter == "TCPMemoryPressuresChrono"
                           ? "sockpressure_node_tcp_memory_pressure_seconds_total"
                           : absl::StrCat("sockpressure_node_tcp_", TcpExtMetricPart(counter), "_total"));
  }
  EXPECT_EQ(tcp_families, expected);
}

TEST(MetricsEndpointTest, AcceptNegotiation) {
  EXPECT_TRUE(MetricsEndpoint::WantsProtobuf(
      "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.7,"
      "text/plain;version=0.0.4;q=0.3,*/*;q=0.1"));
  EXPECT_FALSE(MetricsEndpoint::WantsProtobuf("text/plain;version=0.0.4;q=1,*/*;q=0.1"));
  EXPECT_FALSE(MetricsEndpoint::WantsProtobuf(""));
}

// Issue 13: --sample.interval=inf busy-looped the sampler and
// --web.max-requests=2^31 overflowed into "every request gets 503".
TEST(FlagSetTest, DurationsAndIntegersHaveRanges) {
  int64_t n = 5;
  absl::Duration d = absl::Seconds(1);
  FlagSet flags;
  flags.Int("web.max-requests", &n, "");
  flags.Duration("sample.interval", &d, "");
  auto parse = [&](const char* arg) {
    const char* argv[] = {"x", arg};
    std::vector<std::string> positional;
    bool help = false, version = false;
    return flags.Parse(2, argv, &positional, &help, &version);
  };
  for (const char* bad : {"--sample.interval=inf", "--sample.interval=-inf", "--sample.interval=100000000h",
                          "--sample.interval=-1s", "--web.max-requests=2147483648", "--web.max-requests=-1",
                          "--web.max-requests=99999999999999"}) {
    absl::Status st = parse(bad);
    EXPECT_FALSE(st.ok()) << bad;
    EXPECT_NE(std::string(st.message()).find("between"), std::string::npos) << st;
  }
  EXPECT_TRUE(parse("--sample.interval=24h").ok());
  EXPECT_TRUE(parse("--web.max-requests=2147483647").ok());
  EXPECT_EQ(n, 2147483647);
}

TEST(FlagSetTest, NodeExporterStyle) {
  std::string listen = ":19100";
  bool collector = true;
  int64_t max = 5000;
  absl::Duration interval = absl::Seconds(1);
  std::vector<std::string> urls;
  FlagSet flags;
  flags.String("web.listen-address", &listen, "");
  flags.Bool("collector.cgroupfs", &collector, "");
  flags.Int("cgroup.max", &max, "");
  flags.Duration("sample.interval", &interval, "");
  flags.StringList("alertmanager.url", &urls, "");
  const char* argv[] = {"x", "--web.listen-address=127.0.0.1:1", "--no-collector.cgroupfs", "--cgroup.max", "7",
                        "--sample.interval=250ms", "--alertmanager.url=a", "--alertmanager.url=b", "doctor"};
  std::vector<std::string> positional;
  bool help = false, version = false;
  ASSERT_TRUE(flags.Parse(9, argv, &positional, &help, &version).ok());
  EXPECT_EQ(listen, "127.0.0.1:1");
  EXPECT_FALSE(collector);
  EXPECT_EQ(max, 7);
  EXPECT_EQ(interval, absl::Milliseconds(250));
  EXPECT_EQ(urls, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(positional, (std::vector<std::string>{"doctor"}));
  EXPECT_TRUE(absl::StrContains(flags.Usage("x"), "--[no-]collector.cgroupfs"));

  const char* bad[] = {"x", "--cgroup.max=lots"};
  EXPECT_FALSE(flags.Parse(2, bad, &positional, &help, &version).ok());
  const char* unknown[] = {"x", "--nope"};
  auto st = flags.Parse(2, unknown, &positional, &help, &version);
  EXPECT_TRUE(absl::StrContains(st.message(), "unknown flag --nope"));
  const char* missing[] = {"x", "--cgroup.max"};
  EXPECT_FALSE(flags.Parse(2, missing, &positional, &help, &version).ok());
}

// Issue 50: --metrics.profile picks the profile; --[no-]collector.context,
// its old spelling, still does when given, over the new flag.
TEST(FlagSetTest, MetricsProfileAndItsDeprecatedSpelling) {
  auto profile = [](std::vector<const char*> args) -> absl::StatusOr<bool> {
    HttpFlags f;
    FlagSet flags;
    RegisterHttpFlags(&flags, &f);
    args.insert(args.begin(), "x");
    std::vector<std::string> positional;
    bool help = false, version = false;
    absl::Status parsed = flags.Parse(static_cast<int>(args.size()), args.data(), &positional, &help, &version);
    if (!parsed.ok()) return parsed;
    absl::Status resolved = MetricsProfileFromFlags(flags, &f);
    if (!resolved.ok()) return resolved;
    return f.context;
  };
  EXPECT_EQ(*profile({}), false);
  EXPECT_EQ(*profile({"--metrics.profile=core"}), false);
  EXPECT_EQ(*profile({"--metrics.profile=context"}), true);
  EXPECT_EQ(*profile({"--collector.context"}), true);
  EXPECT_EQ(*profile({"--metrics.profile=context", "--no-collector.context"}), false);
  absl::StatusOr<bool> bad = profile({"--metrics.profile=everything"});
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "core or context")) << bad.status();
}

}  // namespace
}  // namespace sockpressure
