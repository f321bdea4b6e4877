// SPDX-License-Identifier: MIT
// The AMD kernels' clock (docs/amd.md, `%globaltimer`): the device's wall-clock rate is a compile option of
// the AMD kernels and so part of the JIT cache key; the prelude's 100 MHz, an unknown rate and an absurd one
// compile alike, without the option. No compiler is loaded: jit_defines and jit_key are what Jit uses.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "mori/symm/jit/jit.hpp"

using namespace mori::symm;

namespace {

const std::string kWallClockOption = "-DMORI_WALLCLOCK_HZ=";

std::vector<std::string> options(const std::string& platform, std::uint64_t khz) {
  std::vector<std::string> o = {"--offload-arch=gfx950", "-std=c++17"};
  for (const auto& d : jit_defines(platform, khz)) o.push_back(d);
  return o;
}

std::string key(std::uint64_t khz) {
  const KernelSpec spec{"a2a.hip", {"a2a_push<1, 1>"}};
  const KernelSource source{"__global__ void k() {}", {{"abi.hip", "// abi"}}};
  return jit_key(spec, source, {"hiprtc", "9.0", "libhiprtc.so.7 build-id 1"}, "gfx950", "amd",
                 options("amd", khz));
}

bool has_wall_clock_option(const std::vector<std::string>& defines) {
  for (const auto& d : defines)
    if (d.rfind(kWallClockOption, 0) == 0) return true;
  return false;
}

}  // namespace

TEST(JitWallClock, AmdRateBecomesTheDefineInHz) {
  // 37.5 MHz and 1.6 GHz do not divide 1 GHz: the prelude's exact form takes them.
  const std::vector<std::string> want = {"-DMORI_KERNEL_PLATFORM_amd", "-DMORI_WALLCLOCK_HZ=37500000ull"};
  EXPECT_EQ(jit_defines("amd", 37500), want);
  EXPECT_EQ(jit_defines("amd", 1600000).back(), "-DMORI_WALLCLOCK_HZ=1600000000ull");
  EXPECT_EQ(jit_defines("amd", kWallClockMinKhz).back(), "-DMORI_WALLCLOCK_HZ=1000000ull");
  EXPECT_EQ(jit_defines("amd", kWallClockMaxKhz).back(), "-DMORI_WALLCLOCK_HZ=10000000000ull");
}

TEST(JitWallClock, DefaultUnknownAbsurdAndNvidiaCompileWithoutIt) {
  EXPECT_FALSE(has_wall_clock_option(jit_defines("amd", kWallClockDefaultKhz)));
  EXPECT_FALSE(has_wall_clock_option(jit_defines("amd", 0)));
  EXPECT_FALSE(has_wall_clock_option(jit_defines("amd", kWallClockMinKhz - 1)));
  EXPECT_FALSE(has_wall_clock_option(jit_defines("amd", kWallClockMaxKhz + 1)));
  EXPECT_EQ(jit_defines("cuda", 37500), std::vector<std::string>{"-DMORI_KERNEL_PLATFORM_cuda"});
}

TEST(JitWallClock, TheRateIsPartOfTheCacheKey) {
  // The same source at another rate must not load the other rate's image.
  EXPECT_NE(key(37500), key(0));
  EXPECT_NE(key(37500), key(25000));
  EXPECT_NE(key(1600000), key(37500));
  // A rate the kernels would compile without the option shares the default's entries (mori-probe
  // --jit-precompile fills those without a device).
  EXPECT_EQ(key(kWallClockDefaultKhz), key(0));
  EXPECT_EQ(key(kWallClockMaxKhz + 1), key(0));
  EXPECT_EQ(key(37500), key(37500));
}
