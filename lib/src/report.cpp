#include "mori/symm/report.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <vector>

#include "mori/symm/error.hpp"

namespace mori::symm {

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

bool mps_active() {
  const char* dir = std::getenv("CUDA_MPS_PIPE_DIRECTORY");
  std::string control = std::string(dir && *dir ? dir : "/tmp/nvidia-mps") + "/control";
  struct stat st {};
  return stat(control.c_str(), &st) == 0 && (S_ISSOCK(st.st_mode) || S_ISFIFO(st.st_mode));
}

std::string resolve_output_path(const std::string& path) {
  struct stat existing {};
  if (stat(path.c_str(), &existing) == 0) {
    // Not a regular file: written in place through the name as given (/dev/stdout's magic link included).
    if (!S_ISREG(existing.st_mode)) return path;
    char* real = realpath(path.c_str(), nullptr);
    if (!real) return path;
    std::string r(real);
    std::free(real);
    return r;
  }
  // A new name, or a dangling symlink: followed by hand to the name it will create.
  std::string p = path;
  for (int hops = 0; hops < 40; ++hops) {
    struct stat st {};
    if (lstat(p.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return p;
    std::vector<char> buf(static_cast<std::size_t>(st.st_size > 0 ? st.st_size : 255) + 1);
    const ssize_t n = readlink(p.c_str(), buf.data(), buf.size() - 1);
    if (n < 0) return p;
    std::string target(buf.data(), static_cast<std::size_t>(n));
    if (target.empty()) return p;
    if (target[0] != '/') {
      const auto slash = p.rfind('/');
      if (slash != std::string::npos) target = p.substr(0, slash + 1) + target;
    }
    p = target;
  }
  return p;  // a loop: open() reports ELOOP on the original name
}

namespace {

void write_fd(int fd, const std::string& text, const std::string& path) {
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t w = write(fd, text.data() + done, text.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) throw ApiError("write(" + path + ")", __FILE__, __LINE__, errno_name(errno));
    done += static_cast<std::size_t>(w);
  }
}

struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) close(fd);
  }
};

}  // namespace

void write_json(const std::string& path, const Json& doc) {
  // Bytes that are not UTF-8 (a file name, a node id, an environment value) are replaced, not fatal.
  const std::string text = doc.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
  if (path == "-") {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    return;
  }
  // A symlink is followed; an existing target that is not a regular file (a device node such as /dev/null, a
  // FIFO, a terminal) is written in place; only a regular file or a new name is replaced by a rename.
  const std::string target = resolve_output_path(path);
  struct stat st {};
  if (stat(target.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    if (S_ISDIR(st.st_mode))
      throw ApiError("open(" + target + ")", __FILE__, __LINE__, "EISDIR", "a folder, not a file");
    // O_NONBLOCK: a FIFO without a reader fails (ENXIO) instead of waiting without a bound.
    Fd f{open(target.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)};
    if (f.fd < 0) throw ApiError("open(" + target + ")", __FILE__, __LINE__, errno_name(errno));
    const int flags = fcntl(f.fd, F_GETFL);
    if (flags < 0 || fcntl(f.fd, F_SETFL, flags & ~O_NONBLOCK) != 0)
      throw ApiError("fcntl(" + target + ", F_SETFL)", __FILE__, __LINE__, errno_name(errno));
    write_fd(f.fd, text, target);
    return;
  }
  // The temporary name does not grow with the target's: a legal long name stays legal.
  const auto slash = target.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : target.substr(0, slash == 0 ? 1 : slash);
  const std::string tmp = dir + "/.mori-json-" + std::to_string(getpid()) + ".tmp";
  {
    Fd f{open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644)};
    if (f.fd < 0) throw ApiError("open(" + tmp + ")", __FILE__, __LINE__, errno_name(errno));
    try {
      write_fd(f.fd, text, tmp);
    } catch (...) {
      unlink(tmp.c_str());
      throw;
    }
  }
  if (std::rename(tmp.c_str(), target.c_str()) != 0) {
    int err = errno;
    unlink(tmp.c_str());
    throw ApiError("rename(" + tmp + ", " + target + ")", __FILE__, __LINE__, errno_name(err));
  }
}

}  // namespace mori::symm
