#include "exporter/common/thread_privilege.h"

#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace sockpressure {

void NameThisThread(const char* name) { ::prctl(PR_SET_NAME, name, 0, 0, 0); }

void ForbidNewPrivileges() { ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); }

void EnterUnprivilegedThread(const char* name) {
  if (name != nullptr) NameThisThread(name);
  // The bounding set first: dropping from it needs CAP_SETPCAP, which the
  // capset() below gives up. Where it fails (not granted), no_new_privs
  // still keeps an exec from using what is left in it.
  for (int c = 0; c <= 63; ++c) {
    if (::prctl(PR_CAPBSET_READ, c, 0, 0, 0) < 0) break;
    ::prctl(PR_CAPBSET_DROP, c, 0, 0, 0);
  }
  ::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};  // pid 0: this thread
  __user_cap_data_struct none[2] = {};
  ::syscall(SYS_capset, &hdr, none);
  ForbidNewPrivileges();
}

}  // namespace sockpressure
