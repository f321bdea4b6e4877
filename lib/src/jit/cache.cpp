// SPDX-License-Identifier: MIT
// The JIT's on-disk cache (cache.hpp; lib/README.md, JIT cache): the folder of an arch, its entries (image,
// lowered names and a manifest of their sizes and hashes), published by an atomic rename under a per-key
// flock.
#include "cache.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <sstream>
#include <system_error>

#include "mori/symm/base/detail/poll.hpp"
#include "mori/symm/base/env.hpp"
#include "mori/symm/base/error.hpp"
#include "mori/symm/base/log.hpp"

namespace mori::symm {
namespace fs = std::filesystem;
namespace {

using Clock = std::chrono::steady_clock;
using detail::CacheFolder;

double g_wait_bound_s = 300;  // set_jit_wait_bound(): the tools pass --timeout-s

void write_file(const std::string& path, const std::string& data) {
  write_new_file(path, data, 0600, true);
}

// A folder we may load code from: ours, and writable by nobody else. Empty string = fine, else why not.
std::string unsafe_reason(const std::string& dir) {
  struct stat st {};
  if (lstat(dir.c_str(), &st) != 0) return std::string("cannot stat: ") + errno_name(errno);
  if (!S_ISDIR(st.st_mode)) return "not a directory";
  if (st.st_uid != geteuid()) return "owned by uid " + std::to_string(st.st_uid) + ", not by us";
  if (st.st_mode & (S_IWGRP | S_IWOTH)) return "writable by group or others";
  return {};
}

std::string random_suffix() {
  std::uint64_t r = 0;
  if (getrandom(&r, sizeof(r), 0) != sizeof(r))
    r = static_cast<std::uint64_t>(Clock::now().time_since_epoch().count());
  return std::to_string(getpid()) + "-" + std::to_string(r);
}

// Who holds a flock on fd's file, from /proc/locks ("pid N"), or "another process" when it cannot be told.
std::string lock_holder(int fd) {
  struct stat st {};
  if (fstat(fd, &st) != 0) return "another process";
  char want[64];
  std::snprintf(want, sizeof(want), "%02x:%02x:%llu", major(st.st_dev), minor(st.st_dev),
                static_cast<unsigned long long>(st.st_ino));
  std::string text;
  try {
    text = read_file("/proc/locks", kSystemFile);
  } catch (const std::exception&) {
    return "another process";
  }
  std::istringstream locks(text);
  std::string line;
  while (std::getline(locks, line)) {
    // "1: FLOCK  ADVISORY  WRITE 4242 08:01:1234 0 EOF"; lines with "->" are waiters, not holders.
    std::istringstream in(line);
    std::string id, kind, mode, rw, pid, dev;
    if (!(in >> id >> kind) || kind == "->" || kind != "FLOCK") continue;
    if (in >> mode >> rw >> pid >> dev && dev == want) return "pid " + pid;
  }
  return "another process";
}

// Serialised lowered names: one "instantiation\tsymbol" per line.
std::string names_text(const std::map<std::string, std::string>& lowered) {
  std::string s;
  for (auto& [k, v] : lowered) s += k + "\t" + v + "\n";
  return s;
}

bool parse_names(const std::string& text, std::map<std::string, std::string>& out) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    auto tab = line.find('\t');
    if (tab == std::string::npos) return false;
    out[line.substr(0, tab)] = line.substr(tab + 1);
  }
  return true;
}

std::string manifest_text(const std::string& image, const std::string& names) {
  return "image " + std::to_string(image.size()) + " " + hash_hex({image}) + "\nnames " +
         std::to_string(names.size()) + " " + hash_hex({names}) + "\n";
}

