// SPDX-License-Identifier: MIT
// The host runtime keeps the GPU rules that matter (issue "foundation", item 3).
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "mori/symm/base/error.hpp"
#include "mori/symm/platform/runtime.hpp"

using namespace mori::symm;

namespace {
constexpr std::size_t kSize = 64 * 1024;

void* map_rw(Runtime& rt, PhysHandle h, std::size_t size) {
  void* va = rt.reserve(size, 0);
  rt.map(va, size, h);
  rt.set_access(va, size, 0);
  return va;
}
}  // namespace

class HostRuntimeTest : public ::testing::TestWithParam<HandleType> {};

TEST_P(HostRuntimeTest, ImportedMappingSeesExporterBytes) {
  auto rt = make_host_runtime();
  PhysHandle h = rt->mem_create(0, kSize, GetParam());
  void* a = map_rw(*rt, h, kSize);
  PhysHandle imported;
  if (GetParam() == HandleType::posix_fd) {
    int fd = rt->export_fd(h);
    imported = rt->import_fd(fd, kSize);
    close(fd);
  } else {
    imported = rt->import_fabric(rt->export_fabric(h));
  }
  void* b = map_rw(*rt, imported, kSize);
  ASSERT_NE(a, b);
  std::memset(a, 0x3c, kSize);
  static_cast<char*>(a)[kSize - 1] = 7;
  EXPECT_EQ(static_cast<unsigned char*>(b)[0], 0x3c);
  EXPECT_EQ(static_cast<char*>(b)[kSize - 1], 7);
  static_cast<char*>(b)[5] = 9;  // and back
  EXPECT_EQ(static_cast<char*>(a)[5], 9);
  rt->unmap(b, kSize);
  rt->unmap(a, kSize);
  rt->free_reservation(b, kSize);
  rt->free_reservation(a, kSize);
  rt->release(imported);
  rt->release(h);
  auto live = rt->live_resources();
  EXPECT_EQ(live.handles, 0);
  EXPECT_EQ(live.mappings, 0);
  EXPECT_EQ(live.reservations, 0);
}

TEST_P(HostRuntimeTest, ImportInAnotherProcessSeesBytes) {
  auto rt = make_host_runtime();
  PhysHandle h = rt->mem_create(0, kSize, GetParam());
  void* a = map_rw(*rt, h, kSize);
  std::memset(a, 0, kSize);
  FabricBlob blob;
  int fd = -1;
  if (GetParam() == HandleType::fabric)
    blob = rt->export_fabric(h);
  else
    fd = rt->export_fd(h);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    auto child = make_host_runtime();
    PhysHandle ih =
        GetParam() == HandleType::fabric ? child->import_fabric(blob) : child->import_fd(fd, kSize);
    void* m = map_rw(*child, ih, kSize);
    std::memset(m, 0x5a, 128);
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(static_cast<unsigned char*>(a)[0], 0x5a);
  EXPECT_EQ(static_cast<unsigned char*>(a)[127], 0x5a);
  EXPECT_EQ(static_cast<unsigned char*>(a)[128], 0);
  if (fd >= 0) close(fd);
  rt->unmap(a, kSize);
  rt->free_reservation(a, kSize);
  rt->release(h);
}

TEST_P(HostRuntimeTest, ReleaseWhileMappedKeepsMemoryUntilUnmap) {
  auto rt = make_host_runtime();
  PhysHandle h = rt->mem_create(0, kSize, GetParam());
  void* a = map_rw(*rt, h, kSize);
  std::memset(a, 0x11, kSize);
  rt->release(h);
  EXPECT_EQ(rt->live_resources().handles, 0);
  // Still readable and writable through the mapping.
  EXPECT_EQ(static_cast<unsigned char*>(a)[100], 0x11);
  static_cast<unsigned char*>(a)[100] = 0x22;
  EXPECT_EQ(static_cast<unsigned char*>(a)[100], 0x22);
  // The mapping can still hand out a handle (hipMemRetainAllocationHandle).
  PhysHandle again = rt->retain(a);
  void* b = map_rw(*rt, again, kSize);
  EXPECT_EQ(static_cast<unsigned char*>(b)[100], 0x22);
  rt->unmap(b, kSize);
  rt->unmap(a, kSize);
  rt->release(again);
  rt->free_reservation(a, kSize);
  rt->free_reservation(b, kSize);
}

