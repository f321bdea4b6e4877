// SPDX-License-Identifier: MIT
// mori-probe: per-device capability report; the handle type is chosen by trying it.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>

#include "mori/symm/base/error.hpp"
#include "mori/symm/base/files.hpp"
#include "mori/symm/base/report.hpp"
#include "mori/symm/bringup/doctor.hpp"
#include "mori/symm/bringup/environment.hpp"
#include "mori/symm/bringup/probe.hpp"
#include "mori/symm/comm/bootstrap.hpp"
#include "mori/symm/health/gather.hpp"
#include "mori/symm/health/health.hpp"
#include "mori/symm/jit/jit.hpp"
#include "mori/symm/jit/precompile.hpp"
#include "mori/symm/matrix/matrix.hpp"
#include "mori/symm/tool/tool.hpp"

using namespace mori::symm;

namespace {

namespace fs = std::filesystem;

struct Options {
  bool deep = false;
  double deep_mib = 256;
  bool jit_precompile = false;
  std::string archs;
  std::uint64_t wall_clock_khz = 0;  // --jit-precompile, AMD: 0 = the device's where it is of the arch
  bool list_diagnoses = false;
  bool strict = false;
  int windows = 16;
  bool matrix = false;
  double matrix_mib = 64;
  MatrixOptions mx;
  std::string write_kernel = "auto";
  std::string write_blocks = "auto";
  bool health = false;
  std::string handle_type = "auto";  // --matrix / --health: the window's, as given
  std::optional<HandleType> handle;  // ... parsed (none: auto, chosen by trying)
  std::string expect;                // --expect FILE: a site's expectations on top of ours
  bool expect_only = false;          // --expect-only: the site's file in place of ours
  std::string bad_hosts;             // --bad-hosts FILE: the failing nodes, one a line
  Expectations expectations;         // what --health judges against (read while validating the options)
  const CLI::Option* pairs_given = nullptr;  // --pairs and --json as given: an option that does not apply
  const CLI::Option* json_given = nullptr;   // is refused (validate)
};

int list_catalog(ToolEnv& env) {
  if (!env.is_root()) return 0;
  std::printf("%-34s %-8s %s\n", "id", "severity", "cause / fix");
  for (const auto& e : diagnosis_catalog())
    std::printf("%-34s %-8s %s\n%44s fix: %s\n", e.id, to_string(e.severity), e.cause, "", e.fix);
  return 0;
}

// The device and deep checks of the node this rank probed.
Json node_diagnoses(ToolEnv& env, const std::vector<DeviceProbe>& probes, const Json& node) {
  std::vector<Diagnosis> d;
  for (const auto& p : probes) {
    auto x = diagnose_device(p, env.rt->platform(), device_env(*env.rt, p.info.index), env.boot->rank());
    d.insert(d.end(), x.begin(), x.end());
  }
  if (node.contains("deep")) {
    auto x = diagnose_deep(node["deep"], env.boot->rank());
    d.insert(d.end(), x.begin(), x.end());
  }
  return to_json(d);
}

// Every node's device checks plus the cross-rank checks, errors first.
std::vector<Diagnosis> all_diagnoses(const Json& nodes, const std::vector<RankFacts>& facts, int windows) {
  auto d = diagnose_ranks(facts, windows);
  for (const auto& n : nodes)
    for (const auto& j : n["diagnoses"]) d.push_back(diagnosis_from_json(j));
  sort_diagnoses(d);
  return d;
}

std::string gib(std::uint64_t b) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f GiB", static_cast<double>(b) / (1ull << 30));
  return buf;
}

std::string attr(const Json& a) {
  return a.is_null() ? "-" : (a.get<bool>() ? "1" : "0");
}

