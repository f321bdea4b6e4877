// SPDX-License-Identifier: MIT
// mori-a2a: one-shot all-to-all over a symmetric window, pointer-array vs LSA addressing, host vs device
// synchronisation, optional graphs; verified, and against the platform's copy measured in the same run.
#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "mori/symm/a2a/a2a.hpp"
#include "mori/symm/a2a/chunk.hpp"
#include "mori/symm/a2a/fleet.hpp"
#include "mori/symm/a2a/row.hpp"
#include "mori/symm/a2a/summary.hpp"
#include "mori/symm/base/error.hpp"
#include "mori/symm/base/fds.hpp"
#include "mori/symm/base/log.hpp"
#include "mori/symm/base/report.hpp"
#include "mori/symm/base/units.hpp"
#include "mori/symm/comm/setup_cost.hpp"
#include "mori/symm/tool/tool.hpp"

using namespace mori::symm;

namespace {

struct Options {
  std::string chunk_kib;  // split here, not by CLI11, which drops empty items
  std::string begin, end;
  double factor = 2;
  std::string addressing = "both";
  std::string sync = "both";
  std::string protocol = "auto";
  std::string launch = "programmatic";
  std::string signal_scope = "auto";
  std::string source_cache = "auto";
  int cycles = 1;
  std::string stride_quantum = "0";
  std::string graph = "auto";        // --graph: "auto" (default_graph_iters) or K
  std::string handle_type = "auto";  // --handle-type, parsed into cfg.handle_type
  std::string csv;                   // --csv: "" = none, "-" = stdout
  std::string scope = "auto";        // --scope: auto | team | world
  bool per_team = false;             // --per-team: every team's full table
  double slow_margin = 0.25;         // --slow-margin
  bool strict = false;               // --strict: a slow team exits 1
  A2aConfig cfg;
  const CLI::Option* protocol_given = nullptr;  // --protocol as given: refused where it does not apply
};

void print_table(const std::vector<A2aResult>& rs, int world, bool time_sliced) {
  std::printf(
      "# mori-a2a  world %d  (contract: double-buffered; ceiling = best copy of the same bytes, same run)\n",
      world);
  std::printf("%s", a2a_table_header().c_str());
  for (const auto& r : rs) std::printf("%s", a2a_table_line(r, time_sliced).c_str());
  // ptr vs lsa, same chunk / sync / protocol / graph.
  std::map<std::tuple<std::size_t, std::string, int>, std::pair<double, double>> pairs;
  for (const auto& r : rs) {
    const std::string mode =
        r.sync == SyncMode::host ? "host" : std::string("device/") + to_string(r.protocol);
    auto& p = pairs[{r.chunk_bytes, mode, r.graph_iters}];
    (r.addressing == Addressing::ptr ? p.first : p.second) = r.time_us.p50;
  }
  for (const auto& [k, v] : pairs)
    if (v.first > 0 && v.second > 0)
      std::printf("# ptr vs lsa  chunk %zuB sync %s graph %d: ptr %.2f us, lsa %.2f us (lsa %+.1f%%)\n",
                  std::get<0>(k), std::get<1>(k).c_str(), std::get<2>(k), v.first, v.second,
                  100.0 * (v.second - v.first) / v.first);
}

// --graph: auto (resolved in run(), once the runtime is known; validated here as off) or a count.
int parse_graph(const std::string& text) {
  if (text == "auto") return 0;
  const bool digits =
      !text.empty() && text.size() <= 6 && text.find_first_not_of("0123456789") == std::string::npos;
  if (!digits) throw UsageError("--graph: must be in 0..10000, or auto (got '" + text + "')");
  return std::stoi(text);
}

Json config_json(const Options& o, const ToolEnv& env) {
  Json cfg;
  Json chunks = Json::array();
  for (auto c : o.cfg.chunks) chunks.push_back(c);
  cfg["chunks"] = chunks;
  cfg["addressing"] = o.addressing;
  cfg["sync"] = o.sync;
  cfg["protocol"] = o.protocol;
  cfg["launch"] = o.launch;
  cfg["signal_scope"] = o.signal_scope;
  cfg["source_cache"] = o.source_cache;
  cfg["graph"] = o.cfg.graph;
  cfg["graph_auto"] = o.graph == "auto";
  cfg["blocks_per_peer"] = o.cfg.blocks_per_peer;
  cfg["unroll"] = o.cfg.unroll;
  cfg["warmup"] = o.cfg.warmup;
  cfg["iters"] = o.cfg.iters;
  cfg["verify_epochs"] = o.cfg.verify_epochs;
  cfg["skew_us"] = o.cfg.skew_us;
  cfg["allow_time_slicing"] = o.cfg.allow_time_slicing;
  cfg["handle_type"] = to_string(o.cfg.handle_type);
  cfg["stride_quantum"] = o.cfg.stride_quantum;
  cfg["timeout_s"] = env.common.timeout_s;
  cfg["cycles"] = o.cycles;
  cfg["scope"] = o.scope;
  cfg["slow_margin"] = o.slow_margin;
  cfg["strict"] = o.strict;
  return cfg;
}

// One cycle's resources after its window was torn down: a soak's evidence that nothing accumulates.
Json cycle_json(ToolEnv& env, int cycle, std::uint64_t wrong) {
  const auto live = env.rt->live_resources();
  return {{"cycle", cycle},
          {"fds", count_open_fds()},
          {"handles", live.handles},
          {"mappings", live.mappings},
          {"reservations", live.reservations},
          {"device_free_bytes", env.rt->mem_info().free_bytes},
          {"wrong", wrong}};
}

// The outputs of a one-team job: the table, the best modes, the JSON and the CSV (rank 0).
int report_one_team(ToolEnv& env, const Options& o, Json& doc, const std::vector<A2aResult>& results,
                    bool time_sliced, std::uint64_t wrong, const std::vector<int>& wrong_ranks) {
  Json rs = Json::array();
  for (const auto& r : results) rs.push_back(to_json(r));
  doc["results"] = rs;  // of the last cycle
  doc["wrong"] = wrong;
  doc["wrong_ranks"] = wrong_ranks;
  const auto best = a2a_best_modes(results);
  Json summary = Json::array();
  for (const auto& b : best) summary.push_back(to_json(b));
  doc["best"] = summary;
  if (env.is_root()) {
    if (env.common.json != "-" && o.csv != "-") {
      print_table(results, env.boot->world(), time_sliced);
      for (const auto& b : best) std::printf("# %s\n", format_best(b).c_str());
    }
    if (!env.common.json.empty()) write_json(env.common.json, doc);
    if (!o.csv.empty()) write_output(o.csv, csv_of_rows(rs));
    if (wrong)
      std::fprintf(stderr, "mori-a2a: %llu wrong element(s), received by rank %s\n",
                   static_cast<unsigned long long>(wrong), env.boot->name_ranks(wrong_ranks).c_str());
  }
  return wrong ? static_cast<int>(ExitCode::check_failed) : 0;
}

// The outputs of a job of several teams (docs/mori-a2a.md "Many nodes"): every team's rows gathered
// (collective), a fleet line per configuration, the slow teams, one best line per team; --per-team adds every
// team's table.
int report_fleet(ToolEnv& env, const Options& o, Json& doc, const std::vector<A2aResult>& results,
                 bool time_sliced, const std::string& plan_note) {
  const A2aTeam team = a2a_team_of(*env.boot);
  A2aTeamReport mine = a2a_team_report(team, results, time_sliced);
  mine.plan_note = plan_note;
  const auto teams = gather_team_reports(*env.boot, mine);
  A2aFleetRules rules;
  rules.slow_margin = o.slow_margin;
  rules.host_runtime = env.rt->platform() == Platform::host;
  const auto fleet = a2a_fleet(teams, rules);
  Json rs = Json::array(), best = Json::array(), fj = Json::array(), tj = Json::array();
  std::uint64_t wrong = 0;
  std::vector<int> wrong_ranks;
  std::vector<std::string> slow, bad;
  for (const auto& t : teams) {
    for (const auto& r : t.rows) rs.push_back(r);
    for (const auto& b : t.best) best.push_back(b);
    tj.push_back({{"node", t.team.node},
                  {"ranks", t.team.ranks},
                  {"size", t.team.size},
                  {"wrong", t.wrong},
                  {"wrong_ranks", t.wrong_ranks}});
    wrong += t.wrong;
    wrong_ranks.insert(wrong_ranks.end(), t.wrong_ranks.begin(), t.wrong_ranks.end());
    if (t.wrong)
      bad.push_back(std::to_string(t.wrong) + " wrong element(s) in team " + t.team.node + " (ranks " +
                    t.team.ranks + "), received by " + env.boot->name_ranks(t.wrong_ranks));
  }
  for (const auto& e : fleet) {
    fj.push_back(to_json(e));
    for (const auto& t : e.teams)
      if (t.slow) slow.push_back(format_slow_team(e, t));
  }
  doc["results"] = rs;
  doc["wrong"] = wrong;
  std::sort(wrong_ranks.begin(), wrong_ranks.end());
  doc["wrong_ranks"] = wrong_ranks;
  doc["best"] = best;
  doc["teams"] = tj;
  doc["fleet"] = fj;
  if (env.is_root()) {
    // The job's rank 0 logged its team's note on the plan; a team whose plan reads other cells says so here.
    for (const auto& t : teams)
      if (!t.plan_note.empty() && t.plan_note != teams.front().plan_note)
        spdlog::info("plan on {} (ranks {}): {}", t.team.node, t.team.ranks, t.plan_note);
    if (env.common.json != "-" && o.csv != "-") {
      std::printf("# mori-a2a  world %d in %zu load/store teams, one all-to-all within each, all at once\n",
                  env.boot->world(), teams.size());
      if (o.per_team)
        for (const auto& t : teams) {
          std::printf("# team %s (ranks %s)\n%s", t.team.node.c_str(), t.team.ranks.c_str(),
                      a2a_table_header().c_str());
          for (const auto& line : t.lines) std::printf("%s", line.c_str());
        }
      for (const auto& e : fleet) std::printf("# %s\n", format_fleet(e).c_str());
      for (const auto& t : teams)
        for (const auto& line : t.best_lines) std::printf("# %s\n", line.c_str());
    }
    if (!env.common.json.empty()) write_json(env.common.json, doc);
    if (!o.csv.empty()) write_output(o.csv, csv_of_rows(rs));
    for (const auto& line : slow)
      std::fprintf(stderr, "mori-a2a: %s: %s\n", o.strict ? "error" : "warning", line.c_str());
    for (const auto& line : bad) std::fprintf(stderr, "mori-a2a: %s\n", line.c_str());
  }
  return wrong || (o.strict && !slow.empty()) ? static_cast<int>(ExitCode::check_failed) : 0;
}

int run(ToolEnv& env, Options& o) {
  if (o.csv == "-" && env.common.json == "-")
    throw UsageError("--csv - and --json -: only one of them can take stdout");
  const bool several_teams = env.boot->num_nodes() > 1;
  if (several_teams && o.scope == "world") {
    // One line for the job, not one per rank: rank 0 says it, the others end with the same code.
    if (!env.is_root()) return static_cast<int>(ExitCode::usage);
    throw UsageError("--scope world: the window cannot span load/store teams (this job spans " +
                     std::to_string(env.boot->num_nodes()) +
                     " nodes); --scope team runs one all-to-all within each node, all at once");
  }
  // --graph auto: device sync in a graph wherever a GPU runtime measures device sync (docs/mori-a2a.md "The
  // best mode"); the host runtime has no graphs, so its default stays cheap.
  if (o.graph == "auto") o.cfg.graph = default_graph_iters(o.cfg, env.rt->platform() == Platform::host);
  // A job of several nodes: one all-to-all within every load/store team, all teams at once.
  std::unique_ptr<Bootstrap> team = several_teams ? env.boot->team_bootstrap("a2a.teams") : nullptr;
  Bootstrap& boot = several_teams ? *team : *env.boot;
  Json doc;
  doc["schema"] = "mori.a2a/3";
  std::vector<A2aResult> results;
  std::uint64_t wrong = 0;
  std::set<int> wrong_ranks;  // over every cycle
  bool time_sliced = false;
  std::string plan_note;
  Json cycles = Json::array();
  for (int c = 0; c < o.cycles; ++c) {
    A2aBench bench(*env.rt, boot, env.device, o.cfg);
    results = bench.run(
        [&](const std::string& line) {
          if (o.cycles == 1 && env.is_root()) spdlog::info("{}", line);
        },
        several_teams ? env.boot.get() : nullptr);
    std::uint64_t w = 0;
    for (const auto& r : results) {
      w += r.wrong;
      wrong_ranks.insert(r.wrong_ranks.begin(), r.wrong_ranks.end());
    }
    wrong += w;
    if (c == 0) {
      doc["meta"] = make_meta(env, bench.handle_type());
      doc["meta"]["jit"] = bench.gather_jit_json();
      doc["meta"].update(bench.extra_meta());
      time_sliced = bench.time_sliced();
      plan_note = bench.plan_note();
    }
    bench.finish();
    if (c == 0) doc["meta"]["setup"] = gather_setup_cost(*env.boot);  // with the teardown (collective)
    if (o.cycles > 1) cycles.push_back(cycle_json(env, c, w));
  }
  doc["config"] = config_json(o, env);
  if (o.cycles > 1) doc["cycles"] = cycles;  // this rank's (rank 0's in the file)
  if (several_teams) return report_fleet(env, o, doc, results, time_sliced, plan_note);
  stamp_team(results, a2a_team_of(*env.boot));
  return report_one_team(env, o, doc, results, time_sliced, wrong, {wrong_ranks.begin(), wrong_ranks.end()});
}

// The tool's own options (the common ones are the tool layer's).
void declare_options(CLI::App& app, Options& o) {
  app.add_option("--chunk-kib", o.chunk_kib,
                 "Chunk sizes per peer in KiB, comma separated (default 256); an item may carry its unit: "
                 "B, K, M, G (4096B = 4 KiB)");
  app.add_option("-b,--begin", o.begin, "First chunk size of a sweep (bytes; K/M/G suffixes)");
  app.add_option("-e,--end", o.end, "Last chunk size of a sweep");
  app.add_option("-f,--factor", o.factor, "Sweep factor")->capture_default_str();
  app.add_option("--addressing", o.addressing, "ptr | lsa | both")->capture_default_str();
  app.add_option("--sync", o.sync, "host | device | both")->capture_default_str();
  o.protocol_given =
      app.add_option("--protocol", o.protocol,
                     "Device-sync signalling: simple, direct, ll, copy (comma-separated), both "
                     "(simple,direct), all, or "
                     "auto (the one measured fastest at each size)")
          ->capture_default_str();
  app.add_option(
         "--launch", o.launch,
         "programmatic: each push may start launching while the previous kernel runs (CUDA sm_90+; it "
         "waits for it on the device), with one rank per GPU or where two launches of every rank of the "
         "GPU fit on it at once | plain")
      ->capture_default_str();
  app.add_option("--signal-scope", o.signal_scope,
                 "Scope of the device-sync signals: device (every rank on one NVIDIA GPU) | system | auto "
                 "(device where it applies)")
      ->capture_default_str();
  app.add_option("--source-cache", o.source_cache,
                 "L2 policy of the kernels' source loads: normal | evict-first (NVIDIA sm_80+) | auto "
                 "(evict-first where ranks share one GPU and their working set exceeds its L2)")
      ->capture_default_str();
  app.add_option("--graph", o.graph,
                 "Also capture K iterations (push + device barrier) in a graph; 0 = off; auto = 16 on a GPU "
                 "where device sync is measured, else off")
      ->capture_default_str();
  app.add_option("--blocks-per-peer", o.cfg.blocks_per_peer, "Blocks per destination (0 = auto)")
      ->capture_default_str();
  app.add_option("--unroll", o.cfg.unroll,
                 "Loads in flight per thread before its stores: 4, 8, or 0 = auto (8 from 16 MiB)")
      ->capture_default_str();
  app.add_option("--warmup", o.cfg.warmup, "Untimed iterations per configuration")->capture_default_str();
  app.add_option("--iters", o.cfg.iters, "Timed iterations per configuration")->capture_default_str();
  app.add_option("--verify-epochs", o.cfg.verify_epochs,
                 "Back-to-back verified iterations per configuration (graph: captured, replayed twice)")
      ->capture_default_str();
  app.add_option("--skew-us", o.cfg.skew_us,
                 "Delay of odd ranks before each verified push (-1 = default: 50 GPU, 3000 host)")
      ->capture_default_str();
  app.add_option("--cycles", o.cycles,
                 "Soak: window setup, verified run and teardown N times; resources per cycle in the JSON")
      ->capture_default_str();
  app.add_flag("--allow-time-slicing", o.cfg.allow_time_slicing,
               "Run device sync although ranks share a GPU without MPS (numbers then measure time-slicing)");
  app.add_option("--handle-type", o.handle_type, "auto | posix_fd | fabric")->capture_default_str();
  app.add_option("--stride-quantum", o.stride_quantum, "Round the LSA stride up to this (e.g. 4G); 0 = off")
      ->capture_default_str();
  app.add_option("--scope", o.scope,
                 "auto | team: on a job of several nodes, one all-to-all within each node (load/store team), "
                 "all at once, and a fleet line per configuration | world: one all-to-all over the job "
                 "(refused where it spans nodes); auto = team")
      ->capture_default_str();
  app.add_flag("--per-team", o.per_team, "On a job of several nodes, also print every team's full table");
  app.add_option("--slow-margin", o.slow_margin,
                 "A team is slow when its p50 exceeds the fleet median by this fraction plus its own spread "
                 "(p95/p50 - 1); the host runtime asks for 3x the median")
      ->capture_default_str();
  app.add_flag("--strict", o.strict, "A slow team is an error (exit 1), not a warning");
  app.add_option("--csv", o.csv,
                 "Also write the rows as CSV to PATH ('-' = stdout): one line per row, the JSON's row fields "
                 "(nested ones as time_us.p50)");
}

// After parsing, before any MPI traffic: every option checked and turned into the configuration.
void validate(Options& o) {
  o.cfg.chunks = parse_a2a_chunks(o.chunk_kib, o.begin, o.end, o.factor);
  // Only the documented -1 means the default; NaN, infinities and other negatives are refused.
  if (!(o.cfg.skew_us == -1 || (o.cfg.skew_us >= 0 && o.cfg.skew_us <= 1e6)))
    throw UsageError("--skew-us: must be -1 (the default) or in [0, 1000000] microseconds");
  o.cfg.addressing.clear();
  if (o.addressing == "ptr" || o.addressing == "both") o.cfg.addressing.push_back(Addressing::ptr);
  if (o.addressing == "lsa" || o.addressing == "both") o.cfg.addressing.push_back(Addressing::lsa);
  if (o.cfg.addressing.empty())
    throw UsageError("--addressing: unknown value '" + o.addressing + "' (accepted: ptr, lsa, both)");
  o.cfg.syncs.clear();
  if (o.sync == "host" || o.sync == "both") o.cfg.syncs.push_back(SyncMode::host);
  if (o.sync == "device" || o.sync == "both") o.cfg.syncs.push_back(SyncMode::device);
  if (o.cfg.syncs.empty())
    throw UsageError("--sync: unknown value '" + o.sync + "' (accepted: host, device, both)");
  if (o.cycles < 1 || o.cycles > 100000) throw UsageError("--cycles: must be in 1..100000");
  o.cfg.protocols = parse_protocols(o.protocol);
  // Refused, never silently ignored (docs/mori-a2a.md): host sync has no signalling protocol.
  if (o.protocol_given->count() > 0 && o.sync == "host")
    throw UsageError(
        "--protocol: the device sync's signalling; not with --sync host (use --sync device or both)");
  if (o.launch != "programmatic" && o.launch != "plain")
    throw UsageError("--launch: unknown value '" + o.launch + "' (accepted: programmatic, plain)");
  o.cfg.overlap_launch = o.launch == "programmatic";
  o.cfg.signal_scope = parse_signal_scope(o.signal_scope);
  o.cfg.source_cache = parse_source_cache(o.source_cache);
  o.cfg.handle_type = parse_handle_choice(o.handle_type);
  o.cfg.stride_quantum = o.stride_quantum == "0" ? 0 : parse_size("--stride-quantum", o.stride_quantum);
  o.cfg.graph = parse_graph(o.graph);
  check_output_path("--csv", o.csv);
  if (o.scope != "auto" && o.scope != "team" && o.scope != "world")
    throw UsageError("--scope: unknown value '" + o.scope + "' (accepted: auto, team, world)");
  if (!(o.slow_margin >= 0 && o.slow_margin <= 100))
    throw UsageError("--slow-margin: must be in [0, 100] (a fraction of the fleet median)");
  int world = 1;
  MORI_CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &world));
  validate_a2a(o.cfg, world, 0, false);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  ToolSpec spec;
  spec.name = "mori-a2a";
  spec.description = "One-shot all-to-all over a symmetric memory window: pointer array vs LSA addressing.";
  spec.declare = [&](CLI::App& app) { declare_options(app, o); };
  spec.validate = [&] { validate(o); };
  spec.body = [&](ToolEnv& env) { return run(env, o); };
  return tool_main(argc, argv, spec);
}
