// SPDX-License-Identifier: MIT
// The all-to-all's result row, declared once (docs/mori-a2a.md "The row's fields"). Every field of a row is
// one entry of one table: its name, kind (a JSON Schema fragment), unit, role, direction and doc. From the
// table come the row's JSON (to_json; the CSV's columns are the JSON's), the printed table (a2a_table_header
// and a2a_table_line), the row part of results/schema/a2a.schema.json and the field list of docs/mori-a2a.md
// (a2a_row_schema; scripts/a2a-row writes both, CTest results.a2a_row fails where the committed files
// differ), and scripts/mori_results reads the roles and directions back from the schema. A new field is one
// entry of the table in lib/src/a2a/row.cpp and a member of A2aResult.
#pragma once

#include <string>
#include <vector>

#include "mori/symm/a2a/types.hpp"
#include "mori/symm/base/json.hpp"

namespace mori::symm {

// What a field is to a reader of the row.
//   identity:  changes what ran; perf-check pools rows of one identity only (docs/perf-check.md "Row
//   identity") metric:    what the row measured reference: measured in the same run to read a metric against
//   (push alone, sync alone, the ceilings) detail:    recorded so that the row can be read: counts,
//   verification, where the plan's choice came from
enum class RowRole { identity, metric, reference, detail };
// Which way is better where perf-check gates the field; none where it does not.
enum class Better { none, lower, higher };
const char* to_string(RowRole r) noexcept;
const char* to_string(Better b) noexcept;

// One column of the printed table, made from one field.
struct A2aColumn {
  int position = 0;              // the column's place on the line, left to right
  const char* header = nullptr;  // nullptr: the field has no column
  int width = 0;                 // right-aligned to this many characters
  // The cell's text; nullptr: the field's JSON value (null "-", numbers with `precision` decimals).
  std::string (*cell)(const A2aResult&) = nullptr;
  int precision = 0;
};

struct A2aRowField {
  const char* name;  // the JSON key
  const char* kind;  // the value's JSON Schema (draft-07) fragment, as JSON text
  const char* unit;  // "us", "GB/s", "bytes", "ratio", or "" for none
  RowRole role;
  Better better;
  bool required;  // every mori.a2a/2 row of mori-a2a holds it (fields added later are optional for old files)
  const char* doc;
  Json (*value)(const A2aResult&);
  A2aColumn column = {};
};

// Every field, in the order of the row's JSON.
const std::vector<A2aRowField>& a2a_row_fields();

// The row's JSON: every field of a2a_row_fields, in its order.
Json to_json(const A2aResult& r);
// The row part of results/schema/a2a.schema.json (mori-a2a's rows of mori.a2a/2): type, required and
// properties, each property its kind with "description" and the x-unit, x-role and x-better the scripts read.
Json a2a_row_schema();

// total_bw_gbps over the same run's ceiling; 0 where no ceiling was measured.
double a2a_ceiling_ratio(const A2aResult& r);
// The row's mode as the tools print it: "lsa device/direct graph 16", "ptr host".
std::string a2a_mode(const A2aResult& r);

// The printed table: its header line and one line per row, each ending in '\n'. The notes column
// (L2-resident, device-scope, ...) follows the fields' columns; time_sliced marks ranks that share a GPU
// without MPS.
std::string a2a_table_header();
std::string a2a_table_line(const A2aResult& r, bool time_sliced);

}  // namespace mori::symm
