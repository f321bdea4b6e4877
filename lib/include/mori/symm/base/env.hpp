// SPDX-License-Identifier: MIT
// The environment variables the suite reads or sets, declared once (docs/environment.md): one table,
// scripts/mori_results/environment.json, built into the library and read by the scripts too. The library
// reads every variable through env_read, which refuses a name the table lacks; CTest house.env fails on a
// read that goes around it and on a variable the docs lack.
#pragma once

#include <string>
#include <vector>

namespace mori::symm {

struct EnvVar {
  std::string name;
  std::string type;           // level, text, path, flag, count, list, command
  std::string default_value;  // in words where it is not a value ("" where there is none)
  std::string doc;
  bool foreign = false;  // another program's variable (CUDA, MPI, a launcher, the system)
};

// Every declared variable, in the table's order.
const std::vector<EnvVar>& env_vars();

// The value of a declared variable, nullptr where it is unset. A name the table lacks is a programming error:
// std::logic_error naming it.
const char* env_read(const char* name);
// As env_read, and nullptr where the value is empty too.
const char* env_value(const char* name);

}  // namespace mori::symm
