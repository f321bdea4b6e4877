// SPDX-License-Identifier: MIT
// The one reader and the one writer of the tools' files (files.hpp; docs/reliability.md, "Files the tools
// read and write").
#include "mori/symm/base/files.hpp"

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

#include "mori/symm/base/detail/poll.hpp"

namespace mori::symm {
namespace {

std::atomic<double> g_file_bound_s{60};
std::atomic<bool> g_stdout_closed{false};
std::atomic<bool> g_stdout_failed{false};  // write_stdout already threw: its error is the one to show

constexpr std::size_t kReadChunk = 1 << 20;

std::string format_file_error(const std::string& call, const char* file, int line,
                              const std::string& api_error, const std::string& detail) {
  const char* base = std::strrchr(file, '/');
  std::string s = call + " failed: " + api_error + " at " + (base ? base + 1 : file) + ":" +
                  std::to_string(line) + " on " + rank_tag();
  if (!detail.empty()) s += " (" + detail + ")";
  return s;
}

ExitCode code_of(FileError::Reason r) {
  return r == FileError::Reason::call_failed ? ExitCode::runtime : ExitCode::usage;
}

const char* api_name(FileError::Reason r, int err) {
  switch (r) {
    case FileError::Reason::not_regular:
      return "NOT_A_REGULAR_FILE";
    case FileError::Reason::too_large:
      return "EFBIG";
    case FileError::Reason::call_failed:
      break;
  }
  return errno_name(err);
}

#define MORI_FILE_FAIL(reason, path, call, err, detail) \
  throw FileError(FileError::Reason::reason, path, call, __FILE__, __LINE__, err, detail)

// An fd closed on every path.
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd >= 0) close(fd);
  }
};

// "a FIFO", "a folder", ...: what a file that is not a regular file is.
const char* type_name(mode_t m) {
  if (S_ISDIR(m)) return "a folder";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  if (S_ISLNK(m)) return "a symlink";
  return "not a regular file";
}

// " (a symlink to /dev/zero)" where path is a symlink, else "".
std::string via_symlink(const std::string& path) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return {};
  char* real = realpath(path.c_str(), nullptr);
  if (!real) return ", through a symlink";
  std::string r = std::string(", a symlink to ") + real;
  std::free(real);
  return r;
}

std::string mib(std::uint64_t bytes) {
  return bytes % (1u << 20) == 0 ? std::to_string(bytes >> 20) + " MiB" : std::to_string(bytes) + " bytes";
}

bool read_impl(const std::string& path, const FileKind& kind, std::string& out, bool absent_ok) {
  const double bound = g_file_bound_s.load();
  const auto deadline = detail::deadline_after(bound);
  const std::string what = std::string("the ") + kind.what + " '" + path + "'";
  // O_NONBLOCK: opening a FIFO returns at once instead of waiting for a writer; the fstat below refuses it.
  Fd f{open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)};
  if (f.fd < 0) {
    const int err = errno;
    if (absent_ok && err == ENOENT) return false;
    struct stat st {};
    // A socket cannot be opened (ENXIO): say what it is.
    if (stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
      MORI_FILE_FAIL(
          not_regular, path, "open(" + path + ")", 0,
          what + " is " + type_name(st.st_mode) + via_symlink(path) + "; only regular files are read");
    MORI_FILE_FAIL(call_failed, path, "open(" + path + ")", err, what);
  }
  struct stat st {};
  if (fstat(f.fd, &st) != 0) MORI_FILE_FAIL(call_failed, path, "fstat(" + path + ")", errno, what);
  if (!S_ISREG(st.st_mode))
    MORI_FILE_FAIL(
        not_regular, path, "open(" + path + ")", 0,
        what + " is " + type_name(st.st_mode) + via_symlink(path) + "; only regular files are read");
  const std::uint64_t cap = kind.max_bytes;
  if (static_cast<std::uint64_t>(st.st_size) > cap)
    MORI_FILE_FAIL(too_large, path, "read(" + path + ")", 0,
                   what + " holds " + std::to_string(st.st_size) + " bytes, more than the " + mib(cap) +
                       " a " + kind.what + " may hold");
  // A file that grows while it is read (or a /proc file, whose size says 0) is still held to the cap: one
  // byte more than the cap is asked for, and getting it is an error.
  std::string data;
  data.reserve(static_cast<std::size_t>(st.st_size));
  std::vector<char> buf(kReadChunk);
  for (;;) {
    const std::uint64_t room = cap + 1 - data.size();
    const std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(room, buf.size()));
    const ssize_t n = read(f.fd, buf.data(), want);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) MORI_FILE_FAIL(call_failed, path, "read(" + path + ")", errno, what);
    if (n == 0) break;
    data.append(buf.data(), static_cast<std::size_t>(n));
    if (data.size() > cap)
      MORI_FILE_FAIL(too_large, path, "read(" + path + ")", 0,
                     what + " grew past the " + mib(cap) + " a " + kind.what + " may hold");
    if (detail::PollClock::now() > deadline)
      throw TimeoutError("reading " + what + " took longer than " + format_seconds(bound) +
                         " s; --timeout-s bounds it");
  }
  out = std::move(data);
  return true;
}