// The root (cache.hpp): "" with *why where there is none.
std::string cache_root(std::string* why) {
  std::string root;
  if (const char* d = env_read("MORI_JIT_CACHE_DIR"); d && *d) {
    root = d;  // asked for explicitly: created when missing
  } else {
    // Under $HOME (or $XDG_CACHE_HOME) only when that folder exists: the JIT never creates a home. A relative
    // XDG_CACHE_HOME is invalid and ignored, as the XDG Base Directory specification says (it would put the
    // cache under whatever folder the job was started in).
    std::error_code ec;
    const char* home = env_read("HOME");
    const char* xdg_env = env_read("XDG_CACHE_HOME");
    const bool xdg_relative = xdg_env && *xdg_env && xdg_env[0] != '/';
    const char* xdg = xdg_relative ? nullptr : xdg_env;
    if (xdg_relative) spdlog::debug("jit: XDG_CACHE_HOME '{}' is not an absolute path; ignored", xdg_env);
    if (home && *home && fs::is_directory(home, ec)) {
      root = std::string(home) + "/.mori/jit";
    } else if (xdg && *xdg && fs::is_directory(xdg, ec)) {
      root = std::string(xdg) + "/mori/jit";
    } else {
      const std::string ignored =
          xdg_relative ? "; XDG_CACHE_HOME '" + std::string(xdg_env) + "' is relative, so ignored" : "";
      *why = home && *home ? "no cache folder (HOME '" + std::string(home) + "' is not a folder" + ignored +
                                 "; set MORI_JIT_CACHE_DIR or XDG_CACHE_HOME)"
                           : "no cache folder (neither MORI_JIT_CACHE_DIR nor HOME is set" + ignored + ")";
    }
  }
  return root;
}

// What create_directories(dir) would do without doing it: nothing where dir is a folder already; an error
// where it is something else, or where the nearest folder that exists cannot take a new one.
std::error_code would_create(const std::string& dir) {
  std::error_code ec;
  if (fs::exists(dir, ec))
    return fs::is_directory(dir, ec) ? ec : std::make_error_code(std::errc::not_a_directory);
  if (ec) return ec;
  fs::path p = fs::absolute(dir, ec);
  while (!ec && p.has_relative_path() && !fs::exists(p, ec)) p = p.parent_path();
  if (ec) return ec;
  if (!fs::is_directory(p, ec)) return ec ? ec : std::make_error_code(std::errc::not_a_directory);
  if (access(p.c_str(), W_OK | X_OK) != 0) return std::error_code(errno, std::generic_category());
  return {};
}

// The arch's folder in a checked root: "" where it is usable (with create: made where missing), else why not.
std::string arch_folder_problem(const std::string& folder, bool create) {
  if (create) {
    if (mkdir(folder.c_str(), 0700) != 0 && errno != EEXIST)
      return "cannot create " + folder + ": " + errno_name(errno);
  } else {
    struct stat st {};
    if (lstat(folder.c_str(), &st) != 0)
      return errno == ENOENT ? "" : "cannot create " + folder + ": " + errno_name(errno);
  }
  if (auto why = unsafe_reason(folder); !why.empty()) return "refusing cache folder " + folder + ": " + why;
  return {};
}

CacheFolder find_folder(const std::string& arch, const std::string& platform, bool create) {
  CacheFolder c;
  const std::string root = cache_root(&c.why_not);
  if (root.empty()) return c;
  std::error_code ec;
  if (create) {
    fs::create_directories(root, ec);
  } else {
    ec = would_create(root);
    // Not there yet and it can be made: the first Jit makes it and checks it as any other.
    if (!ec && !fs::exists(root, ec)) return {root + "/" + arch + "_" + platform, ""};
  }
  // A symlinked root (~/.mori/jit -> /scratch/jit) is followed: the checks apply to its target.
  std::string real = root;
  if (!ec) {
    const fs::path canon = fs::canonical(root, ec);
    if (!ec) real = canon.string();
  }
  spdlog::debug("jit: cache root {}{}", root, real == root ? "" : " -> " + real);
  if (ec) {
    c.why_not = "cannot create " + root + ": " + ec.message();
  } else if (auto why = unsafe_reason(real); !why.empty()) {
    c.why_not = "refusing cache folder " + root + ": " + why;
  } else if (access(real.c_str(), W_OK) != 0) {
    c.why_not = "cache folder " + root + " is not writable";
  } else {
    const std::string folder = real + "/" + arch + "_" + platform;
    c.why_not = arch_folder_problem(folder, create);
    if (c.why_not.empty()) c.folder = folder;
  }
  return c;
}

}  // namespace

void set_jit_wait_bound(double seconds) noexcept {
  if (seconds > 0) g_wait_bound_s = seconds;
}

