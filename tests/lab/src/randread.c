// randread: random block reads over a file, forever (like fio randread).
//
// Why random and larger than RAM: a sequential use-once stream keeps the
// kernel's cache_trim_mode on and reclaim then scans file pages only, so the
// other cgroup's anon is never scanned and nothing throttles.  Random
// re-reads of a file bigger than memory cause refaults / workingset
// activations, which turns off cache trimming and makes reclaim scan anon LRUs
// of every cgroup, including the ballast's.
//
// With "mmap" the file is mapped and each block copied out of the mapping, as
// fio's ioengine=mmap does (the original report's job). Mapped pages that a
// reader touched are referenced in its page tables, so reclaim rotates them
// instead of freeing them: the reader's own cgroup is scanned without reclaim
// and gets socket pressure, with no socket to throttle.
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: randread FILE [BLOCK_KIB [mmap]]\n");
    return 2;
  }
  size_t bs = (argc > 2 ? strtoul(argv[2], NULL, 10) : 64) << 10;
  int fd = open(argv[1], O_RDONLY);
  if (fd < 0) {
    perror("randread: open");
    return 1;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || (uint64_t)st.st_size < bs) {
    fprintf(stderr, "randread: file too small\n");
    return 1;
  }
  uint64_t blocks = (uint64_t)st.st_size / bs;
  char *buf = malloc(bs);
  const char *map = NULL;
  if (argc > 3 && strcmp(argv[3], "mmap") == 0) {
    map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
      perror("randread: mmap");
      return 1;
    }
  }
  // Seeded per process: parallel readers must not read the same sequence.
  uint64_t x = (((uint64_t)time(NULL) << 20) ^ ((uint64_t)getpid() * 0x9e3779b97f4a7c15ull)) | 1, n = 0;
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    const uint64_t off = (x % blocks) * bs;
    if (map != NULL) {
      memcpy(buf, map + off, bs);
      __asm__ volatile("" : : "r"(buf) : "memory");  // the copy is the read: keep it
    } else if (pread(fd, buf, bs, (off_t)off) < 0) {
      perror("randread: pread");
      return 1;
    }
    // Report the rate now and then so a stalled disk is visible in the log.
    if (++n % 4096 == 0) {
      clock_gettime(CLOCK_MONOTONIC, &t);
      double s = (t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9;
      printf("randread: %.1f MB/s\n", n * bs / s / 1e6);
      fflush(stdout);
    }
  }
}
