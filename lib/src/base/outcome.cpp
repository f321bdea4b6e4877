#include "mori/symm/base/outcome.hpp"

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
  switch (o) {
    case TeardownOutcome::ok:
      return "ok";
    case TeardownOutcome::leak:
      return "leak";
    case TeardownOutcome::api_error:
      return "api_error";
    case TeardownOutcome::crash:
      return "crash";
    case TeardownOutcome::hang:
      return "hang";
    case TeardownOutcome::damaged:
      return "damaged";
    case TeardownOutcome::journal_error:
      return "journal_error";
    case TeardownOutcome::pending:
      return "pending";
  }
  return "?";
}

}  // namespace mori::symm
