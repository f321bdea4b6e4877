// SPDX-License-Identifier: MIT
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

// CSV (RFC 4180: a header line, then one line per row, fields quoted where they hold a comma, a quote or a
// line break) of an array of JSON objects (docs/json.md "CSV"): a nested object's fields are columns of their
// own, named by the path ("time_us.p50"); an array is one field holding its JSON; null is an empty field; a
// number and a boolean are written as JSON writes them; a string as it is (bytes that are not UTF-8 as
// U+FFFD). The columns: every field of every row, in the order of first appearance.
// scripts/mori_results/csv_rows.py writes the same from the same JSON (CTest a2a.csv compares them).
std::string csv_of_rows(const Json& rows);

// Whether an MPS control daemon is reachable for this process (CUDA_MPS_PIPE_DIRECTORY or the default).
bool mps_active();

// ISO-8601 UTC time of now.
std::string utc_now();

}  // namespace mori::symm