// Every byte of text to fd, or FileError naming `name`.
void write_all(int fd, const std::string& text, const std::string& name) {
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t w = write(fd, text.data() + done, text.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) MORI_FILE_FAIL(call_failed, name, "write(" + name + ")", errno, {});
    if (w == 0) MORI_FILE_FAIL(call_failed, name, "write(" + name + ")", EIO, "no byte written");
    done += static_cast<std::size_t>(w);
  }
}

void write_stdout(const std::string& text) {
  g_stdout_failed.store(true);
  if (g_stdout_closed.load())
    MORI_FILE_FAIL(call_failed, "stdout", "write(stdout)", EBADF,
                   "stdout is closed; the report was not written");
  // What stdio holds goes first, so that the report follows it in order.
  errno = 0;
  if (std::fflush(stdout) != 0)
    MORI_FILE_FAIL(call_failed, "stdout", "fflush(stdout)", errno ? errno : EIO, {});
  write_all(STDOUT_FILENO, text, "stdout");
  g_stdout_failed.store(false);
}

}  // namespace

FileError::FileError(Reason reason, const std::string& path, std::string call, const char* file, int line,
                     int err, const std::string& detail)
    : Error(code_of(reason), format_file_error(call, file, line, api_name(reason, err), detail)),
      reason_(reason),
      path_(path),
      errno_(err) {}

void set_file_bound(double seconds) noexcept {
  if (seconds > 0) g_file_bound_s.store(seconds);
}

std::string read_file(const std::string& path, const FileKind& kind) {
  std::string out;
  read_impl(path, kind, out, false);
  return out;
}

bool read_file_if_present(const std::string& path, const FileKind& kind, std::string& out) {
  return read_impl(path, kind, out, true);
}

