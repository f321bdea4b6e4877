// SPDX-License-Identifier: MIT
#include "mori/symm/base/outcome.hpp"

#include "mori/symm/base/enum_names.hpp"

namespace mori::symm {
namespace {
constexpr std::string_view kOk = "ok";
}  // namespace

StepStatus StepStatus::failed(std::string error) {
  StepStatus s;
  s.failed_ = true;
  s.error_ = error.empty() || error == kOk ? "UNNAMED_ERROR" : std::move(error);
  return s;
}

std::string to_string(const StepStatus& s) {
  return s.ok() ? std::string(kOk) : s.error();
}

std::optional<StepStatus> parse_step_status(std::string_view text) {
  if (text == kOk) return StepStatus{};
  if (text.empty()) return std::nullopt;
  return StepStatus::failed(std::string(text));
}

const char* to_string(TeardownOutcome o) noexcept {
  static constexpr EnumName<TeardownOutcome> kNames[] = {{TeardownOutcome::ok, "ok"},
                                                         {TeardownOutcome::leak, "leak"},
                                                         {TeardownOutcome::api_error, "api_error"},
                                                         {TeardownOutcome::crash, "crash"},
                                                         {TeardownOutcome::hang, "hang"},
                                                         {TeardownOutcome::damaged, "damaged"},
                                                         {TeardownOutcome::journal_error, "journal_error"},
                                                         {TeardownOutcome::pending, "pending"}};
  return enum_name(kNames, o);
}

}  // namespace mori::symm