namespace detail {

CacheFolder cache_folder(const std::string& arch, const std::string& platform, bool create) {
  CacheFolder c = find_folder(arch, platform, create);
  if (c.folder.empty()) spdlog::warn("jit: compiling in memory: {}", c.why_not);
  return c;
}

bool load_entry(const std::string& root, const std::string& entry, const KernelSpec& spec,
                CompiledKernels& out) {
  std::error_code ec;
  if (!fs::exists(entry, ec)) return false;
  std::string why = unsafe_reason(entry);
  std::string image, names, manifest;
  if (why.empty()) {
    try {
      image = read_file(entry + "/image.bin", kJitCacheFile);
      names = read_file(entry + "/names.txt", kJitCacheFile);
      manifest = read_file(entry + "/manifest", kJitCacheFile);
    } catch (const std::exception& e) {
      why = e.what();
    }
  }
  std::map<std::string, std::string> lowered;
  if (why.empty() && manifest != manifest_text(image, names))
    why = "size or hash does not match its manifest";
  if (why.empty() && !parse_names(names, lowered)) why = "names.txt is malformed";
  for (const auto& inst : spec.instantiations)
    if (why.empty() && !lowered.count(inst)) why = "lacks " + inst;
  if (!why.empty()) {
    spdlog::warn("jit: cache entry {} is unusable ({}); rebuilding it", entry, why);
    const std::string trash = root + "/.trash-" + random_suffix();
    if (rename(entry.c_str(), trash.c_str()) == 0) fs::remove_all(trash, ec);
    return false;
  }
  out.image.assign(image.begin(), image.end());
  out.lowered = std::move(lowered);
  return true;
}

std::string lock_trouble(const std::string& root, const std::string& lock, const std::string& error) {
  struct stat st {};
  if (lstat(lock.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    std::string what = S_ISDIR(st.st_mode)    ? "a folder"
                       : S_ISLNK(st.st_mode)  ? "a symlink"
                       : S_ISFIFO(st.st_mode) ? "a FIFO"
                       : S_ISSOCK(st.st_mode) ? "a socket"
                                              : "a device";
    if (S_ISLNK(st.st_mode)) {
      std::error_code ec;
      const auto to = std::filesystem::read_symlink(lock, ec);
      if (!ec) what += " to " + to.string();
    }
    return "the lock " + lock + " is " + what + ", not a lock file (never followed or replaced): " + error;
  }
  struct stat dir {};
  if (stat(root.c_str(), &dir) != 0 || !S_ISDIR(dir.st_mode))
    return "the cache folder " + root + " went away during the job: " + error;
  return "the lock " + lock + " could not be opened: " + error;
}

EntryLock::EntryLock(const std::string& path, const std::string& file) : file_(path) {
  wait(path, file);
  spdlog::debug("jit: lock {} taken", path);
}

EntryLock::~EntryLock() {
  flock(file_.fd(), LOCK_UN);
}

void EntryLock::wait(const std::string& path, const std::string& file) {
  const int fd = file_.fd();
  const double bound = g_wait_bound_s;
  const auto waiting_since = Clock::now();
  bool said = false;
  const bool locked = detail::poll_until(
      [&] {
        if (flock(fd, LOCK_EX | LOCK_NB) == 0) return true;
        if (errno != EWOULDBLOCK && errno != EINTR)
          throw ApiError("flock(" + path + ")", __FILE__, __LINE__, errno_name(errno));
        if (!said && Clock::now() - waiting_since > std::chrono::seconds(1)) {
          spdlog::info("jit: waiting up to {} s for {} (held by {}, compiling {})", format_seconds(bound),
                       path, lock_holder(fd), file);
          said = true;
        }
        return false;
      },
      detail::deadline_after(bound), detail::Backoff::sleeping(std::chrono::milliseconds(2)));
  if (!locked)
    throw TimeoutError("jit: waited " + format_seconds(bound) + " s for the lock " + path + " held by " +
                       lock_holder(fd) + " (another process compiling " + file + "); --timeout-s bounds it");
}

void publish_entry(const std::string& root, const std::string& entry, const CompiledKernels& out,
                   const std::string& file) {
  const std::string tmp = root + "/.tmp-" + out.key + "-" + random_suffix();
  try {
    MORI_CHECK_POSIX(mkdir(tmp.c_str(), 0700));
    const std::string names = names_text(out.lowered);
    const std::string image(out.image.begin(), out.image.end());
    write_file(tmp + "/image.bin", image);
    write_file(tmp + "/names.txt", names);
    const std::string manifest = manifest_text(image, names);
    write_file(tmp + "/manifest", manifest);
    if (rename(tmp.c_str(), entry.c_str()) != 0) {
      std::error_code ec;
      fs::remove_all(tmp, ec);  // someone else published first: theirs is as good as ours
    }
  } catch (const std::exception& e) {
    std::error_code ec;
    fs::remove_all(tmp, ec);
    spdlog::warn("jit: could not publish {} to the cache: {}", file, e.what());
  }
}

}  // namespace detail
}  // namespace mori::symm
