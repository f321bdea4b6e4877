// JSON reports: the common `meta` block (DESIGN.md §6) and writing a document atomically.
#pragma once

#include <string>

#include "mori/symm/json.hpp"
#include "mori/symm/tool.hpp"

namespace mori::symm {

// Collective over env.boot: gathers every rank's host, pid, device, device name and arch.
// handle_type may be empty where the tool used none.
Json make_meta(ToolEnv& env, const std::string& handle_type);

// "-" = stdout; otherwise written to a temporary file beside `path` and renamed over it.
void write_json(const std::string& path, const Json& doc);

// Whether an MPS control daemon is reachable for this process (CUDA_MPS_PIPE_DIRECTORY or the default).
bool mps_active();

// ISO-8601 UTC time of now.
std::string utc_now();

}  // namespace mori::symm
