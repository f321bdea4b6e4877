// SPDX-License-Identifier: MIT
// What every tool shares: the common options (lib/README.md, Layers), the MPI session, runtime selection, and
// the one place where typed errors become exit codes. Apps stay thin: declare options, validate, call the
// library.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "mori/symm/base/json.hpp"
#include "mori/symm/base/version.hpp"
#include "mori/symm/comm/bootstrap.hpp"
#include "mori/symm/platform/gpu_state.hpp"
#include "mori/symm/platform/runtime.hpp"

namespace mori::symm {

struct CommonOptions {
  std::string json;  // "" = none, "-" = stdout
  std::string backend = "auto";
  std::optional<int> device;  // unset: the node-local rank modulo the device count
  double timeout_s = 60;
  std::string log_level;
  std::string node_id;  // simulated node (env MORI_NODE_ID)
};

struct ToolEnv {
  std::string tool;
  std::vector<std::string> argv;
  CommonOptions common;
  std::unique_ptr<Bootstrap> boot;
  std::unique_ptr<Runtime> rt;
  std::string runtime_notice;   // why the host runtime was chosen under --backend auto
  std::string gpu_unavailable;  // why no GPU runtime, when the host runtime is used
  int device = 0;
  GpuReading gpu_start;             // this rank's GPU counters when the runtime was set up (meta.gpu_state)
  BuildRevision revision;           // the app's own build (meta.git_revision, git_clean)
  std::optional<bool> build_stale;  // rank 0: the source tree moved on since the build; empty = unknown
  std::shared_future<TreeCheck>
      tree_check;  // rank 0: git's answer (deferred), until build_stale(env) takes it
  bool is_root() const { return !boot || boot->rank() == 0; }
};

struct ToolSpec {
  std::string name;
  std::string description;
  std::function<void(CLI::App&)> declare;  // tool options
  std::function<void()> validate;     // after parsing, before MPI traffic or allocation; throws UsageError
  std::function<int(ToolEnv&)> body;  // returns the exit code
  bool needs_runtime = true;
  // Called on a rank whose run ended because a wait ran past --timeout-s (exit 4), anywhere after parsing; it
  // must not wait for other ranks. Optional.
  std::function<void(ToolEnv&, const std::string& what)> bound_expired;
  // The windows a rank holds at once in this run (after validate): the descriptor preflight's count
  // (fds_needed, base/fds.hpp). Unset: one.
  std::function<int()> windows_held;
};

// Parses, validates, boots MPI and the runtime, runs the body, maps errors to exit codes. Never throws.
int tool_main(int argc, char** argv, const ToolSpec& spec);

// Rank 0: whether the source tree the tool was built from moved on since (meta.build_stale), asking git on
// the first call (bounded); warns on stderr the first time it says true. Empty where unknown, and on other
// ranks.
std::optional<bool> build_stale(ToolEnv& env);

// Collective over env.boot: gathers every rank's host, pid, device, device name and arch.
// handle_type may be empty where the tool used none. collective = false: this rank's alone (ranks[] holds it
// only; world is still the job's), for a report written after a bound expired, when peers may not answer.
Json make_meta(ToolEnv& env, const std::string& handle_type, bool collective = true);

// For a report whose meta was made before its measurement (mori-probe --matrix, --health): meta.gpu_state
// and meta.setup read again now, and meta.jit from the kernels this process loaded where it has none.
// Collective like make_meta.
void refresh_meta(ToolEnv& env, Json& meta);

// Throws UsageError if `path` cannot be written (its folder is missing or not writable). "-" and "" pass.
void check_output_path(const std::string& option, const std::string& path);

// Whether text is a plain decimal number, as a float option takes it (docs/usage.md, "Common options"): an
// optional
// '-', digits with an optional '.', an optional exponent (e or E, an optional sign, digits); no blank, no
// '+', no hex, no inf or nan. tool_main holds every FLOAT option of every tool to it; an option that reads
// its number from a string checks it with check_plain_decimal.
bool is_plain_decimal(const std::string& text);
// Throws UsageError "OPTION: 'TEXT' is not a plain decimal number (...)" where is_plain_decimal is false.
void check_plain_decimal(const std::string& option, const std::string& text);

}  // namespace mori::symm
