// SPDX-License-Identifier: MIT
#include "mori/symm/tool/tool.hpp"
#include "mori/symm/base/env.hpp"

#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <future>
#include <map>
#include <set>

#include "mori/symm/base/detail/fault.hpp"
#include "mori/symm/base/detail/text.hpp"
#include "mori/symm/base/error.hpp"
#include "mori/symm/base/fds.hpp"
#include "mori/symm/base/files.hpp"
#include "mori/symm/base/log.hpp"
#include "mori/symm/base/report.hpp"
#include "mori/symm/base/version.hpp"
#include "mori/symm/bringup/doctor.hpp"
#include "mori/symm/comm/launcher.hpp"
#include "mori/symm/comm/setup_cost.hpp"
#include "mori/symm/jit/jit.hpp"
#include "mori_build_revision.h"

namespace mori::symm {

void check_output_path(const std::string& option, const std::string& path) {
  if (path.empty() || path == "-") return;
  namespace fs = std::filesystem;
  // A FIFO, a device, a socket or a symlink loop never takes a report: named with the option.
  if (const std::string why = output_path_refusal(path); !why.empty()) throw UsageError(option + ": " + why);
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
  fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  if (!fs::is_directory(dir, ec)) throw UsageError(option + ": folder '" + dir.string() + "' does not exist");
  if (access(dir.c_str(), W_OK) != 0)
    throw UsageError(option + ": folder '" + dir.string() + "' is not writable");
  if (fs::exists(p, ec) && access(p.c_str(), W_OK) != 0)
    throw UsageError(option + ": '" + path + "' exists and is not writable");
}

namespace {

// What a float option says of a value that is not a plain decimal number (is_plain_decimal).
std::string not_plain_decimal(const std::string& text) {
  return "'" + text + "' is not a plain decimal number (digits, an optional '.' and exponent)";
}

constexpr double kMinEndBoundS = 1.0;
constexpr double kTreeCheckBoundS =
    10.0;  // git's answer about the source tree (docs/reliability.md, Revisions)

void add_common(CLI::App& app, CommonOptions& o) {
  // A later occurrence of an option wins, as wrappers that append options expect.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--json", o.json, "Write the JSON report to PATH ('-' = stdout)");
  app.add_option("--backend", o.backend, "Runtime: auto | gpu | host")->capture_default_str();
  // Only a --device given on the command line sets it: no value the user can type means "unset".
  app.add_option_function<int>(
      "--device", [&o](const int& d) { o.device = d; },
      "Device index (default: node-local rank modulo device count)");
  app.add_option("--timeout-s", o.timeout_s, "Bound on every wait, in seconds")->capture_default_str();
  app.add_option("--log-level", o.log_level,
                 "trace|debug|info|warn|error|off (default $MORI_LOG_LEVEL or info)");
  app.add_option("--node-id", o.node_id,
                 "Simulated node id (default $MORI_NODE_ID): ranks of different ids "
                 "are different load/store teams");
}

// One rule for every option of every tool that takes a value (docs/usage.md, "Common options"): an empty
// value is a usage error, never "not given" (a `--json "$OUT"` with OUT unset must not pass with no report);
// a count is decimal digits, as a size is (no hex, no leading space or sign but '-'); and a float is a plain
// decimal number (is_plain_decimal: no hex, no blank, no inf or nan).
void check_values(CLI::App& app) {
  for (CLI::Option* opt : app.get_options([](CLI::Option*) { return true; })) {
    if (opt->get_type_size() == 0) continue;  // a flag
    const std::string type = opt->get_type_name();
    const bool count = type == "INT" || type == "UINT";
    const bool real = type == "FLOAT";
    opt->check(
        [count, real](const std::string& v) -> std::string {
          if (v.empty()) return "an empty value (give one, or leave the option out)";
          if (count) {
            const std::size_t digits = v[0] == '-' ? 1 : 0;
            if (v.size() == digits || v.find_first_not_of("0123456789", digits) != std::string::npos)
              return "'" + v + "' is not a whole number in decimal digits";
          }
          if (real && !is_plain_decimal(v)) return not_plain_decimal(v);
          return {};
        },
        "");
  }
}

void validate_common(CommonOptions& o) {
  if (!(o.timeout_s > 0) || !std::isfinite(o.timeout_s) || o.timeout_s > 86400)
    throw UsageError("--timeout-s: must be in (0, 86400] seconds");
  if (o.device && (*o.device < 0 || *o.device > 1023)) throw UsageError("--device: must be in 0..1023");
  parse_backend(o.backend);
  check_output_path("--json", o.json);
  if (o.node_id.empty()) {
    const char* env = env_read("MORI_NODE_ID");
    if (env) o.node_id = env;
  }
  check_node_id(o.node_id);
  detail::validate_fault_spec();
}

// The revision this app was built from: the tool layer is linked into each app, so this is the app's own,
// which a libmori_symm found through LD_LIBRARY_PATH may not share (docs/reliability.md, "One job, one
// build").
BuildRevision app_revision() {
  return {MORI_BUILD_COMMIT, MORI_BUILD_CLEAN, MORI_BUILD_TREE_DIGEST, MORI_BUILD_SOURCE_DIR};
}

// What every rank of one job must share: the tool, the code (the app's and the library's) and the options.
struct JobIdentity {
  char tool[48];
  char app[136];
  char lib[136];
  std::uint64_t options;  // a hash of argv[1..]
  char args[200];         // argv[1..] as the message shows it (cut)
  std::uint64_t fd_soft;  // RLIMIT_NOFILE after raising it towards what the team needs
  std::uint64_t fd_hard;
  std::uint64_t fd_need;  // what this rank needs (fds_needed)
};

void copy_field(char* dst, std::size_t n, const std::string& s) {
  std::memset(dst, 0, n);
  std::memcpy(dst, s.data(), std::min(s.size(), n - 1));
}

// A revision as people read it: the commit's first 12 digits, "+changes <digest's 8>" for a dirty tree.
std::string short_identity(const std::string& id) {
  const auto plus = id.find('+');
  std::string s = id.substr(0, std::min<std::size_t>(plus, 12));
  if (plus != std::string::npos) s += " with changes " + id.substr(plus + 1, 8);
  return s;
}

// "ranks 0,2 run X, ranks 1 run Y" for a per-rank description.
std::string describe_groups(const std::vector<std::string>& per_rank, const std::string& verb) {
  std::map<std::string, std::vector<int>> groups;
  std::vector<std::string> order;
  for (std::size_t r = 0; r < per_rank.size(); ++r) {
    if (!groups.count(per_rank[r])) order.push_back(per_rank[r]);
    groups[per_rank[r]].push_back(static_cast<int>(r));
  }
  std::string s;
  for (const auto& what : order)
    s += std::string(s.empty() ? "" : ", ") + "ranks " + detail::join_ranks(groups[what]) + " " + verb + " " +
         what;
  return s;
}

// Every rank must run the same tool, built from the same code, with the same options: checked collectively
// before any other traffic, so that every rank fails alike (exit 2) naming the ranks that differ. Each rank
// first raises its descriptor limit towards what `windows` windows need, and the limits ride the same
// allgather, so that a rank below the need is refused here too.
void check_same_job_and_raise_fd_limit(Bootstrap& boot, const std::string& tool,
                                       const std::vector<std::string>& argv, int windows) {
  JobIdentity mine{};
  copy_field(mine.tool, sizeof(mine.tool), tool);
  std::string app = app_revision().identity(), lib = library_revision().identity();
  // Test-only (MORI_FAULT, docs/reliability.md): this rank's app or library claims another revision.
  if (detail::fault_armed("revision.app", boot.rank()))
    app = "fa17ed" + app.substr(std::min<std::size_t>(6, app.size()));
  if (detail::fault_armed("revision.library", boot.rank()))
    lib = "fa17ed" + lib.substr(std::min<std::size_t>(6, lib.size()));
  copy_field(mine.app, sizeof(mine.app), app);
  copy_field(mine.lib, sizeof(mine.lib), lib);
  std::uint64_t h = detail::kFnvOffset;
  for (std::size_t i = 1; i < argv.size(); ++i) h = detail::fnv1a(h, argv[i].c_str(), argv[i].size() + 1);
  mine.options = h;
  std::string args;
  for (std::size_t i = 1; i < argv.size(); ++i) args += (i > 1 ? " " : "") + argv[i];
  if (args.size() > sizeof(mine.args) - 1) args = args.substr(0, sizeof(mine.args) - 4) + "...";
  copy_field(mine.args, sizeof(mine.args), "'" + args + "'");
  // Raised towards what the windows this run holds at once need, and refused below it: the one rule of the
  // doctor's fd_limit_low too (fds_needed, docs/setup.md "Large jobs").
  const std::uint64_t fd_need = fds_needed(boot.team_size(), windows, open_fds_at_start());
  const FdLimit limit = raise_fd_limit(fd_need);
  mine.fd_soft = limit.soft;
  mine.fd_hard = limit.hard;
  mine.fd_need = fd_need;
  const auto all = boot.allgather_value("tool.job", mine);

  std::vector<std::string> tools, code, options;
  bool code_differs = false;
  for (const auto& j : all) {
    tools.emplace_back(j.tool);
    const std::string a(j.app), l(j.lib);
    code.push_back(a == l ? short_identity(a) : short_identity(a) + " with library " + short_identity(l));
    code_differs = code_differs || a != l || a != std::string(all[0].app);
    options.push_back(std::string(j.args) + (std::strlen(j.args) + 1 < sizeof(j.args)
                                                 ? std::string()
                                                 : " (#" + std::to_string(j.options % 1000000) + ")"));
  }
  auto distinct = [](const std::vector<std::string>& v) {
    return std::set<std::string>(v.begin(), v.end()).size();
  };
  if (distinct(tools) > 1)
    throw UsageError("the ranks of this job run different tools: " + describe_groups(tools, "run") +
                     "; every rank must run the same tool");
  if (code_differs)
    throw UsageError(
        "the ranks of this job run different code: " + describe_groups(code, "run " + tool + " at") +
        "; every rank must run one build (a libmori_symm found through LD_LIBRARY_PATH?)");
  std::set<std::uint64_t> hashes;
  for (const auto& j : all) hashes.insert(j.options);
  if (hashes.size() > 1)
    throw UsageError("command-line options differ between ranks: " + describe_groups(options, "run with") +
                     "; every rank must run with the same options");
  // Before any allocation: a rank that would run out of descriptors in the handle exchange says so now, on
  // every rank, instead of failing (or timing out) half-way through it (docs/setup.md, "Large jobs").
  std::vector<int> short_of;
  std::uint64_t lowest = UINT64_MAX, hard = UINT64_MAX, need = 0;
  for (std::size_t r = 0; r < all.size(); ++r) {
    if (all[r].fd_soft >= all[r].fd_need) continue;
    short_of.push_back(static_cast<int>(r));
    if (all[r].fd_soft < lowest) lowest = all[r].fd_soft, hard = all[r].fd_hard;
    need = std::max(need, all[r].fd_need);
  }
  if (!short_of.empty())
    throw UsageError("the descriptor limit (ulimit -n) is " + std::to_string(lowest) + " (hard " +
                     std::to_string(hard) + ") on ranks " + detail::join_ranks(short_of) + ", below the " +
                     std::to_string(need) + " a rank of a " + std::to_string(boot.team_size()) +
                     "-rank team needs at least (those open already, and for each of its " +
                     std::to_string(windows) +
                     " window(s) four and two per peer, and 16); raise it before starting the "
                     "job (ulimit -n " +
                     std::to_string(need) + ", or the hard limit: limits.conf / the launcher's)");
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

bool is_plain_decimal(const std::string& text) {
  std::size_t i = !text.empty() && text[0] == '-' ? 1 : 0;
  auto digits = [&] {
    const std::size_t from = i;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') ++i;
    return i - from;
  };
  std::size_t mantissa = digits();
  if (i < text.size() && text[i] == '.') {
    ++i;
    mantissa += digits();
  }
  if (mantissa == 0) return false;
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    if (i < text.size() && (text[i] == '+' || text[i] == '-')) ++i;
    if (digits() == 0) return false;
  }
  return i == text.size();
}

void check_plain_decimal(const std::string& option, const std::string& text) {
  if (!is_plain_decimal(text)) throw UsageError(option + ": " + not_plain_decimal(text));
}

std::optional<bool> build_stale(ToolEnv& env) {
  if (!env.tree_check.valid()) return env.build_stale;
  const TreeCheck tree = env.tree_check.get();
  env.tree_check = {};
  env.build_stale = tree.stale;
  if (tree.stale.value_or(false))
    spdlog::warn(
        "this build is older than its source tree: {}; its reports name the revision it was built from "
        "(meta.build_stale)",
        tree.why);
  else if (!tree.stale)
    spdlog::debug("meta.build_stale unknown: {}", tree.why);
  return env.build_stale;
}

namespace {

// Parses the command line into app (which lives as long as the run: an option's callbacks and counts stay
// valid) and validates it, the common options, then the tool's. Returns the exit code where the run ends here
// (--help, --version, an informational option such as --list); throws UsageError.
std::optional<int> parse_options(CLI::App& app, int argc, char** argv, const ToolSpec& spec, ToolEnv& env,
                                 int world_rank) {
  app.set_version_flag("--version", std::string(spec.name) + " " + version() + " (git " + MORI_BUILD_COMMIT +
                                        (MORI_BUILD_CLEAN == 0   ? ", tracked files changed"
                                         : MORI_BUILD_CLEAN == 1 ? ", clean"
                                                                 : ", clean state unknown") +
                                        ")");
  add_common(app, env.common);
  if (spec.declare) spec.declare(app);
  check_values(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    if (world_rank == 0) std::printf("%s", app.help().c_str());
    return 0;
  } catch (const CLI::CallForVersion& e) {
    if (world_rank == 0) std::printf("%s\n", e.what());
    return 0;
  } catch (const CLI::ParseError& e) {
    throw UsageError(e.what());
  }
  validate_common(env.common);
  log::init(env.common.log_level);
  log::set_rank(world_rank);
  try {
    if (spec.validate) spec.validate();
  } catch (const CLI::Success&) {  // an informational option (e.g. --list) did its job
    return 0;
  }
  return std::nullopt;
}

// Everything before the tool's body that involves other ranks: the bounds, the launcher's count, the
// bootstrap and the check that every rank runs the same job.
void start_job(ToolEnv& env, const ToolSpec& spec, int world_rank) {
  env.revision = app_revision();
  // Rank 0 asks git whether the tree moved on since the build, when make_meta or the end of the run first
  // wants the answer (build_stale), not in the background: a git child and its pipe alive during the run
  // would show in the resource counts the tools and tests take (fds over window cycles).
  if (world_rank == 0)
    env.tree_check = std::async(std::launch::deferred, [rev = env.revision] {
                       return check_build_tree(rev, kTreeCheckBoundS);
                     }).share();
  set_jit_wait_bound(env.common.timeout_s);
  set_file_bound(env.common.timeout_s);

  // Before any traffic: a launch whose processes did not join one MPI job is refused on every process.
  {
    int mpi_world = 0;
    MORI_CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &mpi_world));
    check_launcher_world(mpi_world);
  }
  env.boot = std::make_unique<Bootstrap>(env.common.timeout_s, env.common.node_id);
  SetupStep timed(Setup::options_check);
  check_same_job_and_raise_fd_limit(*env.boot, spec.name, env.argv,
                                    spec.windows_held ? spec.windows_held() : 1);
}

// The runtime (--backend), the device (--device, else the node-local rank modulo the count), its GPU state.
void start_runtime(ToolEnv& env, const ToolSpec& spec) {
  env.rt = select_runtime(parse_backend(env.common.backend), &env.runtime_notice);
  if (!env.runtime_notice.empty()) {
    if (env.is_root()) spdlog::info("{}", env.runtime_notice);
    env.gpu_unavailable = env.runtime_notice;
  }
  const int n = env.rt->device_count();
  env.device = env.common.device.value_or(env.boot->host_local_rank() % n);
  if (env.device >= n)
    throw UsageError("--device: " + std::to_string(env.device) + " is out of range (this node has " +
                     std::to_string(n) + " device(s))");
  env.rt->set_device(env.device);
  env.gpu_start = gpu_state_start(env.rt.get(), env.device);  // a few NVML calls (docs/json.md)
  spdlog::debug("{}: runtime {}, device {} of {}", spec.name, to_string(env.rt->platform()), env.device, n);
}

// The one place where a typed error becomes an exit code (docs/usage.md, "Exit codes"): one line naming it,
// and where a bound expired, wherever (the bootstrap included), the tool's report of what happened, without
// waiting for its peers.
int exit_code_of(const Error& e, ToolEnv& env, const ToolSpec& spec) {
  // Option values and paths in the message are the user's bytes: escaped, so that the error stays one line
  // and a value cannot drive the terminal (docs/reliability.md, "Echoed text").
  std::fprintf(stderr, "%s: error (%s): %s\n", spec.name.c_str(), rank_tag().c_str(),
               detail::printable(e.what()).c_str());
  if (e.code() == ExitCode::timeout && spec.bound_expired) {
    try {
      spec.bound_expired(env, e.what());
    } catch (const std::exception& e2) {
      std::fprintf(stderr, "%s: error (%s): the report after the expired bound: %s\n", spec.name.c_str(),
                   rank_tag().c_str(), e2.what());
    }
  }
  return static_cast<int>(e.code());
}

// The end of every run that got past parsing: the warnings left to give, stdout checked, the resources
// returned before MPI ends, and the last barrier.
int end_run(MpiSession& session, ToolEnv& env, const ToolSpec& spec, int world_rank, int code,
            double end_bound) {
  // A usage error is one line (docs/reliability.md): nothing ran, so no warning about the run follows it.
  if (code != static_cast<int>(ExitCode::usage)) {
    try {
      (void)build_stale(env);  // the warning, where no report asked yet
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: warning: the source tree check failed: %s\n", spec.name.c_str(), e.what());
    }
    detail::warn_unfired_faults(world_rank, world_size_noexcept());
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

}  // namespace

int tool_main(int argc, char** argv, const ToolSpec& spec) {
  guard_standard_streams();  // before MPI or anything else opens a file (files.hpp)
  std::optional<MpiSession> started;
  try {
    started.emplace(&argc, &argv);
  } catch (const Error& e) {  // MPI did not start: nothing to end, no rank to name but this process
    std::fprintf(stderr, "%s: error: %s\n", spec.name.c_str(), e.what());
    return static_cast<int>(e.code());
  }
  MpiSession& session = *started;
  const int world_rank = world_rank_noexcept();
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
    if (const auto early = parse_options(app, argc, argv, spec, env, world_rank))
      return session.finish_with(checked_stdout(spec.name, *early), end_bound);
    end_bound = std::min(env.common.timeout_s, 5.0);
    start_job(env, spec, world_rank);
    if (spec.needs_runtime) start_runtime(env, spec);
    code = spec.body(env);
  } catch (const Error& e) {
    code = exit_code_of(e, env, spec);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error (%s): %s\n", spec.name.c_str(), rank_tag().c_str(),
                 detail::printable(e.what()).c_str());
    code = static_cast<int>(ExitCode::runtime);
  }
  return end_run(session, env, spec, world_rank, code, end_bound);
}

}  // namespace mori::symm
