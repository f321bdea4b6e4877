// SPDX-License-Identifier: MIT
// The all-to-all row's fields as the library declares them (a2a/row.hpp a2a_row_schema), as JSON on stdout:
// what scripts/a2a-row writes into results/schema/a2a.schema.json and docs/mori-a2a.md, and what CTest
// results.a2a_row holds the committed files to.
#include <cstdio>

#include "mori/symm/a2a/row.hpp"

int main(int argc, char**) {
  if (argc != 1) {
    std::fprintf(stderr, "a2a-row-schema: takes no arguments\n");
    return 2;
  }
  std::printf("%s\n", mori::symm::a2a_row_schema().dump(2).c_str());
  return 0;
}
