#include "mori/symm/detail/fault.hpp"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

namespace mori::symm::detail {

bool fault_armed(const char* point, int rank) noexcept {
#ifdef MORI_FAULT_INJECTION
  const char* spec = std::getenv("MORI_FAULT");
  if (!spec || !*spec) return false;
  std::string s(spec);
  std::size_t pos = 0;
  while (pos <= s.size()) {
    std::size_t end = s.find(',', pos);
    if (end == std::string::npos) end = s.size();
    std::string item = s.substr(pos, end - pos);
    std::size_t colon = item.rfind(':');
    if (colon != std::string::npos && item.substr(0, colon) == point) {
      const std::string r = item.substr(colon + 1);
      if (r == "*" || r == std::to_string(rank)) return true;
    }
    pos = end + 1;
  }
#else
  (void)point;
  (void)rank;
#endif
  return false;
}

void fault_point(const char* point, int rank) noexcept {
  if (!fault_armed(point, rank)) return;
  const std::size_t n = std::strlen(point);
  if (n > 5 && std::strcmp(point + n - 5, ".hang") == 0) {
    for (;;) pause();
  }
  const char msg[] = "MORI_FAULT: injected exit at ";
  (void)!write(2, msg, sizeof(msg) - 1);
  (void)!write(2, point, n);
  (void)!write(2, "\n", 1);
  _exit(17);
}

}  // namespace mori::symm::detail
