// SPDX-License-Identifier: MIT
// Version of the suite and the revision of the code it was built from (docs/reliability.md, "Revisions").
#pragma once

#include <optional>
#include <string>

namespace mori::symm {

// What the build recorded about its tree, at build time (cmake/revision.cmake).
struct BuildRevision {
  std::string commit;       // the full commit hash, never with a suffix; "unknown" where none was known
  int clean = -1;           // 1: the tracked files were unchanged; 0: they were not; -1: unknown
  std::string tree_digest;  // git's hash of `git diff HEAD` at build time (tells two dirty builds apart); ""
  std::string source_dir;   // the tree it was built from; "" where the revision was given (-DMORI_GIT_REV)

  // The identity ranks compare: the commit and, for a dirty tree, its changes.
  std::string identity() const { return clean == 1 ? commit : commit + "+" + tree_digest; }
};

const char* version() noexcept;
// The commit the library was built from (BuildRevision::commit of library_revision()).
const char* git_revision() noexcept;
BuildRevision library_revision();

// Whether the tree a build came from has moved on since: its HEAD or its tracked changes differ from what
// the build recorded. stale is empty where the tree cannot be read (no source folder recorded, git missing,
// not a repository, or git did not answer within bound_s); `why` says what differs or why it is unknown.
struct TreeCheck {
  std::optional<bool> stale;
  std::string why;
};
TreeCheck check_build_tree(const BuildRevision& built, double bound_s);

}  // namespace mori::symm
