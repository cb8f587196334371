// The `cgroup` label: systemd slices that the next slice's name implies are
// left out of a leading run, nothing else changes.
#include "exporter/common/cgroup_label.h"

#include "gtest/gtest.h"

namespace sockpressure {
namespace {

TEST(CgroupLabelTest, LeavesOutSlicesTheNextSliceImplies) {
  EXPECT_EQ(CgroupLabel("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod6f1c.slice/"
                        "cri-containerd-cfdf.scope"),
            "/kubepods-burstable-pod6f1c.slice/cri-containerd-cfdf.scope");
  EXPECT_EQ(CgroupLabel("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod6f1c.slice"),
            "/kubepods-burstable-pod6f1c.slice");
  EXPECT_EQ(CgroupLabel("/kubepods.slice/kubepods-burstable.slice"), "/kubepods-burstable.slice");
  EXPECT_EQ(CgroupLabel("/kubepods.slice/kubepods-pod1.slice/crio-9.scope"), "/kubepods-pod1.slice/crio-9.scope");
  EXPECT_EQ(CgroupLabel("/user.slice/user-1000.slice/session-3.scope"), "/user-1000.slice/session-3.scope");
}

TEST(CgroupLabelTest, KeepsEverythingElse) {
  for (const char* path : {"/", "", "/kubepods.slice", "/system.slice/containerd.service",
                           "/kubepods/burstable/pod6f1c/cfdf", "/lab/a", "/workload.slice/proxy.service",
                           // a dash that is not the parent's stem, and a stem that is only a prefix
                           "/kube.slice/kubepods-burstable.slice", "/a.slice/ab-c.slice",
                           // not a slice below: nothing is implied
                           "/kubepods.slice/kubepods-x.scope", "relative/kubepods.slice/kubepods-a.slice"}) {
    EXPECT_EQ(CgroupLabel(path), path) << path;
  }
}

TEST(CgroupLabelTest, OnlyALeadingRunIsLeftOut) {
  // Deeper slices stay as they are: the label is always a suffix of the path.
  EXPECT_EQ(CgroupLabel("/system.slice/system-getty.slice/getty@tty1.service"),
            "/system-getty.slice/getty@tty1.service");
  EXPECT_EQ(CgroupLabel("/lab/a.slice/a-b.slice"), "/lab/a.slice/a-b.slice");
}

TEST(CgroupLabelTest, FiltersAcceptThePathOrTheLabel) {
  const char* path = "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1.slice";
  EXPECT_TRUE(NamesCgroup(path, path));
  EXPECT_TRUE(NamesCgroup("/kubepods-besteffort-pod1.slice", path));
  EXPECT_FALSE(NamesCgroup("/kubepods-besteffort.slice", path));
  EXPECT_FALSE(NamesCgroup("", path));
}

}  // namespace
}  // namespace sockpressure
