// SPDX-License-Identifier: MIT
// Which kernels exist for which vendor (docs/amd.md "Which kernels exist for which vendor"): the catalog of
// an AMD arch is the NVIDIA sm_90 catalog less exactly the bulk-copy kernels, and kernels_left_out names
// them.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include "mori/symm/jit/jit.hpp"

using namespace mori::symm;

namespace {

std::set<std::string> names(const std::string& arch) {
  std::set<std::string> s;
  for (const auto& spec : kernel_catalog(arch))
    for (const auto& i : spec.instantiations) s.insert(spec.file + " " + i);
  return s;
}

std::set<std::string> left_out(const std::string& arch) {
  std::set<std::string> s;
  for (const auto& k : kernels_left_out(arch)) s.insert(k.file + " " + k.instantiation);
  return s;
}

}  // namespace

TEST(KernelCatalog, AmdGetsEverythingButTheBulkCopies) {
  const auto nvidia = names("sm_90");
  EXPECT_TRUE(left_out("sm_90").empty());
  const std::set<std::string> bulk = {"matrix.hip matrix_bulk<0, 0>", "matrix.hip matrix_bulk<0, 1>",
                                      "matrix.hip matrix_bulk<1, 0>", "matrix.hip matrix_bulk<1, 1>"};
  for (const char* arch : {"gfx90a", "gfx942", "gfx950", "gfx908", "sm_80", "sm_70"}) {
    const auto mine = names(arch);
    EXPECT_EQ(left_out(arch), bulk) << arch;
    // Catalog and left-out together are the same set for every arch, and never overlap.
    std::set<std::string> all = mine;
    all.insert(bulk.begin(), bulk.end());
    EXPECT_EQ(all, nvidia) << arch;
    EXPECT_EQ(mine.size() + bulk.size(), nvidia.size()) << arch;
  }
  // 5 + 32 in a2a.hip, 2 + 12 (+ 4 bulk on sm_90) in matrix.hip.
  EXPECT_EQ(names("gfx942").size(), 51u);
  EXPECT_EQ(nvidia.size(), 55u);
  // The evict-first pushes exist on AMD too (plain loads there; the host never launches them: docs/amd.md).
  EXPECT_TRUE(names("gfx942").count("a2a.hip a2a_push<1, 1, 4, 1, 1>"));
  for (const auto& k : kernels_left_out("gfx942"))
    EXPECT_NE(k.needs.find("sm_90"), std::string::npos) << k.needs;
}
