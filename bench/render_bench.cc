// /metrics render cost on a generated cgroup v2 tree, per exposition profile.
//
// usage: render_bench CGROUP_ROOT REPS
// Samples the tree once with the real cgroupfs source, then renders the
// snapshot REPS times per format and profile through MetricsEndpoint's
// streams, piece by piece (the code a scrape runs) and prints one key=value line per profile: median
// render time per format, bytes per cgroup, and the peer measured in the
// same process and run: open/read/close of a file of the same size as the
// text body (what serving a pre-rendered file would cost). bench/render.sh
// adds Prometheus' own parser (promtool) as a second peer.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "exporter/outputs/metrics_endpoint.h"
#include "exporter/sampler/sampler.h"
#include "exporter/sources/cgroupfs_source.h"

namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <typename F>
double MedianMs(int reps, F f) {
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  return Median(t);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace sockpressure;
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s CGROUP_ROOT REPS\n", argv[0]);
    return 2;
  }
  Paths paths;
  paths.cgroupfs = argv[1];
  const int reps = std::max(1, std::stoi(argv[2]));
  std::vector<std::unique_ptr<Source>> sources;
  sources.push_back(NewCgroupfsSource(paths, {1000000, 10}));
  Sampler sampler(std::move(sources), std::make_unique<StateTracker>(), 1.0);
  sampler.SampleOnce();
  std::shared_ptr<const Snapshot> snap = sampler.SampleOnce();
  const size_t n = snap->cgroups.size();

  const std::string peer_file = std::string(argv[1]) + "/.render_peer";
  for (bool context : {false, true}) {
    EmitOptions options;
    options.context = context;
    MetricsEndpoint endpoint(&sampler, {"bench", "bench", "bench"}, options);
    size_t text_bytes = 0, proto_bytes = 0, text_series = 0;
    const std::string text = endpoint.RenderSnapshot(*snap, false);
    // As a scrape renders: the stream's pieces, each dropped once "sent".
    auto drain = [&](bool protobuf) {
      MetricsBody body = endpoint.OpenSnapshot(snap, protobuf);
      size_t bytes = 0;
      for (bool more = true; more;) {
        std::string piece;
        more = body.stream->Next(&piece);
        bytes += piece.size();
      }
      return bytes;
    };
    double text_ms = MedianMs(reps, [&] { text_bytes = drain(false); });
    double proto_ms = MedianMs(reps, [&] { proto_bytes = drain(true); });
    for (size_t p = 0; (p = text.find("{cgroup=", p)) != std::string::npos; ++p) ++text_series;

    // Peer: a plain read of a file as large as the text body.
    int fd = ::open(peer_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || ::write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size())) return 1;
    ::close(fd);
    std::string buf(text.size() + 4096, '\0');
    double read_ms = MedianMs(reps, [&] {
      int f = ::open(peer_file.c_str(), O_RDONLY | O_CLOEXEC);
      size_t off = 0;
      ssize_t r;
      while ((r = ::read(f, buf.data() + off, buf.size() - off)) > 0) off += static_cast<size_t>(r);
      ::close(f);
    });
    ::unlink(peer_file.c_str());
    std::printf(
        "profile=%s cgroups=%zu series_per_cgroup=%.2f text_bytes=%zu text_bytes_per_cgroup=%.0f "
        "proto_bytes=%zu text_render_ms=%.2f proto_render_ms=%.2f peer_read_same_size_ms=%.2f "
        "text_over_peer=%.1f proto_over_peer=%.1f\n",
        context ? "context" : "core", n, static_cast<double>(text_series) / static_cast<double>(n), text_bytes,
        static_cast<double>(text_bytes) / static_cast<double>(n), proto_bytes, text_ms, proto_ms, read_ms,
        text_ms / read_ms, proto_ms / read_ms);
    std::fflush(stdout);
  }
  return 0;
}