void print_table(const Json& nodes) {
  for (const auto& node : nodes) {
    std::printf("node %s (%s runtime)\n", node["host"].get<std::string>().c_str(),
                node["runtime"].get<std::string>().c_str());
    if (node.contains("gpu_unavailable"))
      std::printf("  note: %s\n", node["gpu_unavailable"].get<std::string>().c_str());
    std::printf("  %-3s %-28s %-7s %4s %10s %4s %9s  %-14s %-14s %-9s\n", "dev", "name", "arch", "SMs",
                "memory", "vmm", "gran", "posix_fd a/use", "fabric a/use", "chosen");
    for (const auto& d : node["devices"]) {
      const auto& fd = d["handle_types"]["posix_fd"];
      const auto& fab = d["handle_types"]["fabric"];
      std::printf(
          "  %-3d %-28.28s %-7s %4d %10s %4s %7zuKi  %-14s %-14s %-9s\n", d["index"].get<int>(),
          d["name"].get<std::string>().c_str(), d["arch"].get<std::string>().c_str(),
          d["multiprocessors"].get<int>(), gib(d["memory_bytes"].get<std::uint64_t>()).c_str(),
          d["vmm_supported"].get<bool>() ? "yes" : "no",
          d["granularity"]["recommended"].get<std::size_t>() / 1024,
          (attr(fd["attribute"]) + " / " + (fd["usable"].get<bool>() ? "yes" : "no")).c_str(),
          (attr(fab["attribute"]) + " / " + (fab["usable"].get<bool>() ? "yes" : "no")).c_str(),
          d["chosen_handle_type"].is_null() ? "none" : d["chosen_handle_type"].get<std::string>().c_str());
      std::printf(
          "      reason: %s%s\n", d["reason"].get<std::string>().c_str(),
          d["attribute_disagrees"].get<bool>() ? "  [driver attribute disagrees with what works]" : "");
      for (const char* t : {"posix_fd", "fabric"}) {
        std::string line;
        for (const auto& s : d["handle_types"][t]["steps"])
          line += s["step"].get<std::string>() + "=" + s["status"].get<std::string>() + " ";
        std::printf("      %-8s %s\n", t, line.c_str());
      }
      std::printf("      uncached: %s; IMEX channel: %s\n", d["uncached"]["note"].get<std::string>().c_str(),
                  d["imex_channel"].get<std::string>().c_str());
    }
    if (node.contains("deep")) {
      for (const auto& p : node["deep"]["pairs"])
        std::printf("  reach %d -> %d: %s\n", p["accessor"].get<int>(), p["owner"].get<int>(),
                    p["status"].get<std::string>().c_str());
      for (const auto& p : node["deep"]["access_grant_penalty"]) {
        if (p["granted_to"].is_null())
          std::printf("  owner %d local bandwidth: write %.0f GB/s, read %.0f GB/s (%s)\n",
                      p["owner"].get<int>(), p["write_gbps_before"].get<double>(),
                      p["read_gbps_before"].get<double>(), p["note"].get<std::string>().c_str());
        else
          std::printf("  owner %d after granting %d: write %.0f -> %.0f GB/s, read %.0f -> %.0f GB/s\n",
                      p["owner"].get<int>(), p["granted_to"].get<int>(), p["write_gbps_before"].get<double>(),
                      p["write_gbps_after"].get<double>(), p["read_gbps_before"].get<double>(),
                      p["read_gbps_after"].get<double>());
      }
    }
  }
}

// ---- --health (docs/mori-probe.md "Health")
// ------------------------------------------------------------------

// One expectations file through the tools' bounded reader (files.hpp; 1 MiB at most); every way it can be
// wrong (absent, not a regular file, too large, unreadable) is a UsageError naming the file.
Expectations read_expectations(const std::string& path) {
  std::string text;
  try {
    text = read_file(path, kExpectations);
  } catch (const FileError& e) {
    throw UsageError(std::string("--expect: ") + e.what());
  }
  Json doc;
  try {
    doc = Json::parse(text);
  } catch (const std::exception& e) {
    throw UsageError("--expect: " + path + ": not JSON: " + e.what());
  }
  return parse_expectations(doc, path);
}

