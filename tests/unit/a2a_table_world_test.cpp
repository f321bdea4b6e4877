// SPDX-License-Identifier: MIT
// The automatic tables' world dimension (a2a/plan.hpp A2aTableCell; docs/mori-a2a.md "The automatic tables"):
// each cell is keyed by the world it was measured at, a plan for a world without a cell takes the nearest
// and says so, and each cell's world is the world of the committed sweep it cites.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "mori/symm/a2a/plan.hpp"
#include "mori/symm/a2a/row.hpp"
#include "mori/symm/base/json.hpp"

using namespace mori::symm;

namespace {

// `n` ranks, each on its own H200 (distinct PCI bus ids), or all on one.
A2aFacts h200_facts(int n, bool distinct) {
  DeviceInfo d;
  d.name = "NVIDIA H200";
  d.arch = "sm_90";
  d.multiprocessors = 132;
  d.l2_bytes = std::uint64_t{50} << 20;
  d.memory_bytes = std::uint64_t{143} << 30;
  std::vector<detail::RankPlace> all;
  for (int i = 0; i < n; ++i) {
    d.pci_bus_id = "0000:" + std::to_string(10 + (distinct ? i : 0)) + ":00.0";
    all.push_back(detail::rank_place(0, d, distinct ? i : 0, !distinct, false));
  }
  A2aFacts f;
  f.placement = detail::device_placement_of(all, false);
  f.device = d;
  f.cache_hints = true;
  f.resident_blocks = [](const detail::PushSpec&) { return 4L * 132; };
  return f;
}

int world_of_report(const std::string& file) {
  std::ifstream in(std::string(MORI_RESULTS_DIR) + "/" + file);
  EXPECT_TRUE(in.good()) << file;
  if (!in) return -1;
  return Json::parse(in).at("meta").at("world").get<int>();
}

}  // namespace

// 8 distinct GPUs have no cell of their own: the plan reads the cell measured at 2 ranks and says so.
TEST(A2aTableWorld, AWorld8PlanReportsTheCellMeasuredAt2Ranks) {
  const A2aFacts f = h200_facts(8, true);
  ASSERT_TRUE(f.placement.one_rank_per_device);
  const A2aChunkPlan p = a2a_chunk_plan(A2aConfig{}, f, std::size_t{256} << 10);
  EXPECT_EQ(p.table_world, 2);
  const std::string note = a2a_table_note(f);
  EXPECT_NE(note.find("no cell measured at 8 ranks on distinct devices"), std::string::npos) << note;
  EXPECT_NE(note.find("measured at 2 ranks"), std::string::npos) << note;
  // At 2 distinct GPUs, and 8 ranks on one GPU, the plan reads a cell of its own world and says nothing.
  EXPECT_EQ(a2a_chunk_plan(A2aConfig{}, h200_facts(2, true), 4096).table_world, 2);
  EXPECT_EQ(a2a_table_note(h200_facts(2, true)), "");
  EXPECT_EQ(a2a_chunk_plan(A2aConfig{}, h200_facts(8, false), 4096).table_world, 8);
  EXPECT_EQ(a2a_table_note(h200_facts(8, false)), "");
  // 2 ranks sharing one GPU read the 8-rank cell.
  EXPECT_EQ(a2a_chunk_plan(A2aConfig{}, h200_facts(2, false), 4096).table_world, 8);
}

// The nearest cell by ratio of world sizes, the smaller on a tie; every placement has one.
TEST(A2aTableWorld, TheNearestMeasuredCell) {
  for (int w : {1, 2, 3, 4, 8, 16, 512}) {
    EXPECT_EQ(a2a_table_cell(true, w).world, 2) << w;
    EXPECT_TRUE(a2a_table_cell(true, w).remote);
    EXPECT_EQ(a2a_table_cell(false, w).world, 8) << w;
    EXPECT_FALSE(a2a_table_cell(false, w).remote);
  }
}

