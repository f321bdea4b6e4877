// SPDX-License-Identifier: MIT
// The journal folder of a job of mori-teardown-repro: claimed by one job, and the journals' write errors
// gathered (docs/mori-teardown-repro.md, "The journal").
#pragma once

#include <map>
#include <string>

#include "mori/symm/comm/bootstrap.hpp"
#include "mori/symm/teardown/journal.hpp"

namespace mori::symm {

// The folder --journal-dir names when it is not given: one new folder per job under it, so that a second run
// does not find the first one's journals (docs/mori-teardown-repro.md, "The journal").
inline constexpr const char* kDefaultJournalRoot = "teardown-journal";

// Collective. Returns the folder the job's journals go to: dir, or where dir is empty a new per-job folder
// kDefaultJournalRoot/job-<UTC time>-<pid of rank 0>. Throws UsageError where the folder already holds
// journals or a claim (on any rank), or where another job claimed it first or it cannot be created.
std::string claim_journal_dir(Bootstrap& boot, const std::string& dir);

// Collective: rank -> errno name of every rank whose journal could not be written.
std::map<int, std::string> gather_write_errors(Bootstrap& boot, const Journal& j);

}  // namespace mori::symm
