// SPDX-License-Identifier: MIT
// The JSON type of every report: keys keep the order in which they were written.
#pragma once

#include <nlohmann/json.hpp>

namespace mori::symm {

using Json = nlohmann::ordered_json;

}  // namespace mori::symm