// The committed expectations: installed next to the tools, else in the source tree; "" when neither exists.
std::string default_expectations_path() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path p = exe.parent_path().parent_path() / "share" / "mori" / "expectations" / "default.json";
    if (fs::exists(p, ec)) return p.string();
  }
#ifdef MORI_SOURCE_EXPECTATIONS
  if (fs::exists(MORI_SOURCE_EXPECTATIONS, ec)) return MORI_SOURCE_EXPECTATIONS;
#endif
  return "";
}

// This node's report, made by the first rank of each node (it probes every device of the node); "" elsewhere.
std::string node_report(ToolEnv& env, const Options& o) {
  auto& boot = *env.boot;
  auto& rt = *env.rt;
  if (boot.host_local_rank() != 0) return "";
  Json node;
  node["host"] = boot.hosts()[static_cast<std::size_t>(boot.rank())];
  node["node"] = boot.node_of(boot.rank());
  node["runtime"] = rt.platform() == Platform::host ? "host" : to_string(rt.platform());
  node["driver_version"] = rt.driver_version();
  node["runtime_version"] = rt.runtime_version();
  node["mps_active"] = mps_active();
  if (!env.gpu_unavailable.empty()) node["gpu_unavailable"] = env.gpu_unavailable;
  Json devs = Json::array();
  std::vector<DeviceProbe> probes;
  for (int d = 0; d < rt.device_count(); ++d) {
    probes.push_back(probe_device(rt, d));
    devs.push_back(to_json(probes.back()));
  }
  node["devices"] = devs;
  if (o.deep) node["deep"] = probe_deep(rt, static_cast<std::size_t>(o.deep_mib * (1 << 20)));
  node["diagnoses"] = node_diagnoses(env, probes, node);
  return node.dump();
}

// Collective: the node reports (variable length) to every rank, in rank order.
Json gather_nodes(Bootstrap& boot, const std::string& mine) {
  auto lens = boot.allgather_value("probe.lengths", static_cast<std::uint64_t>(mine.size()));
  std::uint64_t maxlen = 0;
  for (auto l : lens) maxlen = std::max(maxlen, l);
  std::vector<char> buf(maxlen, 0), all(maxlen * lens.size(), 0);
  std::copy(mine.begin(), mine.end(), buf.begin());
  if (maxlen) boot.allgather("probe.reports", buf.data(), all.data(), maxlen);
  Json nodes = Json::array();
  for (std::size_t r = 0; r < lens.size(); ++r)
    if (lens[r]) nodes.push_back(Json::parse(std::string(all.data() + r * maxlen, lens[r])));
  return nodes;
}

// Rank 0's table, diagnoses, matrix and health verdicts on stdout (not with --json -).
void print_report(const Options& o, const Json& doc, const std::vector<Diagnosis>& diagnoses,
                  const PeerMatrix& matrix, const std::vector<HealthCheck>& health,
                  const std::vector<NodeHealth>& fleet) {
  print_table(doc["nodes"]);
  std::printf("diagnoses: %s\n%s", diagnoses.empty() ? "none" : "", format_diagnoses(diagnoses).c_str());
  if (o.matrix) std::printf("%s", format_matrix(matrix).c_str());
  if (!o.health) return;
  std::printf("health:\n%s", format_health(health).c_str());
  for (const auto& f : o.expectations.files) std::printf("  expectations: %s\n", f.c_str());
  if (o.expectations.files.empty()) std::printf("  expectations: none found\n");
  // A job of several nodes ends with the fleet table, and the last line names the failing nodes first.
  if (fleet.size() > 1) std::printf("health, per node:\n%s", format_node_health(fleet).c_str());
  std::string bad;
  for (const auto& n : failing_nodes(fleet)) bad += (bad.empty() ? "" : ", ") + n;
  if (fleet.size() > 1 && !bad.empty())
    std::printf("health: FAIL on %s\n", bad.c_str());
  else
    std::printf("health: %s\n", has_failure(health) ? "FAIL" : "ok (no check failed)");
}

