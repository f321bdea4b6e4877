// SPDX-License-Identifier: MIT
// The doctor's rules with fakes: a scripted runtime for the per-device causes, made-up rank facts for the
// cross-rank ones (the same causes are produced for real under mpirun by doctor_test.py where the host
// allows).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <set>

#include "fake_runtime.hpp"
#include "mori/symm/base/fds.hpp"
#include "mori/symm/bringup/doctor.hpp"
#include "mori/symm/bringup/environment.hpp"

using namespace mori::symm;
using mori::symm::testing::FakeRuntime;

namespace {

std::vector<std::string> ids(const std::vector<Diagnosis>& d) {
  std::vector<std::string> v;
  for (const auto& x : d) v.push_back(x.id);
  return v;
}

const Diagnosis* find(const std::vector<Diagnosis>& d, const std::string& id) {
  for (const auto& x : d)
    if (x.id == id) return &x;
  return nullptr;
}

std::vector<Diagnosis> device_case(FakeRuntime& rt, const DeviceEnv& env) {
  return diagnose_device(probe_device(rt, 0), Platform::cuda, env, 3);
}

DeviceEnv healthy_env() {
  DeviceEnv e;
  e.imex_channel_present = true;
  e.caps_present = true;
  e.fabric_state = 3;
  e.fabric_status = "SUCCESS";
  return e;
}

// `n` ranks on one node of one machine, each on its own GPU, nothing wrong.
std::vector<RankFacts> clean_ranks(int n) {
  std::vector<RankFacts> v(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) {
    auto& f = v[static_cast<std::size_t>(r)];
    std::strcpy(f.host, "node-a");
    std::strcpy(f.boot_id, "boot-a");
    std::snprintf(f.pci_bus_id, sizeof(f.pci_bus_id), "0000:%02x:00.0", 0x19 + r);
    f.pid_ns = 4026531836;
    f.net_ns = 4026531840;
    f.nofile_soft = f.nofile_hard = 1048576;
    f.rank = r;
    f.device = r;
    f.gpu = 1;
    f.compute_mode = 0;
  }
  return v;
}

}  // namespace

TEST(Doctor, CatalogHasTheNamedCausesOnce) {
  const auto& c = diagnosis_catalog();
  EXPECT_GE(c.size(), 12u);
  std::set<std::string> seen;
  for (const auto& e : c) {
    EXPECT_TRUE(seen.insert(e.id).second) << e.id;
    EXPECT_GT(std::strlen(e.fix), 10u) << e.id;
  }
  EXPECT_THROW(catalog_entry("no_such_cause"), UsageError);
}

TEST(Doctor, HealthyGpuHasNoDiagnosis) {
  FakeRuntime rt;
  EXPECT_TRUE(device_case(rt, healthy_env()).empty());
  EXPECT_TRUE(diagnose_ranks(clean_ranks(4), 16).empty());
}

TEST(Doctor, VmmUnsupported) {
  FakeRuntime rt;
  rt.vmm = false;
  auto d = device_case(rt, healthy_env());
  ASSERT_NE(find(d, "vmm_unsupported"), nullptr) << ::testing::PrintToString(ids(d));
  EXPECT_EQ(find(d, "vmm_unsupported")->ranks, std::vector<int>{3});
}

TEST(Doctor, NoUsableHandleTypeIsAnError) {
  FakeRuntime rt;
  rt.fail[{HandleType::posix_fd, "import"}] = "CUDA_ERROR_INVALID_VALUE";
  rt.fail[{HandleType::fabric, "create"}] = "CUDA_ERROR_NOT_PERMITTED";
  auto d = device_case(rt, DeviceEnv{});
  ASSERT_NE(find(d, "no_usable_handle_type"), nullptr);
  EXPECT_NE(find(d, "no_usable_handle_type")->evidence.find("import -> CUDA_ERROR_INVALID_VALUE"),
            std::string::npos);
  // Without the posix_fd fallback the fabric cause is an error too.
  ASSERT_NE(find(d, "fabric_no_imex_channel"), nullptr);
  EXPECT_EQ(find(d, "fabric_no_imex_channel")->severity, Severity::error);
}

TEST(Doctor, FabricRefusedWithoutImexChannelLikeTheH200) {
  FakeRuntime rt;
  rt.fail[{HandleType::fabric, "create"}] = "CUDA_ERROR_NOT_PERMITTED";
  auto env = healthy_env();
  env.imex_channel_present = false;
  auto d = device_case(rt, env);
  ASSERT_NE(find(d, "fabric_no_imex_channel"), nullptr) << ::testing::PrintToString(ids(d));
  EXPECT_EQ(find(d, "fabric_no_imex_channel")->severity, Severity::warning);  // posix_fd works
  EXPECT_NE(find(d, "fabric_attribute_lies"), nullptr);                       // attribute 1, create refused
  EXPECT_FALSE(has_error(d));
}

