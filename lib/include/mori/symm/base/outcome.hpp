// SPDX-License-Identifier: MIT
// Outcomes as types: what a step came to (the probe's steps, a teardown journal's steps) and what a teardown
// scenario came to. Their text exists only where JSON and journals are written and read: to_string writes it,
// the parse function reads a step's status back from a journal (lib/README.md, Reports and exit codes).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace mori::symm {

// A step worked, or an error stopped it: the API's error name (hipErrorInvalidValue, CUDA_ERROR_..., an errno
// name) or the tool's own (TIMEOUT, MISMATCH, DATA_MISMATCH). Error names are an open set, so the status is
// "worked" or one name, not an enumeration.
class StepStatus {
 public:
  StepStatus() = default;  // worked
  // An empty name, or the text "ok", becomes UNNAMED_ERROR, so that the text reads back as a failure.
  static StepStatus failed(std::string error);

  bool ok() const noexcept { return !failed_; }
  const std::string& error() const noexcept { return error_; }  // "" when ok()
  bool operator==(const StepStatus&) const = default;

 private:
  bool failed_ = false;
  std::string error_;
};

// "ok" or the error's name.
std::string to_string(const StepStatus& s);
// The inverse of to_string; nullopt for text no step status is written as (an empty field).
std::optional<StepStatus> parse_step_status(std::string_view text);

// A teardown scenario's outcome on one rank, and over all ranks (docs/mori-teardown-repro.md). pending: the
// scenario's teardown runs after the report (atexit); only --summarize can judge it.
enum class TeardownOutcome { ok, leak, api_error, crash, hang, damaged, journal_error, pending };

const char* to_string(TeardownOutcome o) noexcept;

}  // namespace mori::symm