int exit_code(ToolEnv& env, const Options& o, const std::vector<Diagnosis>& diagnoses,
              const PeerMatrix& matrix, const std::vector<HealthCheck>& health) {
  if (matrix.timed_out()) return static_cast<int>(ExitCode::timeout);
  if (o.health && has_failure(health)) return static_cast<int>(ExitCode::check_failed);
  if (o.matrix && matrix.writes_wrong() > 0) {
    if (env.is_root())
      std::fprintf(stderr,
                   "mori-probe: %zu matrix write(s) left wrong bytes in the peer's slot (WRONG above)\n",
                   matrix.writes_wrong());
    return static_cast<int>(ExitCode::check_failed);
  }
  return o.strict && has_error(diagnoses) ? static_cast<int>(ExitCode::check_failed) : 0;
}

int run(ToolEnv& env, const Options& o) {
  auto& boot = *env.boot;
  auto& rt = *env.rt;
  const std::string mine = node_report(env, o);
  // Gather the node reports to every rank; rank 0 prints.
  const auto facts = gather_rank_facts(&boot, &rt, env.device);
  const Json nodes = gather_nodes(boot, mine);
  std::string chosen;
  if (!nodes.empty() && !nodes[0]["devices"].empty() &&
      !nodes[0]["devices"][0]["chosen_handle_type"].is_null())
    chosen = nodes[0]["devices"][0]["chosen_handle_type"];
  Json doc;
  doc["schema"] = "mori.probe/1";
  doc["meta"] = make_meta(env, chosen);
  doc["config"] = {{"deep", o.deep}, {"deep_bytes", static_cast<std::uint64_t>(o.deep_mib * (1 << 20))}};
  doc["nodes"] = nodes;
  const auto diagnoses = all_diagnoses(nodes, facts, o.windows);
  doc["diagnoses"] = to_json(diagnoses);
  // --health: NVLink state and Xid events watched across the measurement.
  std::unique_ptr<HealthGather> watch;
  if (o.health) watch = std::make_unique<HealthGather>(boot, rt, env.device);
  PeerMatrix matrix;
  if (o.matrix) {
    auto mx = o.mx;
    mx.bytes = static_cast<std::size_t>(o.matrix_mib * (1 << 20)) / 16 * 16;
    matrix = peer_matrix(boot, rt, env.device, resolve_handle_type(rt, env.device, o.handle), mx);
    doc["matrix"] = to_json(matrix);
  }
  std::vector<HealthCheck> health;
  std::vector<NodeHealth> fleet;  // one per node
  if (o.health) {
    health = watch->finish(doc, matrix, facts, o.handle, o.expectations);
    fleet = node_health(watch->nodes(), health);
    doc["config"]["health"] = {{"expectations", o.expectations.files}};
    doc["health"] = to_json(health);
    Json nodes_health = Json::array();
    for (const auto& n : fleet) nodes_health.push_back(to_json(n));
    doc["health_nodes"] = nodes_health;
  }
  // meta was made before the measurement: the GPUs' state after it, and the kernels it loaded (docs/json.md).
  if ((o.matrix || o.health) && !matrix.timed_out()) refresh_meta(env, doc["meta"]);
  if (env.is_root()) {
    if (env.common.json != "-") print_report(o, doc, diagnoses, matrix, health, fleet);
    if (!env.common.json.empty()) write_json(env.common.json, doc);
    if (!o.bad_hosts.empty()) {  // ready for a scheduler's drain command: one failing node a line
      std::string text;
      for (const auto& n : failing_nodes(fleet)) text += n + "\n";
      write_output(o.bad_hosts, text);
    }
  }
  return exit_code(env, o, diagnoses, matrix, health);
}

