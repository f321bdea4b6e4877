// SPDX-License-Identifier: MIT
// The all-to-all's result row, declared once (lib/include/mori/symm/a2a/row.hpp). A new field: one entry of
// kFields, then scripts/a2a-row --write (the schema and docs/mori-a2a.md "The row's fields").
#include "mori/symm/a2a/row.hpp"

#include <algorithm>
#include <cstdio>

#include "mori/symm/base/enum_names.hpp"

namespace mori::symm {
namespace {

using R = const A2aResult&;

std::string fixed(double v, int precision) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", precision, v);
  return buf;
}

Json ceiling_sample(const CeilingSample& c) {
  return {{"kind", c.kind},
          {"graph", c.graph},
          {"round", c.round},
          {"gbps", c.gbps},
          {"blocks_per_peer", c.blocks_per_peer ? Json(c.blocks_per_peer) : Json(nullptr)},
          {"unroll", c.unroll ? Json(c.unroll) : Json(nullptr)},
          {"source_cache", c.source_cache.empty() ? Json(nullptr) : Json(c.source_cache)}};
}

constexpr RowRole kId = RowRole::identity, kMetric = RowRole::metric, kRef = RowRole::reference,
                  kDetail = RowRole::detail;
constexpr Better kNone = Better::none, kLower = Better::lower, kHigher = Better::higher;

// The row, in the order of its JSON. Columns: {position on the line, header, width, cell, precision}.
const std::vector<A2aRowField> kFields = {
    {"chunk_bytes",
     R"j({"type": "integer", "minimum": 1})j",
     "bytes",
     kId,
     kNone,
     true,
     "bytes per (source, destination) pair",
     [](R r) { return Json(r.chunk_bytes); },
     {1, "chunk", 10, [](R r) { return std::to_string(r.chunk_bytes) + "B"; }}},
    {"addressing",
     R"j({"enum": ["ptr", "lsa"]})j",
     "",
     kId,
     kNone,
     true,
     "how a kernel reaches a peer: ptr = the pointer array (peers[p] + off), lsa = the window (base + p * "
     "stride + off)",
     [](R r) { return Json(to_string(r.addressing)); },
     {2, "addr", 5}},
    {"sync",
     R"j({"enum": ["host", "device"]})j",
     "",
     kId,
     kNone,
     true,
     "how the ranks synchronise after the push: a host barrier, or signals on the device",
     [](R r) { return Json(to_string(r.sync)); },
     {3, "sync", 6}},
    {"graph", R"j({"type": "boolean"})j", "", kId, kNone, true,
     "the timed iterations were captured in a graph and replayed", [](R r) { return Json(r.graph); }},
    {"graph_iters",
     R"j({"type": "integer", "minimum": 0})j",
     "",
     kId,
     kNone,
     true,
     "iterations captured per graph (the run's --graph); 0 on rows launched one by one",
     [](R r) { return Json(r.graph_iters); },
     {5, "graph", 5, [](R r) { return r.graph ? std::to_string(r.graph_iters) : std::string("-"); }}},
    {"protocol",
     R"j({"type": "string"})j",
     "",
     kId,
     kNone,
     true,
     "how device sync signals: simple, direct, ll or copy (docs/mori-a2a.md \"Synchronisation and "
     "protocols\"); host-sync rows say simple (they signal nothing)",
     [](R r) { return Json(to_string(r.protocol)); },
     {4, "proto", 6}},
    {"blocks_per_peer",
     R"j({"type": "integer", "minimum": 0})j",
     "",
     kId,
     kNone,
     true,
     "thread blocks that move one chunk",
     [](R r) { return Json(r.blocks_per_peer); },
     {6, "bpp", 5}},
    {"unroll", R"j({"enum": [0, 4, 8]})j", "", kId, kNone, false,
     "16-byte loads in flight per thread before its stores", [](R r) { return Json(r.unroll); }},
    {"launch", R"j({"enum": ["programmatic", "plain"]})j", "", kId, kNone, false,
     "how the timed pushes were launched", [](R r) { return Json(r.launch); }},
    {"signal_scope", R"j({"enum": ["system", "device", "none"]})j", "", kId, kNone, false,
     "scope of the device-sync signals (absent before it was recorded: system)",
     [](R r) { return Json(r.signal_scope); }},
    {"source_cache", R"j({"enum": ["normal", "evict_first", "none"]})j", "", kId, kNone, false,
     "L2 policy of the kernels' source loads (absent before it was recorded: normal); none: the copy engines "
     "move the data",
     [](R r) { return Json(r.source_cache); }},
    {"placement",
     R"j({"enum": ["host", "single_rank", "one_gpu", "one_rank_per_gpu", "several_ranks_per_gpu"]})j", "",
     kDetail, kNone, false,
     "the plan's placement class (absent before it was recorded): how the ranks sit on devices, from one "
     "source (node of the load/store team, PCI bus id)",
     [](R r) { return Json(r.placement); }},
    {"table_world", R"j({"type": "integer", "minimum": 1})j", "", kDetail, kNone, false,
     "the world size at which the automatic tables' cell this row's plan read was measured (absent before "
     "it was recorded); differs from the job's world where no cell was measured at it (docs/mori-a2a.md "
     "\"The automatic tables\")",
     [](R r) { return Json(r.table_world); }},
    {"table_device", R"j({"type": "string"})j", "", kDetail, kNone, false,
     "the GPU model on which the automatic tables' cell this row's plan read was measured (absent before it "
     "was recorded); differs from the row's GPU where no cell was measured on it: the nearest GPU's (the "
     "same arch, then the same vendor; docs/mori-a2a.md \"The automatic tables\")",
     [](R r) { return Json(r.table_device); }},
    {"team_size", R"j({"type": "integer", "minimum": 1})j", "", kId, kNone, false,
     "ranks in the load/store team that ran the row (absent before mori.a2a/3: the job's world, one team)",
     [](R r) { return Json(r.team_size); }},
    {"team",
     R"j({"type": "object", "required": ["node", "ranks"], "properties": {"node": {"type": "string"}, )j"
     R"j("ranks": {"type": "string"}}})j",
     "", kDetail, kNone, false,
     "the team that ran the row: its node as users name it (the host, or the node id) and its ranks in the "
     "job, as ranges (\"0-3\"); absent before mori.a2a/3",
     [](R r) {
       return Json{{"node", r.team_node}, {"ranks", r.team_ranks}};
     }},
    {"iters", R"j({"type": "integer", "minimum": 1})j", "", kDetail, kNone, true,
     "timed iterations (graph: replays x graph_iters)", [](R r) { return Json(r.iters); }},
    {"samples", R"j({"type": "integer", "minimum": 1})j", "", kDetail, kNone, true,
     "timed samples behind time_us (graph: one per replay, its time divided by graph_iters)",
     [](R r) { return Json(r.time_us.samples); }},
    {"time_us",
     R"j({"type": "object", "required": ["min", "p50", "p95", "max", "mean"], "additionalProperties": )j"
     R"j({"type": "number", "minimum": 0}})j",
     "us",
     kMetric,
     kLower,
     true,
     "one iteration (push and synchronisation), the maximum over ranks per sample: min, p50, p95, max, mean; "
     "perf-check gates p50 and p95 as time_p50_us and time_p95_us",
     [](R r) {
       return Json{{"min", r.time_us.min},
                   {"p50", r.time_us.p50},
                   {"p95", r.time_us.p95},
                   {"max", r.time_us.max},
                   {"mean", r.time_us.mean}};
     },
     {7, "p50_us", 9, [](R r) { return fixed(r.time_us.p50, 2); }}},
    {"launch_us", R"j({"type": ["number", "null"], "minimum": 0})j", "us", kRef, kNone, false,
     "p50 of the host time of one timed iteration's launch call(s), the maximum over ranks per sample: the "
     "kernel launch for eager rows, the graph launch divided by graph_iters for graph rows, the push call "
     "for "
     "host-sync rows (absent before mori.a2a/3)",
     [](R r) { return r.launch_us ? Json(*r.launch_us) : Json(nullptr); }},
    {"push_only_us",
     R"j({"type": "number", "minimum": 0})j",
     "us",
     kRef,
     kLower,
     true,
     "p50 of the same push with no synchronisation, same launch mode",
     [](R r) { return Json(r.push_only_us); },
     {8, "push_us", 9, nullptr, 2}},
    {"sync_only_us",
     R"j({"type": "number", "minimum": 0})j",
     "us",
     kRef,
     kLower,
     true,
     "p50 of the synchronisation alone (zero bytes), same launch mode",
     [](R r) { return Json(r.sync_only_us); },
     {9, "sync_us", 9, nullptr, 2}},
    {"agg_bw_gbps", R"j({"type": "number", "minimum": 0})j", "GB/s", kMetric, kHigher, true,
     "the world - 1 chunks that leave each rank, summed over ranks, per p50",
     [](R r) { return Json(r.agg_bw_gbps); }},
    {"total_bw_gbps",
     R"j({"type": "number", "minimum": 0})j",
     "GB/s",
     kMetric,
     kHigher,
     true,
     "every chunk, self included, per p50",
     [](R r) { return Json(r.total_bw_gbps); },
     {10, "total_GB/s", 10, nullptr, 1}},
    {"algbw_gbps", R"j({"type": "number", "minimum": 0})j", "GB/s", kMetric, kNone, true,
     "nccl-tests' all-to-all algbw: world x chunk / p50", [](R r) { return Json(r.algbw_gbps); }},
    {"busbw_gbps", R"j({"type": "number", "minimum": 0})j", "GB/s", kMetric, kHigher, true,
     "nccl-tests' all-to-all busbw: algbw x (world - 1) / world", [](R r) { return Json(r.busbw_gbps); }},
    {"ceiling_bw_gbps",
     R"j({"type": "number", "minimum": 0})j",
     "GB/s",
     kRef,
     kNone,
     true,
     "the best copy of the same bytes measured in the same run (the best of ceilings)",
     [](R r) { return Json(r.ceiling.gbps); },
     {11, "ceil_GB/s", 10, nullptr, 1}},
    {"ceiling_kind", R"j({"enum": ["sm_copy", "copy_engine", "host_memcpy"]})j", "", kRef, kNone, true,
     "the copy that set the ceiling", [](R r) { return Json(r.ceiling.kind); }},
    {"ceiling_graph", R"j({"type": "boolean"})j", "", kRef, kNone, false,
     "the ceiling's copy was replayed in a graph", [](R r) { return Json(r.ceiling.graph); }},
    {"ceiling_spread", R"j({"type": "number", "minimum": 0})j", "ratio", kRef, kNone, true,
     "|round 1 - round 2| / max of the winning copy: how far the ceiling moved between its two rounds",
     [](R r) { return Json(r.ceiling.spread); }},
    {"ceilings",
     R"j({"type": "array", "minItems": 1, "items": {"type": "object", )j"
     R"j("required": ["kind", "graph", "round", "gbps"], "properties": {"kind": {"type": "string"}, )j"
     R"j("graph": {"type": "boolean"}, "round": {"enum": [1, 2]}, )j"
     R"j("gbps": {"type": "number", "minimum": 0}, "blocks_per_peer": {"description": )j"
     R"j("the SM copy's kernel shape; null for the other kinds (absent in older files)", )j"
     R"j("type": ["integer", "null"]}, "unroll": {"type": ["integer", "null"]}, )j"
     R"j("source_cache": {"description": "the SM copy's source loads; null for the other kinds (absent in )j"
     R"j(older files)", "enum": ["normal", "evict_first", null]}}}})j",
     "", kRef, kNone, true,
     "every candidate of the ceiling as measured: kind, graph, round, gbps and the SM copy's shape",
     [](R r) {
       Json cs = Json::array();
       for (const auto& c : r.ceiling.samples) cs.push_back(ceiling_sample(c));
       return cs;
     }},
    {"ceiling_ratio",
     R"j({"type": "number", "minimum": 0})j",
     "ratio",
     kMetric,
     kNone,
     false,
     "total_bw_gbps / ceiling_bw_gbps (0 where no ceiling was measured)",
     [](R r) { return Json(a2a_ceiling_ratio(r)); },
     {12, "ceil_%", 7, [](R r) { return fixed(100.0 * a2a_ceiling_ratio(r), 1) + "%"; }}},
    {"physical_bw_gbps",
     R"j({"type": ["number", "null"], "minimum": 0})j",
     "GB/s",
     kRef,
     kNone,
     true,
     "the physical limit of total_bw_gbps from device facts read at run time; null where none is known",
     [](R r) { return r.physical.gbps ? Json(*r.physical.gbps) : Json(nullptr); },
     {13, "phys_GB/s", 9, nullptr, 0}},
    {"physical_source", R"j({"type": "string"})j", "", kRef, kNone, true,
     "where the physical limit comes from, or why there is none",
     [](R r) { return Json(r.physical.source); }},
    {"l2_resident", R"j({"type": "boolean"})j", "", kDetail, kNone, true,
     "the working set fits in L2: copies may beat the memory's figure",
     [](R r) { return Json(r.physical.l2_resident); }},
    {"verified_epochs", R"j({"type": "integer", "minimum": 2})j", "", kDetail, kNone, true,
     "back-to-back iterations whose every element was checked", [](R r) { return Json(r.verified_epochs); }},
    {"skew_us", R"j({"type": "number", "minimum": 0})j", "us", kDetail, kNone, false,
     "delay of odd ranks before each verified push", [](R r) { return Json(r.skew_us); }},
    {"wrong",
     R"j({"type": "integer", "minimum": 0})j",
     "",
     kDetail,
     kNone,
     true,
     "elements that did not hold the expected value (0: verified)",
     [](R r) { return Json(r.wrong); },
     {14, "#wrong", 7}},
};

