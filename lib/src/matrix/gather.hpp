// SPDX-License-Identifier: MIT
// The peer matrix's rows as they ride the allgather (matrix.hpp): every rank's measured rows to every rank.
// Private to lib/src/matrix/.
#pragma once

#include <cstddef>
#include <vector>

#include "mori/symm/matrix/matrix.hpp"

namespace mori::symm::detail {

// A value's reason where no other is known (a row's values before it is measured, a reason lost on the wire).
constexpr const char* kNotMeasured = "not measured";

// Collective: every rank's rows to every rank, in rank order: `slots` rows per rank (the most any rank
// measured), each with `variants` write variants (--write-kernel all), packed into fixed-size records.
std::vector<MatrixRow> gather_rows(Bootstrap& boot, const std::vector<MatrixRow>& mine, std::size_t variants);

}  // namespace mori::symm::detail