TEST(Doctor, FabricRefusedInContainerWithoutCaps) {
  FakeRuntime rt;
  rt.fail[{HandleType::fabric, "create"}] = "CUDA_ERROR_INVALID_VALUE";
  DeviceEnv env;
  env.in_container = true;
  auto d = device_case(rt, env);
  EXPECT_NE(find(d, "fabric_caps_missing_in_container"), nullptr) << ::testing::PrintToString(ids(d));
  EXPECT_EQ(find(d, "fabric_no_imex_channel"), nullptr);
}

TEST(Doctor, FabricManagerNotFinished) {
  FakeRuntime rt;
  rt.fail[{HandleType::fabric, "create"}] = "hipErrorNotSupported";
  auto env = healthy_env();
  env.fabric_state = 2;  // in progress
  auto d = device_case(rt, env);
  ASSERT_NE(find(d, "fabric_manager_not_ready"), nullptr) << ::testing::PrintToString(ids(d));
  EXPECT_NE(find(d, "fabric_manager_not_ready")->evidence.find("state 2"), std::string::npos);
  // Completed with a failed registration counts as not ready too, even before any create fails.
  FakeRuntime ok;
  env.fabric_state = 3;
  env.fabric_status = "Insufficient resources";
  EXPECT_NE(find(device_case(ok, env), "fabric_manager_not_ready"), nullptr);
}

TEST(Doctor, FabricRefusedForAnotherReason) {
  FakeRuntime rt;
  rt.fail[{HandleType::fabric, "create"}] = "CUDA_ERROR_NOT_PERMITTED";
  auto d = device_case(rt, healthy_env());
  EXPECT_NE(find(d, "fabric_create_refused"), nullptr) << ::testing::PrintToString(ids(d));
}

TEST(Doctor, AttributeLiesTheOtherWay) {
  FakeRuntime rt;
  rt.attr_fabric = false;  // says no, works
  auto d = device_case(rt, healthy_env());
  EXPECT_EQ(ids(d), std::vector<std::string>{"fabric_attribute_lies"});
}

TEST(Doctor, HostRuntimeHasNoDeviceDiagnosis) {
  FakeRuntime rt;
  rt.vmm = false;
  EXPECT_TRUE(diagnose_device(probe_device(rt, 0), Platform::host, DeviceEnv{}, 0).empty());
}

TEST(Doctor, SeveralRanksOnOneGpuWithoutMps) {
  auto r = clean_ranks(3);
  std::strcpy(r[2].pci_bus_id, r[1].pci_bus_id);
  auto d = diagnose_ranks(r, 16);
  ASSERT_EQ(ids(d), std::vector<std::string>{"gpu_shared_without_mps"});
  EXPECT_EQ(d[0].ranks, (std::vector<int>{1, 2}));
  for (auto& f : r) f.mps = 1;  // under MPS (seen by every rank) the sharing is fine
  EXPECT_TRUE(diagnose_ranks(r, 16).empty());
}

TEST(Doctor, ExclusiveProcessModeWithSeveralRanks) {
  auto r = clean_ranks(2);
  std::strcpy(r[1].pci_bus_id, r[0].pci_bus_id);
  r[0].compute_mode = r[1].compute_mode = 3;
  auto d = diagnose_ranks(r, 16);
  ASSERT_EQ(ids(d), std::vector<std::string>{"exclusive_process_mode"});
  EXPECT_EQ(d[0].severity, Severity::error);
}

TEST(Doctor, ComputeProhibited) {
  auto r = clean_ranks(2);
  r[1].compute_mode = 2;
  auto d = diagnose_ranks(r, 16);
  ASSERT_EQ(ids(d), std::vector<std::string>{"compute_prohibited"});
  EXPECT_EQ(d[0].ranks, std::vector<int>{1});
}

