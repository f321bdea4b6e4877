// mori-probe: per-device capability report; the handle type is chosen by trying it.
#include <cstdio>

#include <cstdlib>
#include <set>

#include "mori/symm/doctor.hpp"
#include "mori/symm/environment.hpp"
#include "mori/symm/error.hpp"
#include "mori/symm/jit.hpp"
#include "mori/symm/matrix.hpp"
#include "mori/symm/probe.hpp"
#include "mori/symm/report.hpp"
#include "mori/symm/tool.hpp"

using namespace mori::symm;

namespace {

struct Options {
  bool deep = false;
  double deep_mib = 256;
  bool jit_precompile = false;
  std::string archs;
  bool list_diagnoses = false;
  bool strict = false;
  int windows = 16;
  bool matrix = false;
  double matrix_mib = 64;
  MatrixOptions mx;
  std::string write_kernel = "auto";
  std::string write_blocks = "auto";
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

// Every kernel of the catalog for every arch asked for; needs no GPU.
int precompile(ToolEnv& env, const Options& o) {
  std::string archs = o.archs;
  if (archs.empty())
    if (const char* a = std::getenv("MORI_GPU_ARCHS"); a && *a) archs = a;
  if (archs.empty() && env.rt->platform() != Platform::host) archs = env.rt->device_info(env.device).arch;
  if (archs.empty())
    throw UsageError("--jit-precompile: name the archs with --archs or MORI_GPU_ARCHS (e.g. sm_90)");
  Json out = Json::array();
  std::size_t pos = 0;
  while (pos <= archs.size()) {
    std::size_t end = archs.find(',', pos);
    if (end == std::string::npos) end = archs.size();
    const std::string arch = archs.substr(pos, end - pos);
    pos = end + 1;
    if (arch.rfind("sm_", 0) != 0 && arch.rfind("gfx", 0) != 0)
      throw UsageError("--archs: '" + arch + "' is not an arch like sm_90 or gfx942");
    Jit jit(arch, arch.rfind("sm_", 0) == 0 ? "cuda" : "amd");
    Json instantiations = Json::object();
    for (const auto& spec : kernel_catalog(arch)) {
      jit.get(spec);
      instantiations[spec.file] = spec.instantiations.size();
      if (env.is_root()) {
        const auto& st = jit.stats().back();
        std::printf("%-8s %-10s %-9s %8.1f ms  key %s  (%zu instantiations)\n", arch.c_str(),
                    spec.file.c_str(), st.source.c_str(), st.ms, st.key.c_str(), spec.instantiations.size());
      }
    }
    // What this arch does not get, by design (docs/amd.md "Which kernels exist for which vendor").
    Json left_out = Json::array();
    for (const auto& k : kernels_left_out(arch)) {
      left_out.push_back({{"file", k.file}, {"instantiation", k.instantiation}, {"needs", k.needs}});
      if (env.is_root())
        std::printf("%-8s %-10s left out: %s (needs %s)\n", arch.c_str(), k.file.c_str(),
                    k.instantiation.c_str(), k.needs.c_str());
    }
    Json arch_doc = jit.stats_json();
    arch_doc["instantiations"] = instantiations;
    arch_doc["left_out"] = left_out;
    out.push_back(arch_doc);
  }
  if (env.is_root() && !env.common.json.empty()) {
    Json doc;
    doc["schema"] = "mori.probe/1";
    doc["meta"] = make_meta(env, "");
    doc["config"] = {{"jit_precompile", true}, {"archs", archs}};
    doc["nodes"] = Json::array();
    doc["jit_precompile"] = out;
    write_json(env.common.json, doc);
  }
  return 0;
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

std::string gbps(const Json& v) {
  if (v.is_null()) return "-";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f", v.get<double>());
  return buf;
}

std::string ratio(const Json& v) {
  if (v.is_null()) return "-";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3f", v.get<double>());
  return buf;
}

// --write-kernel all: one line per (row, variant).
void print_variants(const Json& m) {
  std::printf("write kernels against the copy engine (CE), timed interleaved:\n");
  std::printf("  %-9s %-4s %-20s %-8s %12s %12s %8s %s\n", "src->dst", "addr", "variant", "ran", "write GB/s",
              "CE GB/s", "write/CE", "check");
  for (const auto& r : m["rows"]) {
    const std::string pair = std::to_string(r["src"].get<int>()) + "->" + std::to_string(r["dst"].get<int>());
    for (const auto& x : r["write_variants"])
      std::printf("  %-9s %-4s %-20s %-8s %12s %12s %8s %s\n", pair.c_str(),
                  r["addressing"].get<std::string>().c_str(), x["variant"].get<std::string>().c_str(),
                  x["kernel"].get<std::string>().c_str(), gbps(x["write_gbps"]).c_str(),
                  gbps(x["copy_engine_write_gbps"]).c_str(), ratio(x["write_over_copy_engine"]).c_str(),
                  x["verified"].get<bool>() ? "ok" : "WRONG");
  }
}

void print_matrix(const Json& m) {
  std::printf("peer matrix (%s MiB, p50 latency of %d round trips / 2):\n",
              gbps(Json(m["bytes"].get<double>() / (1 << 20))).c_str(), m["rounds"].get<int>());
  std::printf("  %-9s %-4s %-16s %12s %12s %12s %8s %12s %12s\n", "src->dst", "addr", "write kernel",
              "write GB/s", "read GB/s", "CE write", "write/CE", "lat us", "link GB/s");
  std::set<std::string> notes;
  for (const auto& r : m["rows"]) {
    const std::string pair = std::to_string(r["src"].get<int>()) + "->" + std::to_string(r["dst"].get<int>());
    const auto& wk = r["write_kernel"];
    if (wk.contains("fallback"))
      notes.insert(wk["variant"].get<std::string>() + ": " + wk["fallback"].get<std::string>());
    std::printf("  %-9s %-4s %-16s %12s %12s %12s %8s %12s %12s%s%s\n", pair.c_str(),
                r["addressing"].get<std::string>().c_str(), wk["variant"].get<std::string>().c_str(),
                gbps(r["write_gbps"]).c_str(), gbps(r["read_gbps"]).c_str(),
                gbps(r["copy_engine_write_gbps"]).c_str(), ratio(r["write_over_copy_engine"]).c_str(),
                gbps(r["latency_us_p50"]).c_str(), gbps(r["link_gbps"]).c_str(),
                r.contains("status") ? "  TIMEOUT" : "", r["write_verified"].get<bool>() ? "" : "  WRONG");
  }
  for (const auto& n : notes) std::printf("  note: %s\n", n.c_str());
  if (!m["rows"].empty() && m["rows"][0].contains("write_variants")) print_variants(m);
}

int run(ToolEnv& env, const Options& o) {
  auto& boot = *env.boot;
  auto& rt = *env.rt;
  // One report per node: the first rank of each node probes every device of the node.
  std::string mine;
  if (boot.host_local_rank() == 0) {
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
    mine = node.dump();
  }
  // Gather the node reports (variable length) to every rank; rank 0 prints.
  const auto facts = gather_rank_facts(&boot, &rt, env.device);
  auto lens = boot.allgather_value("probe.lengths", static_cast<std::uint64_t>(mine.size()));
  std::uint64_t maxlen = 0;
  for (auto l : lens) maxlen = std::max(maxlen, l);
  std::vector<char> buf(maxlen, 0), all(maxlen * lens.size(), 0);
  std::copy(mine.begin(), mine.end(), buf.begin());
  if (maxlen) boot.allgather("probe.reports", buf.data(), all.data(), maxlen);
  Json nodes = Json::array();
  for (std::size_t r = 0; r < lens.size(); ++r)
    if (lens[r]) nodes.push_back(Json::parse(std::string(all.data() + r * maxlen, lens[r])));

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
  bool timed_out = false;
  if (o.matrix) {
    auto mx = o.mx;
    mx.bytes = static_cast<std::size_t>(o.matrix_mib * (1 << 20)) / 16 * 16;
    doc["matrix"] = peer_matrix(boot, rt, env.device, choose_handle_type(rt, env.device), mx, &timed_out);
  }
  if (env.is_root()) {
    if (env.common.json != "-") {
      print_table(nodes);
      std::printf("diagnoses: %s\n%s", diagnoses.empty() ? "none" : "", format_diagnoses(diagnoses).c_str());
      if (o.matrix) print_matrix(doc["matrix"]);
    }
    if (!env.common.json.empty()) write_json(env.common.json, doc);
  }
  if (timed_out) return static_cast<int>(ExitCode::timeout);
  if (o.matrix && doc["matrix"]["writes_wrong"].get<std::size_t>() > 0) {
    if (env.is_root())
      std::fprintf(stderr,
                   "mori-probe: %zu matrix write(s) left wrong bytes in the peer's slot (WRONG above)\n",
                   doc["matrix"]["writes_wrong"].get<std::size_t>());
    return static_cast<int>(ExitCode::check_failed);
  }
  return o.strict && has_error(diagnoses) ? static_cast<int>(ExitCode::check_failed) : 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  ToolSpec spec;
  spec.name = "mori-probe";
  spec.description =
      "Per-device capability report for symmetric memory: which handle type works, by trying it.";
  spec.declare = [&](CLI::App& app) {
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
    app.add_flag(
        "--matrix", o.matrix,
        "Peer matrix through a symmetric window: write/read bandwidth and put-with-signal latency for "
        "every ordered pair of ranks of a node");
    app.add_option("--matrix-mib", o.matrix_mib, "Bandwidth transfer size for --matrix, MiB")
        ->capture_default_str();
    app.add_option("--pairs", o.mx.pairs, "--matrix: measure this many sampled pairs (0 = all)")
        ->capture_default_str();
    app.add_option("--rounds", o.mx.rounds, "--matrix: ping-pong round trips per pair")
        ->capture_default_str();
    app.add_option("--iterations", o.mx.iterations, "--matrix: timed transfers per direction")
        ->capture_default_str();
    app.add_option(
           "--write-kernel", o.write_kernel,
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
    app.add_option("--archs", o.archs,
                   "Archs for --jit-precompile, comma separated (default $MORI_GPU_ARCHS)");
  };
  spec.validate = [&] {
    if (!(o.matrix_mib >= 1.0 / 1024 && o.matrix_mib <= 65536))
      throw UsageError("--matrix-mib: must be in [1/1024, 65536]");
    if (o.mx.pairs < 0 || o.mx.rounds < 1 || o.mx.rounds > 1000000 || o.mx.iterations < 1 ||
        o.mx.iterations > 10000)
      throw UsageError("--pairs >= 0, --rounds in [1, 1000000], --iterations in [1, 10000]");
    if (o.windows < 1 || o.windows > 1 << 20) throw UsageError("--windows: must be in [1, 1048576]");
    if (!(o.deep_mib >= 2 && o.deep_mib <= 65536)) throw UsageError("--deep-mib: must be in [2, 65536]");
    o.mx.write.kernel = parse_write_kernel(o.write_kernel);
    parse_write_blocks(o.write_blocks, o.mx.write);
    validate_write_kernel(o.mx.write);
  };
  spec.body = [&](ToolEnv& env) {
    if (o.list_diagnoses) return list_catalog(env);
    return o.jit_precompile ? precompile(env, o) : run(env, o);
  };
  return tool_main(argc, argv, spec);
}