// Every kernel of the catalog for every arch asked for (precompile.hpp); needs no GPU. Rank 0 prints and
// writes the report.
int precompile(ToolEnv& env, const Options& o) {
  const auto print = [&](const std::string& line) {
    if (env.is_root()) std::printf("%s", line.c_str());
  };
  const Precompiled done = precompile_kernels(*env.rt, env.device, {o.archs, o.wall_clock_khz}, print);
  if (env.is_root() && !env.common.json.empty()) {
    Json doc;
    doc["schema"] = "mori.probe/1";
    doc["meta"] = make_meta(env, "");
    doc["config"] = {
        {"jit_precompile", true}, {"archs", done.archs}, {"jobs", done.jobs}, {"wall_ms", done.wall_ms}};
    doc["nodes"] = Json::array();
    doc["jit_precompile"] = done.per_arch;
    write_json(env.common.json, doc);
  }
  return 0;
}

void declare(CLI::App& app, Options& o) {
  app.add_flag("--deep", o.deep,
               "Also map and write between every device pair, and measure the access-grant "
               "penalty on the owner's local bandwidth");
  app.add_option("--deep-mib", o.deep_mib, "Buffer size for --deep bandwidth, MiB")->capture_default_str();
  app.add_flag("--jit-precompile", o.jit_precompile,
               "Compile every kernel into the JIT cache for --archs (no GPU needed), instead of probing");
  app.add_flag("--list-diagnoses", o.list_diagnoses, "Print the catalog of diagnoses and exit");
  app.add_flag("--strict", o.strict, "Exit 1 when a diagnosis of severity error is found");
  app.add_option("--windows", o.windows, "Windows per rank the application will create (fd-limit check)")
      ->capture_default_str();
  app.add_flag("--matrix", o.matrix,
               "Peer matrix through a symmetric window: write/read bandwidth and put-with-signal latency for "
               "every ordered pair of ranks of a node");
  app.add_option("--matrix-mib", o.matrix_mib, "Bandwidth transfer size for --matrix, MiB")
      ->capture_default_str();
  o.pairs_given = app.add_option("--pairs", o.mx.pairs, "--matrix: measure this many sampled pairs (0 = all)")
                      ->capture_default_str();
  o.json_given = app.get_option("--json");
  app.add_option("--rounds", o.mx.rounds, "--matrix: ping-pong round trips per pair")->capture_default_str();
  app.add_option("--iterations", o.mx.iterations, "--matrix: timed transfers per direction")
      ->capture_default_str();
  app.add_option("--write-kernel", o.write_kernel,
                 "--matrix: the write kernel, auto|plain|stream|bulk|bulk-tma|all (all: every variant, each "
                 "against the copy engine)")
      ->capture_default_str();
  app.add_option("--write-blocks", o.write_blocks,
                 "--matrix: write kernel blocks: auto, a count, or Nx = N per multiprocessor")
      ->capture_default_str();
  app.add_option("--write-unroll", o.mx.write.unroll,
                 "--matrix: plain/stream loads in flight per thread, 4, 8 or 16 (0 = auto)")
      ->capture_default_str();
  app.add_option("--write-tile-kib", o.mx.write.tile_kib,
                 "--matrix: bulk/bulk-tma staging buffer, KiB: 4, 8, 16, 32 or 64 (0 = auto)")
      ->capture_default_str();
  app.add_flag("--health", o.health,
               "Run the probe, the peer matrix and a short all-to-all, then judge them: pass, warn, fail or "
               "no_reference per check (exit 1 when one failed)");
  app.add_option("--expect", o.expect,
                 "--health: a site's expectations file (mori.expectations/1), on top of the committed "
                 "results/expectations/default.json (its entries replace ours of the same device, "
                 "interconnect and check)");
  app.add_flag("--expect-only", o.expect_only,
               "--health: judge against the --expect file alone, in place of the committed expectations");
  app.add_option("--bad-hosts", o.bad_hosts,
                 "--health: write the nodes that fail to PATH, one a line (empty where none fails), for a "
                 "scheduler's drain command");
  app.add_option("--handle-type", o.handle_type,
                 "--matrix/--health: the windows' handle type, auto | posix_fd | fabric (auto: the one this "
                 "probe chooses)")
      ->capture_default_str();
  app.add_option("--archs", o.archs, "Archs for --jit-precompile, comma separated (default $MORI_GPU_ARCHS)");
  app.add_option(
         "--wall-clock-khz", o.wall_clock_khz,
         "--jit-precompile, AMD archs: the devices' wall-clock rate, kHz (0 = this device's where the arch "
         "is its own, else 100 MHz)")
      ->capture_default_str();
}

