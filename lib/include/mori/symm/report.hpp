// JSON reports: the common `meta` block (lib/README.md, Reports and exit codes) and writing a document
// atomically.
#pragma once

#include <string>

#include "mori/symm/json.hpp"

namespace mori::symm {

// "-" = stdout. A symlink is followed. A new name or a regular file: written to a temporary file in the
// same folder and renamed over it. Any other existing file (/dev/null, a FIFO with a reader, a terminal):
// written in place, never replaced. Bytes that are not UTF-8 are written as U+FFFD.
void write_json(const std::string& path, const Json& doc);

// The file write_json writes: an existing regular file's real path, a dangling symlink's target, else `path`.
std::string resolve_output_path(const std::string& path);

// Whether an MPS control daemon is reachable for this process (CUDA_MPS_PIPE_DIRECTORY or the default).
bool mps_active();

// ISO-8601 UTC time of now.
std::string utc_now();

}  // namespace mori::symm
