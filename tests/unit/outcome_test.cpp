// SPDX-License-Identifier: MIT
// Typed outcomes: a step status's text round trip, and the journal reader on step statuses it cannot read.
#include <gtest/gtest.h>

#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "mori/symm/base/outcome.hpp"
#include "mori/symm/teardown/journal.hpp"

using namespace mori::symm;

namespace {

// A folder holding one journal, rank-0.journal, with the given text; removed at the end of the test.
class JournalDir {
 public:
  explicit JournalDir(const std::string& text) {
    char tmpl[] = "/tmp/mori-outcome-XXXXXX";
    dir_ = mkdtemp(tmpl);
    std::ofstream(dir_ + "/rank-0.journal", std::ios::binary) << text;
  }
  ~JournalDir() { std::filesystem::remove_all(dir_); }
  const std::string& path() const { return dir_; }

 private:
  std::string dir_;
};

}  // namespace

TEST(StepStatus, TextRoundTrip) {
  EXPECT_EQ(to_string(StepStatus{}), "ok");
  EXPECT_EQ(to_string(StepStatus::failed("hipErrorInvalidValue")), "hipErrorInvalidValue");
  for (const std::string text : {"ok", "TIMEOUT", "CUDA_ERROR_NOT_PERMITTED", "ENOSPC"}) {
    const auto s = parse_step_status(text);
    ASSERT_TRUE(s) << text;
    EXPECT_EQ(to_string(*s), text);
    EXPECT_EQ(s->ok(), text == "ok");
  }
  EXPECT_FALSE(parse_step_status(""));
}

TEST(StepStatus, AFailureNeverReadsBackAsOk) {
  for (const std::string name : {"", "ok"}) {
    const auto s = StepStatus::failed(name);
    EXPECT_FALSE(s.ok());
    const auto back = parse_step_status(to_string(s));
    ASSERT_TRUE(back);
    EXPECT_FALSE(back->ok());
  }
}

TEST(TeardownOutcome, TextAsTheSchemaSpellsIt) {
  EXPECT_STREQ(to_string(TeardownOutcome::ok), "ok");
  EXPECT_STREQ(to_string(TeardownOutcome::api_error), "api_error");
  EXPECT_STREQ(to_string(TeardownOutcome::journal_error), "journal_error");
  EXPECT_STREQ(to_string(TeardownOutcome::pending), "pending");
}

TEST(JournalSummary, AStepErrorIsTheScenariosApiError) {
  JournalDir d("O\tordered\t1\nB\tordered\talloc\t-1\nE\tordered\talloc\t-1\tENOMEM\t3.5\nD\tordered\n");
  const auto scs = summarize_journals(d.path());
  ASSERT_EQ(scs.size(), 1u);
  EXPECT_EQ(scs[0].outcome, TeardownOutcome::api_error);
  EXPECT_EQ(scs[0].detail, "alloc -> ENOMEM on rank 0");
  const Json j = to_json(scs[0]);
  EXPECT_EQ(j["outcome"], "api_error");
  EXPECT_EQ(j["ranks"][0]["steps"][0]["status"], "ENOMEM");
}

TEST(JournalSummary, AnUnreadableStepStatusDamagesTheJournal) {
  JournalDir d("O\tordered\t1\nB\tordered\talloc\t-1\nE\tordered\talloc\t-1\t\t3.5\nD\tordered\n");
  const auto scs = summarize_journals(d.path());
  ASSERT_EQ(scs.size(), 1u);
  EXPECT_EQ(scs[0].outcome, TeardownOutcome::damaged);
  EXPECT_NE(scs[0].detail.find("rank-0.journal line 3: unknown step status ''"), std::string::npos)
      << scs[0].detail;
}
