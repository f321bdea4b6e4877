// SPDX-License-Identifier: MIT
// The peer matrix's write-kernel choice (docs/mori-probe.md "Peer matrix"): parsing and validating the
// options, resolving a request for a device (defaults, fallbacks), the variants of --write-kernel all, and
// the JIT catalog's bulk-copy instantiations per arch. No GPU needed.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "mori/symm/base/error.hpp"
#include "mori/symm/jit/jit.hpp"
#include "mori/symm/matrix/detail/matrix_write.hpp"
#include "usage_error.hpp"

using namespace mori::symm;
using detail::WriteChoice;
using detail::WriteFallback;
using detail::WriteTarget;
using mori::symm::test_util::usage_error;

namespace {

WriteTarget gpu(int sms, bool bulk) {
  WriteTarget t;
  t.bulk_copy = bulk ? 1 : 0;
  t.multiprocessors = sms;
  return t;
}

WriteKernelOptions opts(WriteKernel k, const std::string& blocks = "auto", int unroll = 0, int tile = 0) {
  WriteKernelOptions o;
  o.kernel = k;
  parse_write_blocks(blocks, o);
  o.unroll = unroll;
  o.tile_kib = tile;
  return o;
}

}  // namespace

TEST(MatrixWrite, ParsesKernelNames) {
  for (const char* n : {"auto", "plain", "stream", "bulk", "bulk-tma", "all"})
    EXPECT_STREQ(to_string(parse_write_kernel(n)), n);
  EXPECT_NE(usage_error([] { parse_write_kernel("fast"); }).find("--write-kernel: unknown value 'fast'"),
            std::string::npos);
}

TEST(MatrixWrite, ParsesBlocks) {
  WriteKernelOptions o;
  parse_write_blocks("96", o);
  EXPECT_EQ(o.blocks, 96);
  EXPECT_EQ(o.blocks_per_sm, 0);
  parse_write_blocks("2x", o);
  EXPECT_EQ(o.blocks, 0);
  EXPECT_EQ(o.blocks_per_sm, 2);
  parse_write_blocks("auto", o);
  EXPECT_EQ(o.blocks + o.blocks_per_sm, 0);
  for (const char* bad : {"0", "0x", "65x", "65536", "x", "2y", "-1", "", " 4", "1.5"})
    EXPECT_NE(usage_error([&] { parse_write_blocks(bad, o); }).find("--write-blocks"), std::string::npos)
        << bad;
}

TEST(MatrixWrite, ValidatesValuesAndCombinations) {
  EXPECT_EQ(usage_error([] { validate_write_kernel(opts(WriteKernel::all, "auto", 8, 4)); }), "");
  EXPECT_EQ(usage_error([] { validate_write_kernel(opts(WriteKernel::stream, "3x", 16)); }), "");
  EXPECT_EQ(usage_error([] { validate_write_kernel(opts(WriteKernel::bulk_tma, "7", 0, 8)); }), "");
  // Tiles beyond 16 KiB need more than the 48 KiB of dynamic shared memory a launch gets without opting in.
  EXPECT_EQ(usage_error([] { validate_write_kernel(opts(WriteKernel::bulk, "1x", 0, 32)); }), "");
  EXPECT_EQ(usage_error([] { validate_write_kernel(opts(WriteKernel::bulk_tma, "1x", 0, 64)); }), "");
  EXPECT_NE(
      usage_error([] { validate_write_kernel(opts(WriteKernel::plain, "auto", 3)); }).find("--write-unroll"),
      std::string::npos);
  EXPECT_NE(usage_error([] {
              validate_write_kernel(opts(WriteKernel::bulk, "auto", 0, 128));
            }).find("--write-tile-kib"),
            std::string::npos);
  EXPECT_NE(usage_error([] {
              validate_write_kernel(opts(WriteKernel::bulk, "auto", 8));
            }).find("--write-unroll: applies to plain and stream, not bulk"),
            std::string::npos);
  EXPECT_NE(usage_error([] {
              validate_write_kernel(opts(WriteKernel::auto_select, "auto", 0, 8));
            }).find("--write-tile-kib: applies to bulk and bulk-tma, not auto (auto runs plain)"),
            std::string::npos);
}

TEST(MatrixWrite, AutoIsThePlainKernelOfBefore) {
  const WriteChoice c = detail::write_choice(opts(WriteKernel::auto_select), gpu(132, true));
  EXPECT_EQ(c.variant, "plain/4x/u4");
  EXPECT_EQ(c.kernel, WriteKernel::plain);
  EXPECT_EQ(c.requested, WriteKernel::auto_select);
  EXPECT_EQ(c.blocks, 528u);
  EXPECT_EQ(c.threads, 512u);
  EXPECT_EQ(c.unroll, 4);
  EXPECT_EQ(c.tile_bytes, 0u);
  EXPECT_EQ(c.fallback, WriteFallback::none);
  const Json j = to_json(c);
  EXPECT_TRUE(j["tile_bytes"].is_null());
  EXPECT_FALSE(j.contains("fallback"));
}