// The printed table's columns: the fields that have one, by position.
std::vector<const A2aRowField*> columns() {
  std::vector<const A2aRowField*> out;
  for (const auto& f : kFields)
    if (f.column.header) out.push_back(&f);
  std::stable_sort(out.begin(), out.end(),
                   [](const auto* a, const auto* b) { return a->column.position < b->column.position; });
  return out;
}

std::string cell_text(const A2aRowField& f, R r) {
  if (f.column.cell) return f.column.cell(r);
  const Json v = f.value(r);
  if (v.is_null()) return "-";
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_float()) return fixed(v.get<double>(), f.column.precision);
  return v.dump();
}

void append_cell(std::string& line, const std::string& text, int width) {
  if (!line.empty()) line += ' ';
  if (static_cast<int>(text.size()) < width) line.append(static_cast<std::size_t>(width) - text.size(), ' ');
  line += text;
}

}  // namespace

const char* to_string(RowRole r) noexcept {
  static constexpr EnumName<RowRole> kNames[] = {{RowRole::identity, "identity"},
                                                 {RowRole::metric, "metric"},
                                                 {RowRole::reference, "reference"},
                                                 {RowRole::detail, "detail"}};
  return enum_name(kNames, r);
}

const char* to_string(Better b) noexcept {
  static constexpr EnumName<Better> kNames[] = {
      {Better::none, "none"}, {Better::lower, "lower"}, {Better::higher, "higher"}};
  return enum_name(kNames, b);
}