// After parsing, before any MPI traffic: every value checked, --handle-type parsed, the expectations read.
void validate(Options& o) {
  if (!(o.matrix_mib >= 1.0 / 1024 && o.matrix_mib <= 65536))
    throw UsageError("--matrix-mib: must be in [1/1024, 65536]");
  if (o.mx.pairs < 0 || o.mx.rounds < 1 || o.mx.rounds > 1000000 || o.mx.iterations < 1 ||
      o.mx.iterations > 10000)
    throw UsageError("--pairs >= 0, --rounds in [1, 1000000], --iterations in [1, 10000]");
  if (o.windows < 1 || o.windows > 1 << 20) throw UsageError("--windows: must be in [1, 1048576]");
  if (!(o.deep_mib >= 2 && o.deep_mib <= 65536)) throw UsageError("--deep-mib: must be in [2, 65536]");
  if (o.wall_clock_khz != 0 && !wall_clock_rate_plausible(o.wall_clock_khz))
    throw UsageError("--wall-clock-khz: must be 0 or in [" + std::to_string(kWallClockMinKhz) + ", " +
                     std::to_string(kWallClockMaxKhz) + "]");
  if (o.wall_clock_khz != 0 && !o.jit_precompile)
    throw UsageError("--wall-clock-khz: only with --jit-precompile");
  o.mx.write.kernel = parse_write_kernel(o.write_kernel);
  parse_write_blocks(o.write_blocks, o.mx.write);
  validate_write_kernel(o.mx.write);
  o.handle = parse_handle_choice(o.handle_type);
  if ((!o.expect.empty() || o.expect_only) && !o.health) throw UsageError("--expect: only with --health");
  if (o.expect_only && o.expect.empty()) throw UsageError("--expect-only: give the file with --expect FILE");
  if (!o.bad_hosts.empty() && !o.health) throw UsageError("--bad-hosts: only with --health");
  check_output_path("--bad-hosts", o.bad_hosts);
  // An option that does not apply is refused, never silently ignored (docs/mori-probe.md).
  if (o.jit_precompile && (o.matrix || o.health || o.deep))
    throw UsageError(std::string("--jit-precompile: compiles the kernels instead of probing; not with ") +
                     (o.matrix   ? "--matrix"
                      : o.health ? "--health"
                                 : "--deep"));
  if (o.pairs_given->count() > 0 && !o.matrix && !o.health)
    throw UsageError("--pairs: only with --matrix or --health");
  if (o.list_diagnoses && o.json_given->count() > 0)
    throw UsageError("--list-diagnoses: prints the catalog and writes no report; not with --json");
  if (o.health) {
    o.matrix = true;
    const std::string ours = o.expect_only ? "" : default_expectations_path();
    if (!ours.empty()) o.expectations = read_expectations(ours);
    if (!o.expect.empty()) o.expectations = merge_expectations(o.expectations, read_expectations(o.expect));
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  ToolSpec spec;
  spec.name = "mori-probe";
  spec.description =
      "Per-device capability report for symmetric memory: which handle type works, by trying it.";
  spec.declare = [&](CLI::App& app) { declare(app, o); };
  spec.validate = [&] { validate(o); };
  spec.body = [&](ToolEnv& env) {
    if (o.list_diagnoses) return list_catalog(env);
    return o.jit_precompile ? precompile(env, o) : run(env, o);
  };
  return tool_main(argc, argv, spec);
}
