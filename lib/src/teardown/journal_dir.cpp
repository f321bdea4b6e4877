// SPDX-License-Identifier: MIT
// The journal folder of a job of mori-teardown-repro: claimed by one job, and the journals' write errors
// gathered (docs/mori-teardown-repro.md, "The journal").
#include "mori/symm/teardown/journal_dir.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <string>
#include <vector>

#include "mori/symm/base/error.hpp"
#include "mori/symm/base/files.hpp"

namespace mori::symm {

namespace {
constexpr const char* kClaimFile = "job.claim";

// Rank 0 names the per-job folder under the default root; every rank gets the same name.
std::string per_job_dir(Bootstrap& boot) {
  char name[128] = {};
  if (boot.rank() == 0) {
    const std::time_t now = std::time(nullptr);
    std::tm utc{};
    char stamp[32] = "unknown-time";
    if (gmtime_r(&now, &utc)) std::strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &utc);
    std::snprintf(name, sizeof(name), "%s/job-%s-%ld", kDefaultJournalRoot, stamp,
                  static_cast<long>(getpid()));
  }
  boot.broadcast("teardown.journal-name", name, sizeof(name), 0);
  name[sizeof(name) - 1] = '\0';
  return name;
}
// The folders create_directories(dir) would make (those missing), innermost first.
std::vector<std::string> new_folders(const std::string& dir) {
  namespace fs = std::filesystem;
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::path p = fs::path(dir).lexically_normal(); !p.empty() && p != p.root_path(); p = p.parent_path()) {
    if (p.filename().empty()) continue;  // "a/b/" normalized ends in a separator
    if (fs::symlink_status(p, ec).type() != fs::file_type::not_found) break;
    out.push_back(p.string());
  }
  return out;
}

bool system_errno(int err) {
  return err == ENOSPC || err == EDQUOT || err == EMFILE || err == ENFILE || err == ENOMEM || err == EIO;
}
}  // namespace

// A fresh journal folder: journals of an earlier run would mix with this one. Every rank looks (the folder
// may be node-local), then rank 0 claims it with an exclusive create, so that of two jobs started together
// on one folder exactly one runs and the other exits 2.
std::string claim_journal_dir(Bootstrap& boot, const std::string& asked) {
  namespace fs = std::filesystem;
  const std::string dir = asked.empty() ? per_job_dir(boot) : asked;
  std::error_code ec;
  bool used = false;
  if (fs::is_directory(dir, ec))
    for (const auto& e : fs::directory_iterator(dir, ec))
      if (e.path().extension() == ".journal" || e.path().filename() == kClaimFile) used = true;
  auto used_all = boot.allgather_value("teardown.journal-check", static_cast<int>(used));
  if (std::find(used_all.begin(), used_all.end(), 1) != used_all.end())
    throw UsageError("--journal-dir: '" + dir +
                     "' already holds journals (or another job's claim); choose a new folder");
  int claim[2] = {0, 0};  // {0 ok | 1 claimed by another job | 2 cannot create, errno}
  if (boot.rank() == 0) {
    const std::vector<std::string> made = new_folders(dir);
    fs::create_directories(dir, ec);
    const std::string who =
        "pid " + std::to_string(getpid()) + " world " + std::to_string(boot.world()) + "\n";
    if (ec) {
      claim[0] = 2;
      claim[1] = ec.value();
    } else {
      try {
        write_new_file(dir + "/" + kClaimFile, who, 0644, false);
      } catch (const FileError& e) {
        claim[0] = e.errno_value() == EEXIST ? 1 : 2;
        claim[1] = e.errno_value();
      }
    }
    // A folder that could not be claimed is left as it was: the folders made for it go (innermost first).
    if (claim[0] == 2)
      for (const auto& f : made) fs::remove(f, ec);
  }
  boot.broadcast("teardown.journal-claim", claim, sizeof(claim), 0);
  if (claim[0] == 1)
    throw UsageError("--journal-dir: '" + dir +
                     "' was claimed by another job started at the same time; choose a new folder");
  // The machine (a full file system, a quota, no descriptor left) is a system error, exit 3; the path the
  // user chose (not writable, read-only, not a folder) is a usage error, exit 2.
  if (claim[0] == 2 && system_errno(claim[1]))
    throw ApiError("create(" + dir + "/" + kClaimFile + ")", __FILE__, __LINE__, errno_name(claim[1]),
                   "--journal-dir: cannot claim '" + dir + "' on rank 0; nothing made for it is left");
  if (claim[0] == 2) throw UsageError("--journal-dir: cannot claim '" + dir + "': " + errno_name(claim[1]));
  boot.barrier("teardown.journal-checked");
  return dir;
}

// A journal that could not be written (a full file system) is reported, and so is every verdict it affects:
// rank -> errno name, gathered from every rank.
std::map<int, std::string> gather_write_errors(Bootstrap& boot, const Journal& j) {
  struct WriteError {
    char name[32];
  } mine{};
  std::strncpy(mine.name, j.write_error().c_str(), sizeof(mine.name) - 1);
  const auto errs = boot.allgather_value("teardown.journal-errors", mine);
  std::map<int, std::string> write_errors;
  for (std::size_t r = 0; r < errs.size(); ++r)
    if (errs[r].name[0]) write_errors[static_cast<int>(r)] = std::string(errs[r].name);
  return write_errors;
}

}  // namespace mori::symm