namespace {
constexpr const char* kOnlyRegular =
    "a report is written only to a regular file or a new name ('-' = stdout)";

// The file write_output writes for `path` (not "-"): an existing regular file's real path, a new name as it
// was given (or as reached through a folder's symlink), else `path`. `refused`: why no report may go there
// ("" = none); a folder is left to the caller.
struct Target {
  std::string path;
  std::string refused;
};

// Pushes the components of `p` onto a stack whose back is the next one ("" and "." left out).
void push_components(const std::string& p, std::vector<std::string>& todo) {
  std::vector<std::string> parts;
  for (std::size_t i = 0; i <= p.size();) {
    const std::size_t j = std::min(p.find('/', i), p.size());
    if (j > i && p.compare(i, j - i, ".") != 0) parts.push_back(p.substr(i, j - i));
    i = j + 1;
  }
  todo.insert(todo.end(), parts.rbegin(), parts.rend());
}

// `at` (a path holding no symlink) one component up or down.
std::string step(const std::string& at, const std::string& name) {
  if (name != "..") return at == "/" ? "/" + name : at + "/" + name;
  const std::size_t slash = at.rfind('/');
  if (at == "/" || slash == std::string::npos) return at;
  return slash == 0 ? "/" : at.substr(0, slash);
}

// The kernel's protected_symlinks rule, kept whether or not the kernel keeps it (docs/reliability.md, "Files
// the tools read and write"): a symlink in a sticky world-writable folder (/tmp) is followed only where its
// owner is this process's user or the folder's owner. Another user's link there would choose what this user
// writes.
std::string untrusted_link(const struct stat& link, const std::string& name, const std::string& dir) {
  struct stat d {};
  if (stat(dir.c_str(), &d) != 0) return {};
  const mode_t shared = S_ISVTX | S_IWOTH;
  if ((d.st_mode & shared) != shared || link.st_uid == geteuid() || link.st_uid == d.st_uid) return {};
  return "goes through the symlink '" + name + "' of uid " + std::to_string(link.st_uid) +
         " in the sticky world-writable folder '" + dir + "' of uid " + std::to_string(d.st_uid) +
         ", which is not followed (another user's link there would choose the file written); ";
}

// Walks `path` one component at a time, following each symlink by hand after checking it (untrusted_link), so
// that what is written is the file the checks saw: the symlinks' targets are never resolved by another call.
Target resolve_target(const std::string& path) {
  const std::string head = "the report '" + path + "' ";
  // A name ending in '/' names a folder (POSIX): never the file before the slash, never a new file.
  if (path.size() > 1 && path.back() == '/')
    return {path, head + "ends in '/', which names a folder; " + kOnlyRegular};
  std::vector<std::string> todo;
  push_components(path, todo);
  std::string at = "/";
  if (path.empty() || path[0] != '/') {
    char* cwd = getcwd(nullptr, 0);
    if (!cwd) return {path, {}};  // the writer's own calls name what is wrong
    at = cwd;
    std::free(cwd);
  }
  bool followed = false, last_from_link = false;
  for (int hops = 0; !todo.empty();) {
    const std::string name = todo.back();
    todo.pop_back();
    const std::string next = step(at, name);
    struct stat st {};
    if (name == ".." || lstat(next.c_str(), &st) != 0) {
      if (name != ".." && (errno != ENOENT || !todo.empty())) return {path, {}};
      struct stat kernel {};  // a magic link (/dev/stdout onto a pipe) names what the kernel finds there
      if (name != ".." && last_from_link && stat(path.c_str(), &kernel) == 0 && !S_ISREG(kernel.st_mode))
        return {path, head + "is " + type_name(kernel.st_mode) + via_symlink(path) + "; " + kOnlyRegular};
      if (name != ".." && last_from_link)
        return {path, head + "is a symlink to the new name '" + next +
                          "'; a report is never created through a dangling symlink; " + kOnlyRegular};
      at = next;
      continue;
    }
    if (!S_ISLNK(st.st_mode)) {
      at = next;
      continue;
    }
    if (++hops > 40) return {path, head + "leads into a symlink loop; " + kOnlyRegular};
    if (const std::string why = untrusted_link(st, next, at); !why.empty())
      return {path, head + why + kOnlyRegular};
    std::vector<char> buf(PATH_MAX + 1);
    const ssize_t n = readlink(next.c_str(), buf.data(), buf.size() - 1);
    if (n <= 0) return {path, {}};
    const std::string target(buf.data(), static_cast<std::size_t>(n));
    if (target[0] == '/') at = "/";
    if (todo.empty()) last_from_link = true;  // the last name now comes from a link's target
    push_components(target, todo);
    followed = true;
  }
  struct stat st {};
  if (stat(at.c_str(), &st) != 0) return {followed ? at : path, {}};  // a new name
  if (S_ISDIR(st.st_mode)) return {path, {}};
  if (!S_ISREG(st.st_mode))
    return {path, head + "is " + type_name(st.st_mode) + via_symlink(path) + "; " + kOnlyRegular};
  return {at, {}};
}

std::string folder_of(const std::string& target) {
  const auto slash = target.rfind('/');
  return slash == std::string::npos ? "." : target.substr(0, slash == 0 ? 1 : slash);
}

// A fresh temporary name in `dir`, created exclusively: two writers (threads, or processes of the same pid on
// hosts sharing the folder) never write into one temporary file. The name does not grow with the target's.
Fd new_temporary(const std::string& dir, std::string& tmp) {
  Fd f{-1};
  for (int attempt = 0; attempt < 8 && f.fd < 0; ++attempt) {
    char suffix[24];
    static std::atomic<unsigned> counter{0};
    const auto ns = std::chrono::steady_clock::now().time_since_epoch().count();
    std::snprintf(suffix, sizeof(suffix), "%x-%08x", counter.fetch_add(1),
                  static_cast<unsigned>(static_cast<unsigned long long>(ns) & 0xffffffffu));
    tmp = dir + "/.mori-json-" + std::to_string(getpid()) + "-" + suffix + ".tmp";
    f.fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (f.fd < 0 && errno != EEXIST) break;
  }
  return Fd{std::exchange(f.fd, -1)};
}

}  // namespace

