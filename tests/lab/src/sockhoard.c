// sockhoard: open N TCP sockets (never connected) and keep them until killed.
//
// Why: when the node's TCP memory is above tcp_mem[0], the kernel refuses
// receive memory to a socket of a memcg under socket pressure only if that
// socket holds more than its share of tcp_mem[2], and the share is
// tcp_mem[2] divided by the number of TCP sockets that exist
// (__sk_mem_raise_allocated(), sk_sockets_allocated_read_positive()). Idle
// sockets hold no memory, so they set the share without touching the node's
// TCP memory: with a few hundred of them a receiver with tens of KiB queued is
// over its share, while tcp_mem[2] stays far above what the node uses (so no
// socket is refused by the hard limit, and the control receiver never is).
//
// Lines starting with "LAB " are parsed by the host side of the lab.
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: sockhoard N\n");
    return 2;
  }
  int n = atoi(argv[1]), made = 0;
  for (; made < n; made++)
    if (socket(AF_INET, SOCK_STREAM, 0) < 0) break;
  printf("LAB sockhoard sockets=%d\n", made);
  fflush(stdout);
  for (;;) pause();
}
