#include "mori/symm/tool.hpp"

#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>

#include "mori/symm/detail/fault.hpp"
#include "mori/symm/detail/text.hpp"
#include "mori/symm/error.hpp"
#include "mori/symm/files.hpp"
#include "mori/symm/jit.hpp"
#include "mori/symm/log.hpp"
#include "mori/symm/report.hpp"
#include "mori/symm/version.hpp"

namespace mori::symm {

void check_output_path(const std::string& option, const std::string& path) {
  if (path.empty() || path == "-") return;
  namespace fs = std::filesystem;
  // What write_json will write: the symlink's target, not the link.
  const std::string target = resolve_output_path(path);
  fs::path p(target);
  std::error_code ec;
  if (fs::is_directory(p, ec)) throw UsageError(option + ": '" + path + "' is a directory, not a file");
  if (p.filename().string().size() > NAME_MAX)
    throw UsageError(option + ": the file name '" + p.filename().string() + "' is longer than " +
                     std::to_string(NAME_MAX) + " bytes");
  if (target.size() >= PATH_MAX)
    throw UsageError(option + ": the path is longer than " + std::to_string(PATH_MAX - 1) + " bytes");
  struct stat st {};
  if (stat(target.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    // Written in place (a device node, a FIFO, a terminal): the file itself must be writable.
    if (access(target.c_str(), W_OK) != 0)
      throw UsageError(option + ": '" + path + "' exists and is not writable");
    return;
  }
  fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  if (!fs::is_directory(dir, ec)) throw UsageError(option + ": folder '" + dir.string() + "' does not exist");
  if (access(dir.c_str(), W_OK) != 0)
    throw UsageError(option + ": folder '" + dir.string() + "' is not writable");
  if (fs::exists(p, ec) && access(p.c_str(), W_OK) != 0)
    throw UsageError(option + ": '" + path + "' exists and is not writable");
}

namespace {

constexpr double kMinEndBoundS = 1.0;

void add_common(CLI::App& app, CommonOptions& o) {
  // A later occurrence of an option wins, as wrappers that append options expect.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--json", o.json, "Write the JSON report to PATH ('-' = stdout)");
  app.add_option("--backend", o.backend, "Runtime: auto | gpu | host")->capture_default_str();
  app.add_option("--device", o.device, "Device index (default: node-local rank modulo device count)");
  app.add_option("--timeout-s", o.timeout_s, "Bound on every wait, in seconds")->capture_default_str();
  app.add_option("--log-level", o.log_level,
                 "trace|debug|info|warn|error|off (default $MORI_LOG_LEVEL or info)");
  app.add_option("--node-id", o.node_id,
                 "Simulated node id (default $MORI_NODE_ID): ranks of different ids "
                 "are different load/store teams");
}

void validate_common(CommonOptions& o) {
  if (!(o.timeout_s > 0) || !std::isfinite(o.timeout_s) || o.timeout_s > 86400)
    throw UsageError("--timeout-s: must be in (0, 86400] seconds");
  if (o.device < -1 || o.device > 1023) throw UsageError("--device: must be in 0..1023");
  parse_backend(o.backend);
  check_output_path("--json", o.json);
  if (o.node_id.empty()) {
    const char* env = std::getenv("MORI_NODE_ID");
    if (env) o.node_id = env;
  }
  check_node_id(o.node_id);
  detail::validate_fault_spec();
}

// Every rank must run with the same options: checked collectively, so that every rank fails alike.
void check_same_options(Bootstrap& boot, const std::vector<std::string>& argv) {
  std::uint64_t h = detail::kFnvOffset;
  for (std::size_t i = 1; i < argv.size(); ++i) h = detail::fnv1a(h, argv[i].c_str(), argv[i].size() + 1);
  auto all = boot.allgather_value("tool.options", h);
  std::map<std::uint64_t, std::vector<int>> groups;
  for (std::size_t r = 0; r < all.size(); ++r) groups[all[r]].push_back(static_cast<int>(r));
  if (groups.size() <= 1) return;
  std::string s = "command-line options differ between ranks:";
  for (const auto& [hash, ranks] : groups) s += " {ranks " + detail::join_ranks(ranks) + "}";
  throw UsageError(s + "; every rank must run with the same options");
}

// A report or table lost on stdout (a full disk, a closed pipe or stdout) turns a success into exit 3, with
// one line naming the error (docs/reliability.md, "Files the tools read and write").
int checked_stdout(const std::string& tool, int code) {
  const std::string lost = finish_stdout();
  if (lost.empty()) return code;
  std::fprintf(stderr, "%s: error (%s): %s\n", tool.c_str(), rank_tag().c_str(), lost.c_str());
  return code == 0 ? static_cast<int>(ExitCode::runtime) : code;
}

}  // namespace

int tool_main(int argc, char** argv, const ToolSpec& spec) {
  guard_standard_streams();  // before MPI or anything else opens a file (files.hpp)
  MpiSession session(&argc, &argv);
  int world_rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  ToolEnv env;
  env.tool = spec.name;
  for (int i = 0; i < argc; ++i) env.argv.emplace_back(argv[i]);
  int code = 0;
  double end_bound = 10;
  try {
    // The level is settled after parsing (the command line wins over MORI_LOG_LEVEL); until then: info.
    log::init("info");
    log::set_rank(world_rank);
    CLI::App app(spec.description, spec.name);
    app.set_version_flag("--version",
                         std::string(spec.name) + " " + version() + " (git " + git_revision() + ")");
    add_common(app, env.common);
    if (spec.declare) spec.declare(app);
    try {
      app.parse(argc, argv);
    } catch (const CLI::CallForHelp&) {
      if (world_rank == 0) std::printf("%s", app.help().c_str());
      return session.finish_with(checked_stdout(spec.name, 0), end_bound);
    } catch (const CLI::CallForVersion& e) {
      if (world_rank == 0) std::printf("%s\n", e.what());
      return session.finish_with(checked_stdout(spec.name, 0), end_bound);
    } catch (const CLI::ParseError& e) {
      throw UsageError(e.what());
    }
    validate_common(env.common);
    log::init(env.common.log_level);
    log::set_rank(world_rank);
    try {
      if (spec.validate) spec.validate();
    } catch (const CLI::Success&) {  // an informational option (e.g. --list) did its job
      return session.finish_with(checked_stdout(spec.name, 0), end_bound);
    }
    end_bound = std::min(env.common.timeout_s, 5.0);
    set_jit_wait_bound(env.common.timeout_s);
    set_file_bound(env.common.timeout_s);

    env.boot = std::make_unique<Bootstrap>(env.common.timeout_s, env.common.node_id);
    check_same_options(*env.boot, env.argv);
    if (spec.needs_runtime) {
      env.rt = select_runtime(parse_backend(env.common.backend), &env.runtime_notice);
      if (!env.runtime_notice.empty()) {
        if (env.is_root()) spdlog::info("{}", env.runtime_notice);
        env.gpu_unavailable = env.runtime_notice;
      }
      const int n = env.rt->device_count();
      env.device = env.common.device >= 0 ? env.common.device : env.boot->host_local_rank() % n;
      if (env.device >= n)
        throw UsageError("--device: " + std::to_string(env.device) + " is out of range (this node has " +
                         std::to_string(n) + " device(s))");
      env.rt->set_device(env.device);
      spdlog::debug("{}: runtime {}, device {} of {}", spec.name, to_string(env.rt->platform()), env.device,
                    n);
    }
    code = spec.body(env);
  } catch (const Error& e) {
    std::fprintf(stderr, "%s: error (%s): %s\n", spec.name.c_str(), rank_tag().c_str(), e.what());
    code = static_cast<int>(e.code());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error (%s): %s\n", spec.name.c_str(), rank_tag().c_str(), e.what());
    code = static_cast<int>(ExitCode::runtime);
  }
  code = checked_stdout(spec.name, code);
  // Resources go before MPI ends: the runtime, then the bootstrap's communicator.
  env.rt.reset();
  env.boot.reset();
  // A bound already expired: a rank is missing, and waiting the full bound again would only delay the end.
  if (wait_bound_expired()) end_bound = std::min(end_bound, kExpiredWaitBoundS);
  // The last barrier is not a wait of the user's: a --timeout-s far below its latency must not abort a job
  // whose ranks all finished.
  end_bound = std::max(end_bound, kMinEndBoundS);
  return session.finish_with(code, end_bound);
}

}  // namespace mori::symm
