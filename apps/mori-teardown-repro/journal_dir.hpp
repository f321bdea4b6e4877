// mori-teardown-repro's journal folder: claimed by one job, and the journals' write errors gathered.
#pragma once

#include <map>
#include <string>

#include "mori/symm/bootstrap.hpp"
#include "mori/symm/journal.hpp"

namespace mori::symm::teardown {

// Collective. Throws UsageError where the folder already holds journals or a claim (on any rank), or where
// another job claimed it first or it cannot be created.
void claim_journal_dir(Bootstrap& boot, const std::string& dir);

// Collective: rank -> errno name of every rank whose journal could not be written.
std::map<int, std::string> gather_write_errors(Bootstrap& boot, const Journal& j);

}  // namespace mori::symm::teardown
