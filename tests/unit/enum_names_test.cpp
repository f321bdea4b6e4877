// SPDX-License-Identifier: MIT
// One enumeration's names in one table (lib/include/mori/symm/base/enum_names.hpp): the name of a value, the
// value of a name, the list of names, and the enum-to-string functions and parsers that read such tables.
#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "mori/symm/a2a/types.hpp"
#include "mori/symm/a2a/plan.hpp"
#include "mori/symm/base/enum_names.hpp"
#include "mori/symm/base/outcome.hpp"
#include "mori/symm/comm/setup_cost.hpp"
#include "mori/symm/health/health.hpp"
#include "mori/symm/matrix/matrix.hpp"

using namespace mori::symm;

namespace {

enum class Colour { red, green, blue };
constexpr EnumName<Colour> kColours[] = {{Colour::red, "red"}, {Colour::green, "green"}};

// Usable at compile time.
static_assert(std::string_view(enum_name(kColours, Colour::green)) == "green");
static_assert(enum_value(kColours, "red") == Colour::red);
static_assert(!enum_value(kColours, "blue").has_value());

TEST(EnumNames, NameValueAndList) {
  EXPECT_STREQ(enum_name(kColours, Colour::red), "red");
  EXPECT_STREQ(enum_name(kColours, Colour::blue), "?");  // not in the table: the fallback
  EXPECT_STREQ(enum_name(kColours, Colour::blue, "red"), "red");
  EXPECT_EQ(enum_value(kColours, "green"), Colour::green);
  EXPECT_FALSE(enum_value(kColours, "Green").has_value());  // names are exact
  EXPECT_FALSE(enum_value(kColours, "").has_value());
  EXPECT_EQ(enum_names(kColours), "red, green");
}

// The functions that read a table keep their names, and a value outside the enumeration its fallback: "?"
// where no name is right (a protocol that did not run must not be named), the kind of a placement otherwise.
TEST(EnumNames, ToStringOfTheTables) {
  EXPECT_STREQ(to_string(TeardownOutcome::journal_error), "journal_error");
  EXPECT_STREQ(to_string(static_cast<TeardownOutcome>(99)), "?");
  EXPECT_STREQ(setup_name(Setup::handle_export), "handle_export");
  EXPECT_STREQ(setup_name(Setup::count_), "?");
  EXPECT_STREQ(to_string(Protocol::ll), "ll");
  EXPECT_STREQ(to_string(static_cast<Protocol>(99)), "?");  // never a protocol that did not run
  EXPECT_STREQ(to_string(PlacementClass::one_gpu), "one_gpu");
  EXPECT_STREQ(to_string(static_cast<PlacementClass>(99)), "several_ranks_per_gpu");
  EXPECT_STREQ(to_string(Verdict::no_reference), "no_reference");
  EXPECT_STREQ(to_string(NodeLayout::shared_device), "ranks sharing one GPU");
  EXPECT_STREQ(to_string(WriteKernel::bulk_tma), "bulk-tma");
  for (auto k : {WriteKernel::auto_select, WriteKernel::plain, WriteKernel::stream, WriteKernel::bulk,
                 WriteKernel::bulk_tma, WriteKernel::all})
    EXPECT_EQ(parse_write_kernel(to_string(k)), k);
}

}  // namespace