TEST(Doctor, NamespacesBootIdsAndLimitsNameTheRanks) {
  auto r = clean_ranks(4);
  r[3].pid_ns = 1;
  r[2].net_ns = 2;
  r[1].nofile_soft = 70;
  auto d = diagnose_ranks(r, 16);
  ASSERT_NE(find(d, "pid_namespace_mismatch"), nullptr);
  EXPECT_EQ(find(d, "pid_namespace_mismatch")->ranks, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_NE(find(d, "pid_namespace_mismatch")->evidence.find("rank 3 in pid:[1]"), std::string::npos);
  ASSERT_NE(find(d, "net_namespace_mismatch"), nullptr);
  ASSERT_NE(find(d, "fd_limit_low"), nullptr);
  EXPECT_EQ(find(d, "fd_limit_low")->ranks, std::vector<int>{1});
}

// One rule for the descriptors a rank needs (fds_needed): the tools' preflight refuses below it and the
// doctor's fd_limit_low fires exactly below it, per rank, for its team and the windows held at once.
TEST(Doctor, FdLimitLowIsThePreflightsRule) {
  EXPECT_EQ(fds_needed(16, 1, 17), 17u + 4 + 2 * 15 + 16);
  EXPECT_EQ(fds_needed(4, 8, 20), 20u + 8 * (4 + 2 * 3) + 16);
  EXPECT_EQ(fds_needed(1, 1, -1), 64u + 4 + 16);  // open count unreadable: 64
  EXPECT_GT(fds_needed(16, 2, 17), fds_needed(16, 1, 17));
  for (int windows : {1, 8}) {
    auto r = clean_ranks(16);
    for (auto& f : r) f.open_fds = 17;
    const std::uint64_t need = fds_needed(16, windows, 17);
    r[3].nofile_soft = need;  // exactly enough: the preflight lets it run, the doctor stays quiet
    r[5].nofile_soft = need - 1;
    r[7].open_fds = 30;  // more open at the start: needs more
    r[7].nofile_soft = need;
    const auto d = diagnose_ranks(r, windows);
    ASSERT_NE(find(d, "fd_limit_low"), nullptr) << windows;
    EXPECT_EQ(find(d, "fd_limit_low")->ranks, (std::vector<int>{5, 7})) << windows;
  }
  // The team is the node's: two nodes of 8 ranks need what a team of 8 needs.
  auto r = clean_ranks(16);
  for (auto& f : r) {
    f.open_fds = 17;
    f.node = f.rank / 8;
    f.nofile_soft = fds_needed(8, 1, 17);
  }
  EXPECT_EQ(find(diagnose_ranks(r, 1), "fd_limit_low"), nullptr);
  r[0].nofile_soft -= 1;
  ASSERT_NE(find(diagnose_ranks(r, 1), "fd_limit_low"), nullptr);
}

TEST(Doctor, DeepDataUnreachablePeerAndGrantPenalty) {
  Json deep = {
      {"pairs", {{{"owner", 0}, {"accessor", 1}, {"status", "hipErrorInvalidValue"}, {"reachable", false}}}},
      {"access_grant_penalty",
       {{{"owner", 0},
         {"granted_to", 1},
         {"write_gbps_before", 2671.0},
         {"write_gbps_after", 56.0},
         {"read_gbps_before", 2000.0},
         {"read_gbps_after", 1990.0}}}}};
  auto d = diagnose_deep(deep, 0);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].id, "peer_unreachable");
  EXPECT_EQ(d[1].id, "access_grant_slows_owner");
  EXPECT_NE(d[1].evidence.find("write bandwidth 2671 -> 56"), std::string::npos) << d[1].evidence;
}

TEST(Doctor, JsonRoundTripAndFormat) {
  auto r = clean_ranks(2);
  r[1].nofile_soft = 10;
  auto d = diagnose_ranks(r, 16);
  ASSERT_EQ(d.size(), 1u);
  auto back = diagnosis_from_json(to_json(d[0]));
  EXPECT_EQ(back.id, d[0].id);
  EXPECT_EQ(back.severity, d[0].severity);
  EXPECT_EQ(back.ranks, d[0].ranks);
  EXPECT_EQ(back.evidence, d[0].evidence);
  const auto text = format_diagnoses(d);
  EXPECT_NE(text.find("error   fd_limit_low (rank 1)"), std::string::npos) << text;
  EXPECT_NE(text.find("fix: raise the limit"), std::string::npos) << text;
}

TEST(Environment, LocalFactsAreRead) {
  auto f = local_rank_facts(nullptr, 0, 0, 0);
  EXPECT_NE(f.pid_ns, 0u);
  EXPECT_NE(f.net_ns, 0u);
  EXPECT_EQ(std::strlen(f.boot_id), 36u);
  EXPECT_GT(f.nofile_soft, 0u);
  auto e = environment_json(nullptr, {f});
  EXPECT_FALSE(e["kernel"].is_null());
  EXPECT_EQ(e["ranks"][0]["pid_ns"], f.pid_ns);
  if (!e["nvml"]["available"].get<bool>()) {
    EXPECT_TRUE(e["nvml"]["reason"].is_string());
  }
}
