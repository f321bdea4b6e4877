// JSON reports: the common `meta` block (lib/README.md, Reports and exit codes) and writing a document
// atomically.
#pragma once

#include <string>

#include "mori/symm/base/files.hpp"
#include "mori/symm/base/json.hpp"

namespace mori::symm {

// Through the one checked writer, write_output (files.hpp): "-" = stdout; a regular file is replaced
// atomically, keeping its permission bits; any other existing file is written in place. Bytes that are not
// UTF-8 are written as U+FFFD. Throws FileError.
void write_json(const std::string& path, const Json& doc);

// Whether an MPS control daemon is reachable for this process (CUDA_MPS_PIPE_DIRECTORY or the default).
bool mps_active();

// ISO-8601 UTC time of now.
std::string utc_now();

}  // namespace mori::symm
