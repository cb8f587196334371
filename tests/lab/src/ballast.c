// ballast: keep N MiB (or N KiB, written "Nk") of anonymous memory hot, forever.
//
// Why: the throttling needs a cgroup whose anon pages reclaim keeps scanning
// but cannot free (they are referenced again before the next scan), so that
// vmpressure sees scanned >> reclaimed for that cgroup.  The pages are filled
// with pseudo-random bytes so zram cannot store them as same-filled pages and
// swapping them out costs real work, as in production.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: ballast MIB|KIBk [PASS_MS]\n");
    return 2;
  }
  // KiB for the scale bench, whose thousands of reclaimers must each fit in a few hundred KiB.
  char *unit;
  size_t n = strtoul(argv[1], &unit, 10);
  size_t len = *unit == 'k' ? n << 10 : n << 20;
  // A pass over all pages at most every PASS_MS (0 = continuously, the lab's default). Pacing
  // saves a vCPU, but on a starved TCG host a paced pass can come too late: once reclaim finds a
  // page unreferenced it swaps it out, the refault slows the next pass, and the ballast stops
  // being hot (measured: pgsteal 104k of 470k scanned at 500 ms, ~0 when continuous).
  long pass_ms = argc > 2 ? strtol(argv[2], NULL, 10) : 0;
  long page = sysconf(_SC_PAGESIZE);
  unsigned char *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    perror("ballast: mmap");
    return 1;
  }
  // xorshift64: cheap, incompressible enough for zram's lzo-rle.
  uint64_t x = 0x9e3779b97f4a7c15ull;
  for (size_t i = 0; i < len; i += 8) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *(uint64_t *)(p + i) = x;
  }
  printf("ballast: %zu KiB resident\n", len >> 10);
  fflush(stdout);
  // Touch every page in a loop: a write per page sets the accessed bit, so
  // each reclaim scan finds the page referenced and rotates it instead of
  // freeing it.  Writing (not just reading) also keeps swapped-in pages dirty.
  for (uint64_t round = 0;; round++) {
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (size_t i = 0; i < len; i += (size_t)page) p[i] = (unsigned char)round;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    long spent_ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
    if (pass_ms > spent_ms) usleep((useconds_t)(pass_ms - spent_ms) * 1000);
  }
}