TEST(MatrixWrite, ResolvesBulkAndItsFallbacks) {
  const auto tma = detail::write_choice(opts(WriteKernel::bulk_tma, "100", 0, 8), gpu(132, true));
  EXPECT_EQ(tma.variant, "bulk-tma/100/t8k");
  EXPECT_EQ(tma.kernel, WriteKernel::bulk_tma);
  EXPECT_EQ(tma.blocks, 100u);
  EXPECT_EQ(tma.threads, 32u);
  EXPECT_EQ(tma.tile_bytes, 8192u);
  EXPECT_EQ(tma.unroll, 0);
  // No bulk copies (AMD, NVIDIA before sm_90): the plain kernel with the same blocks, and the record says so.
  const auto old = detail::write_choice(opts(WriteKernel::bulk), gpu(108, false));
  EXPECT_EQ(old.variant, "bulk/2x/t16k");
  EXPECT_EQ(old.kernel, WriteKernel::plain);
  EXPECT_EQ(old.blocks, 216u);
  EXPECT_EQ(old.unroll, 4);
  EXPECT_EQ(old.tile_bytes, 0u);
  EXPECT_EQ(old.fallback, WriteFallback::no_bulk_copy);
  EXPECT_NE(to_json(old)["fallback"].get<std::string>().find("sm_90"), std::string::npos);
  // The host runtime: a memcpy, whatever was asked.
  WriteTarget host;
  host.host = 1;
  const auto h = detail::write_choice(opts(WriteKernel::stream, "2x", 8), host);
  EXPECT_EQ(h.variant, "stream/2x/u8");
  EXPECT_EQ(h.kernel, WriteKernel::plain);
  EXPECT_EQ(h.fallback, WriteFallback::host);
  EXPECT_TRUE(to_json(h)["blocks"].is_null());
}

TEST(MatrixWrite, AllSweepsEveryVariantOnce) {
  const auto all = detail::write_variants(opts(WriteKernel::all), gpu(132, true));
  ASSERT_EQ(all.size(), 36u);  // 4 kernels x 3 grids x 3 unrolls or tiles
  std::set<std::string> names;
  for (const auto& c : all) names.insert(c.variant);
  EXPECT_EQ(names.size(), all.size());
  EXPECT_TRUE(names.count("plain/1x/u16"));
  EXPECT_TRUE(names.count("bulk-tma/4x/t4k"));
  EXPECT_TRUE(
      std::all_of(all.begin(), all.end(), [](const WriteChoice& c) { return c.requested == c.kernel; }));
  // A dimension given on the command line is not swept.
  EXPECT_EQ(detail::write_variants(opts(WriteKernel::all, "auto", 8), gpu(132, true)).size(), 24u);
  EXPECT_EQ(detail::write_variants(opts(WriteKernel::all, "3x"), gpu(132, true)).size(), 12u);
  EXPECT_TRUE(detail::write_variants(opts(WriteKernel::plain), gpu(132, true)).empty());
  // The rows of an `all` run keep the auto kernel.
  EXPECT_EQ(detail::write_choice(opts(WriteKernel::all, "1x", 16), gpu(132, true)).variant, "plain/4x/u4");
}

TEST(MatrixWrite, BulkKernelsOnlyInTheCatalogOfSm90AndNewer) {
  for (const char* a : {"sm_90", "sm_90a", "sm_100", "sm_120"}) EXPECT_TRUE(arch_has_bulk_copy(a)) << a;
  for (const char* a : {"sm_80", "sm_89", "gfx942", "host", "sm_", "sm_x90"})
    EXPECT_FALSE(arch_has_bulk_copy(a)) << a;
  auto has = [](const std::string& arch, const std::string& inst) {
    for (const auto& spec : kernel_catalog(arch))
      if (std::find(spec.instantiations.begin(), spec.instantiations.end(), inst) !=
          spec.instantiations.end())
        return true;
    return false;
  };
  EXPECT_TRUE(has("sm_90", "matrix_bulk<1, 1>"));
  EXPECT_TRUE(has("sm_90", "matrix_copy<0, 16, 1>"));
  EXPECT_FALSE(has("sm_80", "matrix_bulk<0, 0>"));
  EXPECT_FALSE(has("gfx942", "matrix_bulk<0, 0>"));
  EXPECT_TRUE(has("gfx942", "matrix_copy<1, 8, 1>"));
}
