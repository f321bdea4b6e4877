// SPDX-License-Identifier: MIT
// Probe decisions with a scripted fake runtime: each scenario makes a chosen step fail with a named error.
#include <gtest/gtest.h>

#include "fake_runtime.hpp"
#include "mori/symm/base/error.hpp"
#include "mori/symm/bringup/probe.hpp"

using namespace mori::symm;
using mori::symm::testing::FakeRuntime;

namespace {

std::string status_of(const HandleProbe& h, const std::string& step) {
  for (auto& s : h.steps)
    if (s.step == step) return to_string(s.status);
  return "(not run)";
}

}  // namespace

TEST(ProbeDecision, EverythingWorksChoosesFabric) {
  FakeRuntime rt;
  auto p = probe_device(rt, 0);
  ASSERT_TRUE(p.chosen);
  EXPECT_EQ(*p.chosen, HandleType::fabric);
  EXPECT_FALSE(p.attribute_disagrees);
  EXPECT_EQ(rt.live_resources().handles, 0);
  EXPECT_EQ(rt.live_resources().mappings, 0);
}

TEST(ProbeDecision, FabricFailsAtCreateLikeTheH200) {
  FakeRuntime rt;
  rt.fail[{HandleType::fabric, "create"}] = "CUDA_ERROR_NOT_PERMITTED";
  auto p = probe_device(rt, 0);
  ASSERT_TRUE(p.chosen);
  EXPECT_EQ(*p.chosen, HandleType::posix_fd);
  EXPECT_TRUE(p.attribute_disagrees);  // attribute 1, yet it does not work
  EXPECT_EQ(status_of(p.fabric, "create"), "CUDA_ERROR_NOT_PERMITTED");
  EXPECT_EQ(status_of(p.fabric, "export"), "(not run)");
  EXPECT_NE(p.reason.find("fabric failed at create -> CUDA_ERROR_NOT_PERMITTED"), std::string::npos)
      << p.reason;
  EXPECT_EQ(rt.live_resources().handles, 0);
}

TEST(ProbeDecision, FabricFailsOnlyAtExport) {
  FakeRuntime rt;
  rt.fail[{HandleType::fabric, "export"}] = "CUDA_ERROR_NOT_SUPPORTED";
  auto p = probe_device(rt, 0);
  ASSERT_TRUE(p.chosen);
  EXPECT_EQ(*p.chosen, HandleType::posix_fd);
  EXPECT_EQ(status_of(p.fabric, "create"), "ok");
  EXPECT_EQ(status_of(p.fabric, "export"), "CUDA_ERROR_NOT_SUPPORTED");
  EXPECT_EQ(rt.live_resources().handles, 0)
      << "the created allocation must be released after a failed export";
}

TEST(ProbeDecision, AttributeSaysNoButItWorks) {
  FakeRuntime rt;
  rt.attr_fabric = false;
  auto p = probe_device(rt, 0);
  ASSERT_TRUE(p.chosen);
  EXPECT_EQ(*p.chosen, HandleType::fabric);
  EXPECT_TRUE(p.attribute_disagrees);
}

TEST(ProbeDecision, FdImportFailsAndFabricFails) {
  FakeRuntime rt;
  rt.fail[{HandleType::posix_fd, "import"}] = "CUDA_ERROR_INVALID_VALUE";
  rt.fail[{HandleType::fabric, "create"}] = "CUDA_ERROR_NOT_PERMITTED";
  auto p = probe_device(rt, 0);
  EXPECT_FALSE(p.chosen);
  EXPECT_NE(p.reason.find("posix_fd failed at import -> CUDA_ERROR_INVALID_VALUE"), std::string::npos)
      << p.reason;
  EXPECT_THROW(
      {
        FakeRuntime rt2;
        rt2.fail = rt.fail;
        choose_handle_type(rt2, 0);
      },
      ApiError);
  EXPECT_EQ(rt.live_resources().handles, 0);
  EXPECT_EQ(rt.live_resources().reservations, 0);
}

TEST(ProbeDecision, FdImportFailsFabricWorks) {
  FakeRuntime rt;
  rt.fail[{HandleType::posix_fd, "import"}] = "CUDA_ERROR_INVALID_VALUE";
  auto p = probe_device(rt, 0);
  ASSERT_TRUE(p.chosen);
  EXPECT_EQ(*p.chosen, HandleType::fabric);
  EXPECT_TRUE(p.attribute_disagrees);  // fd attribute 1 but it failed
}

TEST(ProbeDecision, JsonCarriesEveryStep) {
  FakeRuntime rt;
  rt.fail[{HandleType::fabric, "map"}] = "CUDA_ERROR_OUT_OF_MEMORY";
  auto j = to_json(probe_device(rt, 0));
  EXPECT_EQ(j["chosen_handle_type"], "posix_fd");
  EXPECT_EQ(j["handle_types"]["fabric"]["usable"], false);
  bool found = false;
  for (auto& s : j["handle_types"]["fabric"]["steps"])
    if (s["step"] == "map") found = s["status"] == "CUDA_ERROR_OUT_OF_MEMORY";
  EXPECT_TRUE(found);
  EXPECT_EQ(j["handle_types"]["posix_fd"]["steps"].size(), 11u);
}