std::string output_path_refusal(const std::string& path) {
  try {
    return resolve_target(path).refused;
  } catch (...) {
    return {};  // resolve_output_path then names what failed
  }
}

std::string resolve_output_path(const std::string& path) {
  const Target t = resolve_target(path);
  if (!t.refused.empty()) MORI_FILE_FAIL(not_regular, path, "open(" + path + ")", 0, t.refused);
  // A folder that exists and says it is writable but takes no new file (/proc, as root): found by creating
  // the temporary file the writer would, and removing it at once.
  const std::string dir = folder_of(t.path);
  struct stat st {};
  if (stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && access(dir.c_str(), W_OK) == 0) {
    std::string tmp;
    Fd f = new_temporary(dir, tmp);
    if (f.fd < 0) {
      const int err = errno;
      // A folder of files that are not files (/proc, /sys: EACCES, EPERM, EINVAL, EROFS for root) is the
      // user's choice of path (exit 2); a full disk, a quota or no descriptor left is the machine (exit 3).
      if (err == ENOSPC || err == EDQUOT || err == EMFILE || err == ENFILE || err == ENOMEM || err == EIO)
        MORI_FILE_FAIL(call_failed, path, "open(" + tmp + ")", err,
                       "cannot create a file in the folder '" + dir + "' of the report '" + path + "'");
      MORI_FILE_FAIL(not_regular, path, "open(" + tmp + ")", 0,
                     "the folder '" + dir + "' of the report '" + path + "' takes no new file (" +
                         errno_name(err) + "); " + kOnlyRegular);
    }
    if (unlink(tmp.c_str()) != 0)
      MORI_FILE_FAIL(call_failed, path, "unlink(" + tmp + ")", errno,
                     "cannot remove the test file in the folder of the report '" + path + "'");
  }
  return t.path;
}