const std::vector<A2aRowField>& a2a_row_fields() {
  return kFields;
}

Json to_json(const A2aResult& r) {
  Json j = Json::object();
  for (const auto& f : kFields) j[f.name] = f.value(r);
  return j;
}

Json a2a_row_schema() {
  Json required = Json::array();
  Json props = Json::object();
  for (const auto& f : kFields) {
    if (f.required) required.push_back(f.name);
    Json p = {{"description", f.doc}};
    p.update(Json::parse(f.kind));
    p["x-role"] = to_string(f.role);
    if (*f.unit) p["x-unit"] = f.unit;
    if (f.better != Better::none) p["x-better"] = to_string(f.better);
    props[f.name] = p;
  }
  return {{"type", "object"}, {"required", required}, {"properties", props}};
}

double a2a_ceiling_ratio(const A2aResult& r) {
  return r.ceiling.gbps > 0 ? r.total_bw_gbps / r.ceiling.gbps : 0.0;
}

std::string a2a_mode(const A2aResult& r) {
  std::string m = std::string(to_string(r.addressing)) + " " + to_string(r.sync);
  if (r.sync == SyncMode::device) m += std::string("/") + to_string(r.protocol);
  if (r.graph && r.graph_iters > 0) m += " graph " + std::to_string(r.graph_iters);
  return m;
}

std::string a2a_table_header() {
  std::string line;
  for (const auto* f : columns()) append_cell(line, f->column.header, f->column.width);
  return line + " notes\n";
}

std::string a2a_table_line(const A2aResult& r, bool time_sliced) {
  std::string line;
  for (const auto* f : columns()) append_cell(line, cell_text(*f, r), f->column.width);
  if (r.physical.l2_resident) line += " L2-resident";
  if (r.signal_scope == "device") line += " device-scope";
  if (r.source_cache == "evict_first") line += " evict-first";
  if (r.launch == "programmatic") line += " programmatic";
  if (time_sliced) line += " TIME-SLICED(no MPS)";
  return line + "\n";
}

}  // namespace mori::symm
