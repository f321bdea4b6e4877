// SPDX-License-Identifier: MIT
// The JIT cache key names the toolchain, not only its reported version (lib/README.md, JIT cache): two fake
// compilers that both report 9.0 (as hiprtc does in Debian's ROCm 5.7, 6.4 and 7.2) have different
// identities, and a change to a device library changes the identity of the same compiler.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include "../../lib/src/platform/rtc_impl.hpp"

namespace {

using mori::symm::detail::load_rtc;
using mori::symm::detail::RtcLibrary;

RtcLibrary fake(const std::string& file, const std::string& data_folder = "") {
  RtcLibrary l;
  l.name = "fakertc";
  l.arch_option = "--offload-arch=";
  l.code_size = "GetCodeSize";
  l.code = "GetCode";
  l.files = {file};
  if (!data_folder.empty()) l.data_folders = {data_folder};
  return l;
}

void write(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
  ASSERT_TRUE(f.good()) << path;
}

TEST(RtcIdentity, TwoToolchainsOfOneVersionDiffer) {
  std::string why;
  auto a = load_rtc(fake(MORI_FAKE_RTC_A), &why);
  ASSERT_TRUE(a) << why;
  auto b = load_rtc(fake(MORI_FAKE_RTC_B), &why);
  ASSERT_TRUE(b) << why;
  // What the cache key had before: name and version, the same for both.
  EXPECT_EQ(a->name(), b->name());
  EXPECT_EQ(a->version(), "9.0");
  EXPECT_EQ(b->version(), "9.0");
  // What it has now.
  EXPECT_NE(a->identity(), b->identity());
  EXPECT_NE(a->identity().find(std::filesystem::canonical(MORI_FAKE_RTC_A).string()), std::string::npos)
      << a->identity();
  EXPECT_EQ(a->identity(), a->identity());  // computed once, stable
}

TEST(RtcIdentity, SameLibraryOtherContentAtOnePathDiffers) {
  // One path, two files: the build id (or content hash) tells them apart, not the path alone.
  const auto dir =
      std::filesystem::temp_directory_path() / ("mori-rtc-identity-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir / "a");
  std::filesystem::create_directories(dir / "b");
  std::filesystem::copy_file(MORI_FAKE_RTC_A, dir / "a/libfakertc.so");
  std::filesystem::copy_file(MORI_FAKE_RTC_B, dir / "b/libfakertc.so");
  std::string why;
  auto a = load_rtc(fake((dir / "a/libfakertc.so").string()), &why);
  ASSERT_TRUE(a) << why;
  auto b = load_rtc(fake((dir / "b/libfakertc.so").string()), &why);
  ASSERT_TRUE(b) << why;
  auto strip = [&](std::string id, const std::string& sub) {
    const auto at = id.find(sub);
    return at == std::string::npos ? id : id.erase(at, sub.size());
  };
  EXPECT_NE(strip(a->identity(), "/a/"), strip(b->identity(), "/b/"));
  std::filesystem::remove_all(dir);
}

TEST(RtcIdentity, DeviceLibrariesArePartOfIt) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("mori-rtc-bitcode-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  write((dir / "ocml.bc").string(), "one");
  std::string why;
  auto before = load_rtc(fake(MORI_FAKE_RTC_A, dir.string()), &why);
  ASSERT_TRUE(before) << why;
  const std::string id_before = before->identity();
  EXPECT_NE(id_before.find(dir.string() + ": 1 files"), std::string::npos) << id_before;
  write((dir / "ocml.bc").string(), "two");
  auto after = load_rtc(fake(MORI_FAKE_RTC_A, dir.string()), &why);
  ASSERT_TRUE(after) << why;
  EXPECT_NE(id_before, after->identity());
  std::filesystem::remove_all(dir);
}

}  // namespace
