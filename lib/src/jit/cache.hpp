// SPDX-License-Identifier: MIT
// The JIT's on-disk cache (lib/README.md, JIT cache; jit.hpp): where it lives, loading and publishing an
// entry, and the per-key lock. Private to lib/src/jit/.
#pragma once

#include <string>

#include "mori/symm/base/files.hpp"
#include "mori/symm/jit/jit.hpp"

namespace mori::symm::detail {

// Where the entries of one arch and platform live: <root>/<arch>_<platform>, or nowhere and why.
struct CacheFolder {
  std::string folder;  // "" where there is none
  std::string
      why_not;  // why there is none: no root, a root or arch folder refused, unwritable, not creatable
};
// The root is MORI_JIT_CACHE_DIR, else $HOME/.mori/jit, else $XDG_CACHE_HOME/mori/jit (jit.hpp); it and the
// arch's folder are checked (ours, writable by nobody else). create: a missing root and arch folder are made
// (a Jit); otherwise nothing is made, and a missing one passes where its nearest existing folder is writable
// (mori-probe --jit-precompile checks every arch before any folder is made). Where there is none, warns as a
// job would: "compiling in memory", with why.
CacheFolder cache_folder(const std::string& arch, const std::string& platform, bool create);

// Loads the entry folder `entry` into `out`; false where it is missing or unusable (an unusable one is moved
// aside under `root`, the arch's folder, and rebuilt by the caller).
bool load_entry(const std::string& root, const std::string& entry, const KernelSpec& spec,
                CompiledKernels& out);

// Publishes a compiled entry: writes a private folder under `root`, then renames it into place in one step. A
// failure is a warning: the kernels are compiled either way.
void publish_entry(const std::string& root, const std::string& entry, const CompiledKernels& out,
                   const std::string& file);

// Why an entry's lock file could not be opened, in words: what is at `lock` where it is not a lock file (a
// folder, a symlink and its target, a FIFO, ...), else that the cache folder `root` went away, else `error`.
std::string lock_trouble(const std::string& root, const std::string& lock, const std::string& error);

// The per-key lock: one process compiles, the others wait (bounded by set_jit_wait_bound, the tools'
// --timeout-s: TimeoutError naming the pid that holds it) and then load. Opening the lock file throws
// FileError where the cache folder went away or the lock is no regular file (lock_trouble says which).
class EntryLock {
 public:
  EntryLock(const std::string& path, const std::string& file);
  ~EntryLock();
  EntryLock(const EntryLock&) = delete;
  EntryLock& operator=(const EntryLock&) = delete;

 private:
  void wait(const std::string& path, const std::string& file);

  LockFile file_;
};

}  // namespace mori::symm::detail
