// SPDX-License-Identifier: MIT
#include "mori/symm/base/detail/fault.hpp"
#include "mori/symm/base/env.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "mori/symm/base/error.hpp"
#include "mori/symm/base/log.hpp"

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
    "matrix.slow-pair",    "revision.app",           "revision.library",
    "a2a.slow-kernel",     "health.gpu-count",       "health.driver-version",
    "health.handle-type",
};

#ifdef MORI_FAULT_INJECTION
// a2a.slow-kernel (docs/perf-check.md "A/B"): every push of the rank is slower by MORI_FAULT_DELAY_NS.
constexpr const char* kSlowKernel = "a2a.slow-kernel";
constexpr std::uint64_t kMaxDelayNs = 10'000'000'000ull;  // 10 s

// MORI_FAULT_DELAY_NS as a whole number of nanoseconds in 1..10 s; 0 when unset or empty; -1 when malformed.
std::int64_t parse_delay_ns() {
  const char* v = env_read("MORI_FAULT_DELAY_NS");
  if (!v || !*v) return 0;
  const std::string s(v);
  if (s.size() > 11 || s.find_first_not_of("0123456789") != std::string::npos) return -1;
  const std::uint64_t ns = std::stoull(s);
  return ns >= 1 && ns <= kMaxDelayNs ? static_cast<std::int64_t>(ns) : -1;
}
#endif

// Which items of MORI_FAULT fired in this process (bit i = the i-th item); a spec holds at most 64 items.
constexpr std::size_t kMaxItems = 64;
std::atomic<std::uint64_t> g_fired{0};

struct Item {
  std::string point, rank;  // rank: "*" or 1..9 decimal digits
};

// MORI_FAULT parsed and checked in one place: every reader (validate_fault_spec, fault_armed, fault_items,
// warn_unfired_faults) sees the same items, and a malformed spec has no items at all, only its error.
struct Spec {
  std::vector<Item> items;
  std::string error;  // "" = well formed (or unset)
};

constexpr const char* kForm = "<point>:<rank>[,<point>:<rank>...], <rank> a number or '*'";

// Whether two items arm one point on one rank: the same point, and the same rank number (leading zeros aside)
// or '*' on either side. Only the first would ever fire; the second would only warn that it never fired.
bool same_arming(const Item& a, const Item& b) {
  if (a.point != b.point) return false;
  if (a.rank == "*" || b.rank == "*") return true;
  return std::stol(a.rank) == std::stol(b.rank);
}

Spec parse_spec(const char* spec) {
  Spec out;
  if (!spec || !*spec) return out;
  const std::string s(spec);
  const std::size_t count = 1 + static_cast<std::size_t>(std::count(s.begin(), s.end(), ','));
  if (count > kMaxItems) {
    out.error = "MORI_FAULT: " + std::to_string(count) + " items, more than the " +
                std::to_string(kMaxItems) + " a spec may hold";
    return out;
  }
  std::size_t pos = 0, index = 0;
  while (pos <= s.size()) {
    std::size_t end = s.find(',', pos);
    if (end == std::string::npos) end = s.size();
    const std::string item = s.substr(pos, end - pos);
    pos = end + 1;
    ++index;
    auto bad = [&](const std::string& why) {
      out.items.clear();
      out.error = "MORI_FAULT: " + why;
      return out;
    };
    if (item.empty()) return bad("item " + std::to_string(index) + " is empty (the form is " + kForm + ")");
    const std::size_t colon = item.find(':');
    if (colon == std::string::npos || colon == 0 || item.find(':', colon + 1) != std::string::npos)
      return bad("'" + item + "' is not <point>:<rank> (the form is " + kForm +
                 "; known points: " + known_fault_points() + ")");
    Item it{item.substr(0, colon), item.substr(colon + 1)};
    if (!fault_point_known(it.point))
      return bad("unknown point '" + it.point + "' (known: " + known_fault_points() + ")");
    if (it.rank != "*" && (it.rank.empty() || it.rank.size() > 9 ||
                           it.rank.find_first_not_of("0123456789") != std::string::npos))
      return bad("'" + item + "': the rank must be a number (at most 9 digits) or '*'");
    for (std::size_t j = 0; j < out.items.size(); ++j)
      if (same_arming(out.items[j], it))
        return bad("item " + std::to_string(index) + " '" + item + "' arms what item " +
                   std::to_string(j + 1) + " '" + out.items[j].point + ":" + out.items[j].rank +
                   "' arms already (a point is armed once per rank)");
    out.items.push_back(std::move(it));
  }
  return out;
}

