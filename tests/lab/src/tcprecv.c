// tcprecv: accept one TCP connection, drain it, and watch its receive window.
//
// Why a custom receiver: the lab must see the clamp from inside the socket
// (rcv_ssthresh pinned at 4*advmss) at a finer grain than a 1 s `ss` poll, so
// that the detection latency it reports starts at the real first clamp.  The
// process must already be in the target cgroup when it calls accept(): the
// kernel binds sk_memcg to the accepting task's memcg.
//
// READ_KBPS (optional, 0 = as fast as it can) paces the reads: a slow reader
// keeps its receive queue full, so every segment that arrives needs receive
// memory charged to the cgroup (the lab's `prune` and `slowread` conditions).
//
// Lines starting with "LAB " are parsed by the host side of the lab.
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: tcprecv PORT SECONDS [ACCEPT_TIMEOUT_S [READ_KBPS]]\n");
    return 2;
  }
  int port = atoi(argv[1]);
  double secs = atof(argv[2]);
  int accept_timeout_ms = (argc > 3 ? atoi(argv[3]) : 60) * 1000;
  double read_Bps = (argc > 4 ? atof(argv[4]) : 0) * 1e3;

  int ls = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
  if (bind(ls, (struct sockaddr *)&a, sizeof a) || listen(ls, 1)) {
    perror("tcprecv: bind/listen");
    return 1;
  }
  printf("LAB recv_listening port=%d\n", port);
  fflush(stdout);
  // Bounded wait: a broken veth/netns set-up must fail the run, not hang it.
  struct pollfd pl = {.fd = ls, .events = POLLIN};
  if (poll(&pl, 1, accept_timeout_ms) != 1) {
    printf("LAB recv_error accept_timeout\n");
    return 1;
  }
  int s = accept(ls, NULL, NULL);
  if (s < 0) {
    perror("tcprecv: accept");
    return 1;
  }
  static char buf[1 << 18];
  double t0 = now(), next_info = t0, next_report = t0 + 1;
  uint64_t total = 0, last_total = 0;
  unsigned checks = 0, clamped_checks = 0, max_ssthresh = 0;
  int seen_clamp = 0, eof = 0;
  struct tcp_info ti;
  while (!eof && now() - t0 < secs) {
    // Paced: read only what the rate allows so far, in small bites, and
    // otherwise just wait (the data stays queued in the socket).
    size_t want = sizeof buf;
    if (read_Bps > 0) {
      double allowed = read_Bps * (now() - t0) - (double)total;
      want = allowed >= 4096 ? 4096 : 0;
    }
    struct pollfd p = {.fd = s, .events = POLLIN};
    if (want == 0) {
      poll(NULL, 0, 10);
    } else if (poll(&p, 1, 50) == 1) {
      ssize_t n = read(s, buf, want);
      if (n < 0 && errno != EINTR) break;
      if (n == 0) eof = 1;
      if (n > 0) total += (uint64_t)n;
    }
    double t = now();
    if (t >= next_info) {
      // 20 Hz is cheap under TCG and bounds the first-clamp timestamp error.
      next_info = t + 0.05;
      socklen_t l = sizeof ti;
      if (getsockopt(s, IPPROTO_TCP, TCP_INFO, &ti, &l) == 0) {
        int clamped = ti.tcpi_advmss && ti.tcpi_rcv_ssthresh <= 4 * ti.tcpi_advmss;
        checks++;
        clamped_checks += clamped;
        if (ti.tcpi_rcv_ssthresh > max_ssthresh) max_ssthresh = ti.tcpi_rcv_ssthresh;
        if (clamped && !seen_clamp) {
          seen_clamp = 1;
          printf("LAB clamp_first t=%.2f rcv_ssthresh=%u advmss=%u\n", t - t0,
                 ti.tcpi_rcv_ssthresh, ti.tcpi_advmss);
          fflush(stdout);
        }
      }
    }
    if (t >= next_report) {
      next_report += 1;
      printf("LAB recv_sample t=%.0f kBps=%.0f rcv_ssthresh=%u advmss=%u rcv_space=%u\n",
             t - t0, (total - last_total) / 1e3, ti.tcpi_rcv_ssthresh, ti.tcpi_advmss,
             ti.tcpi_rcv_space);
      fflush(stdout);
      last_total = total;
    }
  }
  double el = now() - t0;
  printf("LAB recv_result bytes=%llu seconds=%.1f kBps=%.0f checks=%u clamped_checks=%u "
         "max_rcv_ssthresh=%u\n",
         (unsigned long long)total, el, total / el / 1e3, checks, clamped_checks, max_ssthresh);
  fflush(stdout);
  close(s);
  return 0;
}
