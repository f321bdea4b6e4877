// SPDX-License-Identifier: MIT
// Shared by the unit tests: the message of the UsageError a callable throws.
#pragma once

#include <string>

#include "mori/symm/base/error.hpp"

namespace mori::symm::test_util {

// The message of the UsageError that f throws; "" when it throws none.
template <class F>
std::string usage_error(F f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

}  // namespace mori::symm::test_util
