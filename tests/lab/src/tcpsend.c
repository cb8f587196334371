// tcpsend: connect and write as fast as possible for a fixed time.
//
// Runs in the peer network namespace and the root cgroup: a root-cgroup
// socket is never under memcg socket pressure, so any slowdown measured is the
// receiver's clamped window, not the sender's.
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: tcpsend ADDR PORT SECONDS\n");
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[2]))};
  inet_pton(AF_INET, argv[1], &a.sin_addr);
  double secs = atof(argv[3]);
  int s = -1;
  // The receiver may still be starting; retry for a bounded time.
  for (double give_up = now() + 20; now() < give_up; usleep(100000)) {
    s = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(s, (struct sockaddr *)&a, sizeof a) == 0) break;
    close(s);
    s = -1;
  }
  if (s < 0) {
    printf("LAB send_error connect\n");
    return 1;
  }
  // A stopped receiver must not block the sender forever; a slow one (or one
  // whose segments the kernel drops, so the sender backs off) just makes the
  // sender wait until the end of its time.
  struct timeval tv = {.tv_sec = 2};
  setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  static char buf[1 << 16];
  for (size_t i = 0; i < sizeof buf; i++) buf[i] = (char)(i * 131 + 7);
  unsigned long long sent = 0;
  double t0 = now();
  while (now() - t0 < secs) {
    ssize_t n = write(s, buf, sizeof buf);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) continue;
    if (n <= 0) break;
    sent += (unsigned long long)n;
  }
  printf("LAB send_result bytes=%llu seconds=%.1f\n", sent, now() - t0);
  close(s);
  return 0;
}