bool ends_with(const std::string& s, const char* suffix) {
  const std::size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

// The steps mori-teardown-repro journals (docs/mori-teardown-repro.md, "The journal"), each also under the
// prefixes "w<i>." (divergent-order's windows) and "atexit." (the atexit scenario's hook).
constexpr const char* kTeardownSteps[] = {
    "alloc",       "rendezvous",
    "sync_device", "barrier",
    "unmap_slot",  "release_slot",
    "unmap_local", "release_local",
    "free_span",   "free_local",
    "unmap_span",  "read_owner",
    "write_owner", "read_owner.skipped_not_in_owner_team",
    "final_sync",  "leak_check",
};

bool teardown_step_known(std::string step) {
  if (step.rfind("atexit.", 0) == 0) {
    step = step.substr(7);
  } else if (step.size() > 2 && step[0] == 'w') {
    const std::size_t dot = step.find('.');
    if (dot != std::string::npos && dot > 1 && dot <= 3 && step.find_first_not_of("0123456789", 1) == dot)
      step = step.substr(dot + 1);
  }
  for (const char* k : kTeardownSteps)
    if (step == k) return true;
  return false;
}

// teardown.<step>.crash | teardown.<step>.hang, <step> a journal step name such as unmap_slot or w1.barrier.
bool teardown_pattern(const std::string& p) {
  if (p.rfind("teardown.", 0) != 0) return false;
  std::size_t tail = ends_with(p, ".crash") ? 6 : ends_with(p, ".hang") ? 5 : 0;
  if (!tail || p.size() <= 9 + tail) return false;
  return teardown_step_known(p.substr(9, p.size() - 9 - tail));
}

// The spec of this process, parsed once (the variable is read once, at the first call).
const Spec& the_spec() {
  static const Spec spec = parse_spec(env_read("MORI_FAULT"));
  return spec;
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
  const Spec& spec = the_spec();
  if (!spec.error.empty()) throw UsageError(spec.error);
  for (const Item& it : spec.items)
    if (it.point == kSlowKernel && parse_delay_ns() == 0)
      throw UsageError(std::string("MORI_FAULT: ") + kSlowKernel + " needs MORI_FAULT_DELAY_NS" +
                       " (the delay in nanoseconds, 1.." + std::to_string(kMaxDelayNs) + ")");
  if (parse_delay_ns() < 0)
    throw UsageError(std::string("MORI_FAULT_DELAY_NS: '") + env_read("MORI_FAULT_DELAY_NS") +
                     "' is not a whole number of nanoseconds in 1.." + std::to_string(kMaxDelayNs) +
                     " (10 s)");
#endif
}

std::uint64_t fault_delay_ns() noexcept {
#ifdef MORI_FAULT_INJECTION
  try {
    const std::int64_t ns = parse_delay_ns();
    return ns > 0 ? static_cast<std::uint64_t>(ns) : 0;
  } catch (...) {  // out of memory reading the variable: no delay
  }
#endif
  return 0;
}

namespace {
// Whether item `it` is armed for `rank`: '*', or the same number (leading zeros allowed).
bool armed_for(const Item& it, long rank) {
  return it.rank == "*" || std::stol(it.rank) == rank;
}
}  // namespace

bool fault_armed(const char* point, int rank) noexcept {
#ifdef MORI_FAULT_INJECTION
  try {
    const auto& items = the_spec().items;
    for (std::size_t i = 0; i < items.size(); ++i) {
      if (items[i].point != point || !armed_for(items[i], rank)) continue;
      if (i < kMaxItems) g_fired.fetch_or(std::uint64_t{1} << i);
      return true;
    }
  } catch (...) {  // out of memory parsing the variable: the point stays unarmed
  }
#else
  (void)point;
  (void)rank;
#endif
  return false;
}

std::vector<FaultItem> fault_items() {
  std::vector<FaultItem> out;
#ifdef MORI_FAULT_INJECTION
  const auto& items = the_spec().items;
  const std::uint64_t fired = g_fired.load();
  for (std::size_t i = 0; i < items.size(); ++i)
    out.push_back({items[i].point, items[i].rank, i < kMaxItems && (fired >> i & 1) != 0});
#endif
  return out;
}

void warn_unfired_faults(int rank, int world) noexcept {
#ifdef MORI_FAULT_INJECTION
  try {
    // A malformed spec was the usage error already (validate_fault_spec): it has no items to warn about.
    const auto& items = the_spec().items;
    const std::uint64_t fired = g_fired.load();
    for (std::size_t i = 0; i < items.size(); ++i) {
      const Item& f = items[i];
      if (i < kMaxItems && (fired >> i & 1) != 0) continue;
      const bool mine = armed_for(f, rank);
      // A rank outside the job is reported once, by rank 0; every other item by the rank it was armed on.
      const bool outside = f.rank != "*" && std::stol(f.rank) >= world;
      if (mine || (outside && rank == 0))
        spdlog::warn("MORI_FAULT: point {}:{} never fired{} (docs/reliability.md, Fault injection)", f.point,
                     f.rank,
                     outside ? " (the job has ranks 0.." + std::to_string(world - 1) + ")" : " on this rank");
    }
  } catch (const std::exception&) {  // out of memory, or a logger that fails: nothing to warn with
  }
#else
  (void)rank;
  (void)world;
#endif
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