// Each cell's world is the world of the committed sweep behind it (the protocol sweeps
// tests/unit/a2a_config_test.cpp holds the protocol choices to).
TEST(A2aTableWorld, EachCellsWorldIsTheWorldOfItsSweep) {
  EXPECT_EQ(a2a_table_cell(true, 2).world, world_of_report("h200x2/protocol-sweep/all/w2-r1.json"));
  EXPECT_EQ(a2a_table_cell(true, 2).world,
            world_of_report("h200x2/protocol-sweep/launch/w2-programmatic-r1.json"));
  EXPECT_EQ(a2a_table_cell(false, 8).world,
            world_of_report("h200/protocol-sweep-scope/w8-programmatic-r1.json"));
}

// The row records the cell's world additively (mori.a2a/2 "table_world").
TEST(A2aTableWorld, TheRowRecordsTheTableWorld) {
  A2aResult r;
  r.table_world = 2;
  EXPECT_EQ(to_json(r).at("table_world").get<int>(), 2);
}

// The automatic tables' device dimension: a GPU with no cell of its own reads the nearest measured GPU's
// (the same arch, then the same vendor) and says so; the row records it (mori.a2a/2 "table_device").
TEST(A2aTableDevice, AnH100ReadsTheH200CellsAsTheSameArch) {
  A2aFacts f = h200_facts(8, false);
  f.platform = Platform::cuda;
  f.device.name = "NVIDIA H100 80GB HBM3";
  EXPECT_EQ(a2a_chunk_plan(A2aConfig{}, f, 4096).table_device, "NVIDIA H200");
  const std::string note = a2a_table_note(f);
  EXPECT_NE(note.find("no cell measured on NVIDIA H100 80GB HBM3 (sm_90)"), std::string::npos) << note;
  EXPECT_NE(note.find("NVIDIA H200 (sm_90, the same arch)"), std::string::npos) << note;
  // The H200 itself: no note.
  A2aFacts h = h200_facts(8, false);
  h.platform = Platform::cuda;
  EXPECT_EQ(a2a_table_note(h), "");
  EXPECT_EQ(a2a_chunk_plan(A2aConfig{}, h, 4096).table_device, "NVIDIA H200");
}

TEST(A2aTableDevice, DistanceOrdersModelArchVendor) {
  const A2aTableCell& c = a2a_table_cell(false, 8);
  DeviceInfo d;
  d.name = "NVIDIA H200";
  d.arch = "sm_90";
  EXPECT_EQ(a2a_table_device_distance(c, d), 0);
  d.name = "NVIDIA H100 PCIe";
  EXPECT_EQ(a2a_table_device_distance(c, d), 1);
  d.name = "NVIDIA B200";
  d.arch = "sm_100";
  EXPECT_EQ(a2a_table_device_distance(c, d), 2);
  d.name = "AMD Instinct MI300X";
  d.arch = "gfx942";
  EXPECT_EQ(a2a_table_device_distance(c, d), 3);
  d.arch = "";  // the host runtime: no GPU
  EXPECT_EQ(a2a_table_device_distance(c, d), 3);
}

TEST(A2aTableDevice, TheRowRecordsTheTableDevice) {
  A2aResult r;
  r.table_device = "NVIDIA H200";
  EXPECT_EQ(to_json(r).at("table_device").get<std::string>(), "NVIDIA H200");
}

// Every cell is of one GPU model today, so the callers that read a cell by world alone (the protocol choice,
// the options check) read the cell the plan reads for any GPU. A cell of a second model breaks this: those
// callers must then be given the device.
TEST(A2aTableDevice, OneGpuModelSoTheWorldAloneFindsTheCell) {
  DeviceInfo h100;
  h100.name = "NVIDIA H100 80GB HBM3";
  h100.arch = "sm_90";
  DeviceInfo mi300x;
  mi300x.name = "AMD Instinct MI300X";
  mi300x.arch = "gfx942";
  for (bool remote : {false, true}) {
    for (int w : {1, 2, 4, 8, 72}) {
      const A2aTableCell* any = &a2a_table_cell(remote, w);
      EXPECT_EQ(&a2a_table_cell(remote, w, &h100), any) << remote << " " << w;
      EXPECT_EQ(&a2a_table_cell(remote, w, &mi300x), any) << remote << " " << w;
    }
  }
}
