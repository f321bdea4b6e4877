// mori-probe: per-device capability report; the handle type is chosen by trying it.
#include <cstdio>

#include <cstdlib>

#include "mori/symm/error.hpp"
#include "mori/symm/jit.hpp"
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
};

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
    for (const auto& spec : kernel_catalog()) {
      jit.get(spec);
      if (env.is_root()) {
        const auto& st = jit.stats().back();
        std::printf("%-8s %-10s %-9s %8.1f ms  key %s\n", arch.c_str(), spec.file.c_str(), st.source.c_str(),
                    st.ms, st.key.c_str());
      }
    }
    out.push_back(jit.stats_json());
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
    for (int d = 0; d < rt.device_count(); ++d) devs.push_back(to_json(probe_device(rt, d)));
    node["devices"] = devs;
    if (o.deep) node["deep"] = probe_deep(rt, static_cast<std::size_t>(o.deep_mib * (1 << 20)));
    mine = node.dump();
  }
  // Gather the node reports (variable length) to every rank; rank 0 prints.
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
  if (env.is_root()) {
    if (env.common.json != "-") print_table(nodes);
    if (!env.common.json.empty()) write_json(env.common.json, doc);
  }
  return 0;
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
    app.add_option("--archs", o.archs,
                   "Archs for --jit-precompile, comma separated (default $MORI_GPU_ARCHS)");
  };
  spec.validate = [&] {
    if (!(o.deep_mib >= 2 && o.deep_mib <= 65536)) throw UsageError("--deep-mib: must be in [2, 65536]");
  };
  spec.body = [&](ToolEnv& env) { return o.jit_precompile ? precompile(env, o) : run(env, o); };
  return tool_main(argc, argv, spec);
}