TEST_P(HostRuntimeTest, FreeingReservationWithMappingsIsAnErrorNotACrash) {
  auto rt = make_host_runtime();
  PhysHandle h = rt->mem_create(0, kSize, GetParam());
  void* a = map_rw(*rt, h, kSize);
  try {
    rt->free_reservation(a, kSize);
    FAIL() << "free_reservation with a live mapping must throw";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.api_error(), "IN_USE");
    EXPECT_NE(std::string(e.what()).find("free_reservation"), std::string::npos);
  }
  // Nothing was freed: the mapping still works and the normal order still succeeds.
  static_cast<char*>(a)[0] = 1;
  rt->unmap(a, kSize);
  rt->free_reservation(a, kSize);
  rt->release(h);
}

INSTANTIATE_TEST_SUITE_P(BothHandleTypes, HostRuntimeTest,
                         ::testing::Values(HandleType::posix_fd, HandleType::fabric),
                         [](const ::testing::TestParamInfo<HandleType>& p) {
                           return std::string(to_string(p.param));
                         });

TEST(HostRuntime, UnmapMustCoverWholeMappings) {
  auto rt = make_host_runtime();
  PhysHandle h1 = rt->mem_create(0, kSize, HandleType::posix_fd);
  PhysHandle h2 = rt->mem_create(0, kSize, HandleType::posix_fd);
  auto* base = static_cast<char*>(rt->reserve(2 * kSize, 0));
  rt->map(base, kSize, h1);
  rt->map(base + kSize, kSize, h2);
  EXPECT_THROW(rt->unmap(base, kSize / 2), ApiError);            // part of a mapping
  EXPECT_THROW(rt->map(base, kSize, h2), ApiError);              // already mapped
  EXPECT_THROW(rt->map(base + 2 * kSize, kSize, h1), ApiError);  // outside the reservation
  rt->unmap(base, 2 * kSize);  // one unmap over two whole mappings is allowed (CUDA semantics)
  EXPECT_EQ(rt->live_resources().mappings, 0);
  rt->free_reservation(base, 2 * kSize);
  rt->release(h1);
  rt->release(h2);
}

TEST(HostRuntime, FabricImportRejectsForeignNames) {
  auto rt = make_host_runtime();
  FabricBlob b;
  EXPECT_THROW(rt->import_fabric(b), ApiError);  // no magic
  // A blob pointing at another object of this process (stdin) is refused: inode and size must match.
  auto real = rt->mem_create(0, kSize, HandleType::fabric);
  FabricBlob good = rt->export_fabric(real);
  FabricBlob forged = good;
  const std::int32_t zero = 0;
  std::memcpy(forged.bytes.data() + 12, &zero, sizeof(zero));  // fd field -> 0
  EXPECT_THROW(rt->import_fabric(forged), ApiError);
  auto imported = rt->import_fabric(good);
  rt->release(imported);
  rt->release(real);
}

// import_fd takes only this runtime's own memory objects, of this uid, at least as large as asked: a
// descriptor of a regular file (that a sender with forged credentials sent) is never mapped and written into.
TEST(HostRuntime, FdImportRejectsForeignObjectsAndShortOnes) {
  auto rt = make_host_runtime();
  char path[] = "/tmp/mori-import-XXXXXX";
  const int file = mkstemp(path);
  ASSERT_GE(file, 0);
  unlink(path);
  ASSERT_EQ(ftruncate(file, kSize), 0);
  auto refused = [&](int fd, std::size_t size, const std::string& why) {
    try {
      rt->release(rt->import_fd(fd, size));
      ADD_FAILURE() << "imported: " << why;
    } catch (const ApiError& e) {
      EXPECT_EQ(e.api_error(), "NOT_PERMITTED") << e.what();
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  };
  refused(file, kSize, "not a memory object of this runtime");
  const int other = memfd_create("not-mori", MFD_CLOEXEC);
  ASSERT_EQ(ftruncate(other, kSize), 0);
  refused(other, kSize, "not a memory object of this runtime");
  auto own = rt->mem_create(0, kSize, HandleType::posix_fd);
  const int fd = rt->export_fd(own);
  refused(fd, 2 * kSize, "fewer than the 131072 requested");
  auto imported = rt->import_fd(fd, kSize);
  rt->release(imported);
  rt->release(own);
  close(fd);
  close(other);
  close(file);
  EXPECT_EQ(rt->live_resources().handles, 0);
}

TEST(HostRuntime, RejectsBadSizesAndDevices) {
  auto rt = make_host_runtime();
  EXPECT_THROW(rt->mem_create(0, 1000, HandleType::posix_fd), ApiError);
  EXPECT_THROW(rt->mem_create(1, kSize, HandleType::posix_fd), ApiError);
  EXPECT_THROW(rt->mem_create(0, kSize, HandleType::posix_fd, true), ApiError);
}
