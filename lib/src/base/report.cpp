#include "mori/symm/base/report.hpp"

#include <sys/stat.h>

#include <cstdlib>
#include <ctime>

#include "mori/symm/base/files.hpp"

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

void write_json(const std::string& path, const Json& doc) {
  // Bytes that are not UTF-8 (a file name, a node id, an environment value) are replaced, not fatal.
  write_output(path, doc.dump(2, ' ', false, Json::error_handler_t::replace) + "\n");
}

}  // namespace mori::symm
