// SPDX-License-Identifier: MIT
// Files the tools read and write (docs/reliability.md, "Files the tools read and write"): one bounded reader
// for every file a tool reads, one checked writer for every report, and the check of stdout at exit. No other
// file I/O belongs in lib/ or apps/: tests/scripts/file_io_audit_test.py fails when any appears outside its
// short allow-list.
//
// The reader opens with O_NONBLOCK (a FIFO never blocks the open), reads regular files only (a FIFO, a
// device, a folder or a socket, also behind a symlink, is refused naming the file and what it is), at most a
// cap per kind of file, and gives up at a deadline (the job's --timeout-s). The writer writes only to a
// regular file or a new name (a FIFO, a device, a symlink loop, a dangling symlink or another user's symlink
// in a sticky folder is refused up front, exit 2), replaces a regular file atomically (keeping its permission
// bits) and checks every byte it writes, stdout included.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "mori/symm/base/error.hpp"

namespace mori::symm {

// What a file is read as: the words errors use for it, and the most bytes it may hold.
struct FileKind {
  const char* what;
  std::uint64_t max_bytes;
};
inline constexpr FileKind kKernelSource{"kernel source", 4ull << 20};     // kernels/*.hip and their includes
inline constexpr FileKind kJitCacheFile{"JIT cache file", 256ull << 20};  // an entry's image, names, manifest
inline constexpr FileKind kTeardownJournal{"teardown journal",
                                           64ull << 20};                   // mori-teardown-repro --summarize
inline constexpr FileKind kSystemFile{"system file", 1ull << 20};          // /proc and /sys
inline constexpr FileKind kExpectations{"expectations file", 1ull << 20};  // mori-probe --health --expect
inline constexpr FileKind kCompilerLibrary{"compiler library", 1ull << 30};  // nvrtc/hiprtc/comgr, hashed

// A file that could not be read or written, naming the file, what it is and why. Exit 2 where the file is not
// what it must be (not a regular file, too large): the user's input is wrong. Exit 3 where a call failed.
class FileError : public Error {
 public:
  enum class Reason { not_regular, too_large, call_failed };
  FileError(Reason reason, const std::string& path, std::string call, const char* file, int line, int err,
            const std::string& detail);
  Reason reason() const noexcept { return reason_; }
  const std::string& path() const noexcept { return path_; }
  int errno_value() const noexcept { return errno_; }  // 0 where no call failed

 private:
  Reason reason_;
  std::string path_;
  int errno_;
};

// The whole of a regular file, at most kind.max_bytes, within the file bound (set_file_bound). Throws
// FileError (missing, unreadable, not a regular file, too large) or TimeoutError (the bound ran out between
// two reads).
std::string read_file(const std::string& path, const FileKind& kind);
// Like read_file, but an absent file (ENOENT) gives false instead of an error.
bool read_file_if_present(const std::string& path, const FileKind& kind, std::string& out);

// Bound on reading one file, in seconds (default 60; the tools pass --timeout-s).
void set_file_bound(double seconds) noexcept;

// Writes a report: "-" = stdout (flushed, every byte checked). A symlink to a regular file is followed, by
// hand and checked: another user's symlink in a sticky world-writable folder (the kernel's protected_symlinks
// rule) and a dangling symlink (no file is created through a link) are refused, FileError not_regular. A new
// name or a file: written to a temporary file in the same folder and renamed over it (the target checked once
// more just before); a replaced file's permission bits are kept (a new file gets 0644 less the umask), its
// owner and other hard links are not (the name points to the new file, another link keeps the old content).
// Any other existing file (/dev/null, a FIFO, a terminal, a socket) and a symlink loop are refused, never
// written in place or replaced: FileError not_regular (exit 2). Throws FileError.
void write_output(const std::string& path, const std::string& text);

// The file write_output writes: an existing regular file's real path, a new name reached through a folder's
// symlink, else `path` (a folder is returned as it is, for the caller to name). Called before any work (the
// tools' --json check), it throws FileError not_regular (exit 2) where write_output would refuse the target
// (not a regular file, a symlink loop, a dangling or untrusted symlink) or where its folder takes no new file
// although it says it is writable (/proc as root): found by creating the temporary file the writer would, and
// removing it at once.
std::string resolve_output_path(const std::string& path);
// Why `path` cannot take a report (a FIFO, a device, a socket, a symlink loop, a dangling or untrusted
// symlink: the sentence resolve_output_path would throw), or "" where it can be tried. Never throws.
std::string output_path_refusal(const std::string& path);

// Creates `path`, which must not exist (O_EXCL), holding `data` with permission bits `mode` (less the umask),
// synced to disk when `sync`. Throws FileError; errno_value() is EEXIST where the name was taken.
void write_new_file(const std::string& path, const std::string& data, mode_t mode, bool sync);

// An advisory lock file (created 0600 when missing), open for flock; closed in the destructor. Throws
// FileError.
class LockFile {
 public:
  explicit LockFile(const std::string& path);
  ~LockFile();
  LockFile(const LockFile&) = delete;
  LockFile& operator=(const LockFile&) = delete;
  int fd() const noexcept { return fd_; }

 private:
  int fd_ = -1;
};

// Called first in a tool's main, before anything opens a file: a closed stdin, stdout or stderr (`>&-`) is
// reopened so that no later file takes its number (stdout onto a pipe without a reader, so that what is
// written there fails and is reported), and SIGPIPE is ignored, so that a closed pipe is an EPIPE error, not
// a silent death. Never throws.
void guard_standard_streams() noexcept;

// Called last in a tool's main: flushes stdout and checks that nothing written to it was lost (a full disk, a
// closed pipe, a closed stdout). Empty when all is well, else the one-line error.
std::string finish_stdout() noexcept;

}  // namespace mori::symm
