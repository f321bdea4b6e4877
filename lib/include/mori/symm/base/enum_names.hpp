// SPDX-License-Identifier: MIT
// An enumeration's names in one table (lib/README.md, "One header per concept"): the enum-to-string
// functions and the parsers of option values read the same {value, name} pairs, so that a name is written
// once.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace mori::symm {

template <class E>
struct EnumName {
  E value;
  const char* name;
};

// The name of `value` in `table`, else `fallback` (a value the table lacks, e.g. one cast from a bad
// integer).
template <class E, std::size_t N>
constexpr const char* enum_name(const EnumName<E> (&table)[N], E value, const char* fallback = "?") noexcept {
  for (const auto& e : table)
    if (e.value == value) return e.name;
  return fallback;
}

// The value named `name` in `table`, else nullopt.
template <class E, std::size_t N>
constexpr std::optional<E> enum_value(const EnumName<E> (&table)[N], std::string_view name) noexcept {
  for (const auto& e : table)
    if (name == e.name) return e.value;
  return std::nullopt;
}

// Every name of `table` in its order, comma separated ("auto, plain, stream"): the accepted values of a
// message.
template <class E, std::size_t N>
std::string enum_names(const EnumName<E> (&table)[N]) {
  std::string s;
  for (const auto& e : table) s += (s.empty() ? "" : ", ") + std::string(e.name);
  return s;
}

}  // namespace mori::symm
