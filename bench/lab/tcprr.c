// tcprr: small-message request/response over one TCP connection, the worst case for a per-segment
// probe (every message is a segment and most draw an ACK or a window update).
//
//   tcprr server PORT SECONDS            accept one connection, answer each SIZE-byte request with
//                                        SIZE bytes until the client closes (or SECONDS pass)
//   tcprr client ADDR PORT SECONDS SIZE  send a request, wait for the whole answer, again, for SECONDS;
//                                        prints "LAB rr_result transactions=N bytes=B seconds=S" (B: both
//                                        directions, payload only)
//
// TCP_NODELAY on both ends: each message leaves at once, as an RPC stack's would.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

// Reads exactly n bytes; 0 on EOF or error.
static int read_full(int fd, char *buf, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = read(fd, buf + got, n - got);
    if (r <= 0) return 0;
    got += (size_t)r;
  }
  return 1;
}

static int write_full(int fd, const char *buf, size_t n) {
  size_t put = 0;
  while (put < n) {
    ssize_t w = write(fd, buf + put, n - put);
    if (w <= 0) return 0;
    put += (size_t)w;
  }
  return 1;
}

static void nodelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static int server(int port, double seconds) {
  int ls = socket(AF_INET, SOCK_STREAM, 0), one = 1;
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_ANY)};
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof(a)) || listen(ls, 1)) {
    perror("tcprr server");
    return 1;
  }
  printf("LAB rr_listening port=%d\n", port);
  fflush(stdout);
  int fd = accept(ls, NULL, NULL);
  if (fd < 0) return 1;
  nodelay(fd);
  char buf[65536];
  unsigned size;
  // The first 4 bytes carry the message size; every message after is that size.
  if (!read_full(fd, (char *)&size, sizeof(size)) || size == 0 || size > sizeof(buf)) return 1;
  double end = now() + seconds;
  while (now() < end && read_full(fd, buf, size) && write_full(fd, buf, size)) {
  }
  close(fd);
  return 0;
}

static int client(const char *addr, int port, double seconds, unsigned size) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
  char buf[65536];
  if (size == 0 || size > sizeof(buf) || inet_pton(AF_INET, addr, &a.sin_addr) != 1) {
    fprintf(stderr, "tcprr: bad address or size\n");
    return 2;
  }
  for (int i = 0; i < 50 && connect(fd, (struct sockaddr *)&a, sizeof(a)); i++) usleep(100000);
  nodelay(fd);
  memset(buf, 'r', size);
  if (!write_full(fd, (const char *)&size, sizeof(size))) {
    printf("LAB rr_error connect\n");
    return 1;
  }
  unsigned long long n = 0;
  double t0 = now(), end = t0 + seconds;
  while (now() < end && write_full(fd, buf, size) && read_full(fd, buf, size)) n++;
  printf("LAB rr_result transactions=%llu bytes=%llu seconds=%.2f\n", n, n * 2ULL * size, now() - t0);
  close(fd);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 4 && !strcmp(argv[1], "server")) return server(atoi(argv[2]), atof(argv[3]));
  if (argc == 6 && !strcmp(argv[1], "client")) return client(argv[2], atoi(argv[3]), atof(argv[4]), (unsigned)atoi(argv[5]));
  fprintf(stderr, "usage: tcprr server PORT SECONDS | tcprr client ADDR PORT SECONDS SIZE\n");
  return 2;
}
