#include "mori/symm/detail/fault.hpp"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "mori/symm/error.hpp"

namespace mori::symm::detail {
namespace {

// Every point the library and the tools arm (docs/reliability.md); teardown steps are matched by pattern.
constexpr const char* kKnownPoints[] = {
    "rendezvous.requests", "rendezvous.nobind.hang", "rendezvous.bind",
    "rendezvous.slow",     "rendezvous.send-lost",   "rendezvous.exchange",
    "rendezvous.import",   "rendezvous.mapped",      "a2a.timed",
    "a2a.no-launch",       "a2a.no-barrier",         "a2a.stale",
    "a2a.overrun",         "a2a.announce",           "a2a.distinct-policy",
    "journal.full",        "matrix.no-pong",         "matrix.short-write",
    "matrix.slow-pair",
};

bool ends_with(const std::string& s, const char* suffix) {
  const std::size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

// teardown.<step>.crash | teardown.<step>.hang, <step> a journal step name such as unmap_slot or w1.barrier.
bool teardown_pattern(const std::string& p) {
  if (p.rfind("teardown.", 0) != 0) return false;
  std::size_t tail = ends_with(p, ".crash") ? 6 : ends_with(p, ".hang") ? 5 : 0;
  if (!tail || p.size() <= 9 + tail) return false;
  const std::string step = p.substr(9, p.size() - 9 - tail);
  return step.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_.-") == std::string::npos;
}

}  // namespace

bool fault_point_known(const std::string& point) {
  for (const char* k : kKnownPoints)
    if (point == k) return true;
  return teardown_pattern(point);
}

std::string known_fault_points() {
  std::string s;
  for (const char* k : kKnownPoints) s += std::string(s.empty() ? "" : ", ") + k;
  return s + ", teardown.<step>.crash, teardown.<step>.hang";
}

void validate_fault_spec() {
#ifdef MORI_FAULT_INJECTION
  const char* spec = std::getenv("MORI_FAULT");
  if (!spec || !*spec) return;
  const std::string s(spec);
  std::size_t pos = 0;
  while (pos <= s.size()) {
    std::size_t end = s.find(',', pos);
    if (end == std::string::npos) end = s.size();
    const std::string item = s.substr(pos, end - pos);
    const std::size_t colon = item.rfind(':');
    if (colon == std::string::npos)
      throw UsageError("MORI_FAULT: '" + item +
                       "' is not <point>:<rank> (known points: " + known_fault_points() + ")");
    const std::string point = item.substr(0, colon), rank = item.substr(colon + 1);
    if (!fault_point_known(point))
      throw UsageError("MORI_FAULT: unknown point '" + point + "' (known: " + known_fault_points() + ")");
    if (rank != "*" &&
        (rank.empty() || rank.size() > 9 || rank.find_first_not_of("0123456789") != std::string::npos))
      throw UsageError("MORI_FAULT: '" + item + "': the rank must be a number or '*'");
    pos = end + 1;
  }
#endif
}

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
