// cgtree: the lab benchmark's kubelet-shaped cgroup tree and its peer.
//
//   cgtree mk ROOT N     create N memory cgroups under ROOT shaped like a kubelet node:
//                        kubepods.slice/kubepods-burstable.slice/
//                          kubepods-burstable-pod<uid>.slice/cri-containerd-<64 hex>.scope
//                        (3 containers per pod, +memory in every subtree_control); prints each
//                        container's path, one a line
//   cgtree pass ROOT K   K passes of open/read/close over every memory.stat under ROOT, walking
//                        the directories as any cgroupfs reader must; prints the smallest pass's
//                        CPU time (user + system) of this process, and the files read
//
// Why C: a shell loop forks per mkdir, which under TCG turns 30,000 cgroups into many minutes,
// and the peer must be the cheapest honest reader, so its cost is the kernel's, not a runtime's.
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static unsigned long long rng = 0x9e3779b97f4a7c15ULL;

static unsigned next_rand(void) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (unsigned)(rng >> 32);
}

static void hex(char *out, int digits) {
  static const char k[] = "0123456789abcdef";
  for (int i = 0; i < digits; i++) out[i] = k[next_rand() & 15];
  out[digits] = 0;
}

static void die(const char *what, const char *path) {
  fprintf(stderr, "cgtree: %s %s: %s\n", what, path, strerror(errno));
  exit(1);
}

static void make_memcg(const char *path, int parent_of_more) {
  if (mkdir(path, 0755) != 0 && errno != EEXIST) die("mkdir", path);
  if (!parent_of_more) return;
  char ctl[4096];
  snprintf(ctl, sizeof ctl, "%s/cgroup.subtree_control", path);
  int fd = open(ctl, O_WRONLY);
  if (fd < 0 || write(fd, "+memory", 7) != 7) die("+memory", ctl);
  close(fd);
}

static int make_tree(const char *root, long n) {
  char slice[4096], burst[4096], pod[4096], ctr[4096], uid[40], id[65];
  snprintf(slice, sizeof slice, "%s/kubepods.slice", root);
  snprintf(burst, sizeof burst, "%s/kubepods-burstable.slice", slice);
  make_memcg(slice, 1);
  make_memcg(burst, 1);
  // Two slices, then pods of one pod cgroup and three containers: N counts all of them.
  for (long made = 2; made + 4 <= n || made == 2; made += 4) {
    hex(uid, 32);
    // systemd spells the pod uid with underscores where kubelet has dashes.
    snprintf(pod, sizeof pod, "%s/kubepods-burstable-pod%.8s_%.4s_%.4s_%.4s_%.12s.slice", burst, uid,
             uid + 8, uid + 12, uid + 16, uid + 20);
    make_memcg(pod, 1);
    for (int c = 0; c < 3; c++) {
      hex(id, 64);
      snprintf(ctr, sizeof ctr, "%s/cri-containerd-%s.scope", pod, id);
      make_memcg(ctr, 0);
      printf("%s\n", ctr);
    }
  }
  return 0;
}

static long files;
static char buf[1 << 16];

static void read_stats(char *path, size_t len) {
  snprintf(path + len, 4096 - len, "/memory.stat");
  int fd = open(path, O_RDONLY);
  if (fd >= 0) {
    while (read(fd, buf, sizeof buf) > 0) {
    }
    close(fd);
    files++;
  }
  path[len] = 0;
  DIR *d = opendir(path);
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_type != DT_DIR || e->d_name[0] == '.') continue;
    size_t l = len + 1 + strlen(e->d_name);
    if (l + 16 >= 4096) continue;
    path[len] = '/';
    strcpy(path + len + 1, e->d_name);
    read_stats(path, l);
    path[len] = 0;
  }
  closedir(d);
}

static double cpu_seconds(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static int passes(const char *root, int k) {
  char path[4096];
  double best = -1;
  for (int i = 0; i < k; i++) {
    snprintf(path, sizeof path, "%s", root);
    files = 0;
    double t0 = cpu_seconds();
    read_stats(path, strlen(path));
    double t = cpu_seconds() - t0;
    if (best < 0 || t < best) best = t;
  }
  printf("cpu_s=%.6f files=%ld passes=%d\n", best, files, k);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 4 && strcmp(argv[1], "mk") == 0) return make_tree(argv[2], strtol(argv[3], NULL, 10));
  if (argc == 4 && strcmp(argv[1], "pass") == 0) return passes(argv[2], atoi(argv[3]));
  fprintf(stderr, "usage: cgtree mk ROOT N | cgtree pass ROOT K\n");
  return 2;
}