void write_output(const std::string& path, const std::string& text) {
  if (path == "-") {
    write_stdout(text);
    return;
  }
  // A symlink is followed; a target that is not a regular file (a device node such as /dev/null, a FIFO, a
  // terminal) or a symlink loop is refused (exit 2), never written in place or replaced: the tools refuse it
  // before the run already (resolve_output_path). A regular file or a new name is replaced by a rename.
  const Target t = resolve_target(path);
  if (!t.refused.empty()) MORI_FILE_FAIL(not_regular, path, "open(" + path + ")", 0, t.refused);
  const std::string& target = t.path;
  struct stat st {};
  const bool exists = stat(target.c_str(), &st) == 0;
  if (exists && S_ISDIR(st.st_mode))
    MORI_FILE_FAIL(not_regular, target, "open(" + target + ")", 0,
                   "'" + target + "' is a folder, not a file");
  const std::string dir = folder_of(target);
  std::string tmp;
  Fd f = new_temporary(dir, tmp);
  if (f.fd < 0) MORI_FILE_FAIL(call_failed, tmp, "open(" + tmp + ")", errno, {});
  {  // the temporary file is written, closed and checked before it replaces the target
    try {
      // The file it replaces keeps its permission bits (a private 0600 report stays private).
      if (exists && fchmod(f.fd, st.st_mode & 0777) != 0)
        MORI_FILE_FAIL(call_failed, tmp, "fchmod(" + tmp + ")", errno, "keeping the mode of " + target);
      write_all(f.fd, text, tmp);
    } catch (...) {
      unlink(tmp.c_str());
      throw;
    }
    const int fd = f.fd;  // closed before the rename, and checked: a deferred write error shows here
    f.fd = -1;
    if (close(fd) != 0) {
      const int err = errno;
      unlink(tmp.c_str());
      MORI_FILE_FAIL(call_failed, tmp, "close(" + tmp + ")", err, {});
    }
  }
  // Checked once more just before the rename: a FIFO, a device or a link swapped in meanwhile is refused,
  // never replaced.
  struct stat now {};
  if (lstat(target.c_str(), &now) == 0 && !S_ISREG(now.st_mode)) {
    unlink(tmp.c_str());
    MORI_FILE_FAIL(
        not_regular, path, "rename(" + tmp + ", " + target + ")", 0,
        "the report '" + target + "' became " + type_name(now.st_mode) + " during the run; " + kOnlyRegular);
  }
  if (std::rename(tmp.c_str(), target.c_str()) != 0) {
    const int err = errno;
    unlink(tmp.c_str());
    MORI_FILE_FAIL(call_failed, target, "rename(" + tmp + ", " + target + ")", err, {});
  }
}

void write_new_file(const std::string& path, const std::string& data, mode_t mode, bool sync) {
  Fd f{open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode)};
  if (f.fd < 0) MORI_FILE_FAIL(call_failed, path, "open(" + path + ")", errno, {});
  try {
    write_all(f.fd, data, path);
    if (sync && fsync(f.fd) != 0) MORI_FILE_FAIL(call_failed, path, "fsync(" + path + ")", errno, {});
  } catch (...) {
    unlink(path.c_str());
    throw;
  }
}

LockFile::LockFile(const std::string& path) {
  fd_ = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd_ < 0) MORI_FILE_FAIL(call_failed, path, "open(" + path + ")", errno, "a lock file");
}

LockFile::~LockFile() {
  if (fd_ >= 0) close(fd_);
}

void guard_standard_streams() noexcept {
  // A closed pipe: write() fails with EPIPE, which the writer reports, instead of SIGPIPE ending the process.
  std::signal(SIGPIPE, SIG_IGN);
  for (int fd = 0; fd <= 2; ++fd) {
    if (fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
    if (fd != STDOUT_FILENO) {
      // stdin and stderr: /dev/null holds the number (a log line lost to a closed stderr is no report lost).
      const int n = open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
      if (n >= 0 && n != fd) {
        dup2(n, fd);
        close(n);
      }
      continue;
    }
    // stdout: a pipe whose reader is gone holds the number, so that every write there fails (EPIPE) and
    // finish_stdout() reports what was lost.
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) continue;
    if (p[1] != fd) {
      dup2(p[1], fd);  // closes p[0] where it took fd's number
      close(p[1]);
    }
    if (p[0] != fd) close(p[0]);
    g_stdout_closed.store(true);
  }
}

std::string finish_stdout() noexcept {
  try {
    errno = 0;
    const bool flush_failed = std::fflush(stdout) != 0;
    const int err = flush_failed && errno ? errno : 0;
    if ((!flush_failed && !std::ferror(stdout)) || g_stdout_failed.load()) return {};
    const std::string lost = "what the tool printed on stdout was lost";
    if (g_stdout_closed.load())
      return format_file_error("write(stdout)", __FILE__, __LINE__, "EBADF", "stdout is closed; " + lost);
    return format_file_error("write(stdout)", __FILE__, __LINE__, err ? errno_name(err) : "EIO", lost);
  } catch (...) {
    return "write(stdout) failed";
  }
}

}  // namespace mori::symm
