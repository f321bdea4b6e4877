// SPDX-License-Identifier: MIT
#include "mori/symm/comm/setup_cost.hpp"

#include <time.h>

#include <algorithm>
#include <atomic>
#include <mutex>

#include "mori/symm/base/enum_names.hpp"
#include "mori/symm/comm/bootstrap.hpp"

namespace mori::symm {
namespace {

double now_s(clockid_t clock) noexcept {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

struct Ledger {
  std::mutex mu;
  SetupTotals totals;  // wall, cpu and scopes under mu
  std::array<std::atomic<std::uint64_t>, kSetupSteps> ops{};
};

Ledger& ledger() noexcept {
  static Ledger l;
  return l;
}

// The step this thread is timing now (-1: none), and the start of its current stretch.
thread_local int t_step = -1;
thread_local double t_wall0 = 0, t_cpu0 = 0;

void add_stretch(int step, double wall0, double cpu0) noexcept {
  if (step < 0) return;
  const double w = now_s(CLOCK_MONOTONIC) - wall0, c = now_s(CLOCK_THREAD_CPUTIME_ID) - cpu0;
  Ledger& l = ledger();
  std::lock_guard lk(l.mu);
  l.totals.wall_s[static_cast<std::size_t>(step)] += w;
  l.totals.cpu_s[static_cast<std::size_t>(step)] += c;
}

// One rank's figures of one step, as allgathered.
struct StepFigures {
  double wall_s, cpu_s;
  std::uint64_t ops, scopes;
};

Json steps_json(const std::vector<std::array<StepFigures, kSetupSteps>>& ranks) {
  Json steps = Json::array();
  for (int s = 0; s < kSetupSteps; ++s) {
    StepFigures most{0, 0, 0, 0};
    int at = -1;
    for (std::size_t r = 0; r < ranks.size(); ++r) {
      const StepFigures& f = ranks[r][static_cast<std::size_t>(s)];
      if (f.scopes == 0) continue;
      if (at < 0 || f.wall_s > most.wall_s) at = static_cast<int>(r);
      most.wall_s = std::max(most.wall_s, f.wall_s);
      most.cpu_s = std::max(most.cpu_s, f.cpu_s);
      most.ops = std::max(most.ops, f.ops);
    }
    if (at < 0) continue;
    steps.push_back({{"step", setup_name(static_cast<Setup>(s))},
                     {"wall_s", most.wall_s},
                     {"cpu_s", most.cpu_s},
                     {"ops", most.ops},
                     {"rank", at}});
  }
  return steps;
}

std::array<StepFigures, kSetupSteps> mine() noexcept {
  const SetupTotals t = setup_totals();
  std::array<StepFigures, kSetupSteps> f{};
  for (std::size_t s = 0; s < f.size(); ++s) f[s] = {t.wall_s[s], t.cpu_s[s], t.ops[s], t.scopes[s]};
  return f;
}

}  // namespace

const char* setup_name(Setup s) noexcept {
  static constexpr EnumName<Setup> kNames[] = {{Setup::bootstrap, "bootstrap"},
                                               {Setup::options_check, "options_check"},
                                               {Setup::allocation, "allocation"},
                                               {Setup::handle_export, "handle_export"},
                                               {Setup::exchange, "exchange"},
                                               {Setup::reserve, "reserve"},
                                               {Setup::map, "map"},
                                               {Setup::access, "access"},
                                               {Setup::teardown, "teardown"}};
  return enum_name(kNames, s);
}

SetupStep::SetupStep(Setup s) noexcept : step_(s), outer_(t_step), wall0_(0), cpu0_(0) {
  add_stretch(outer_, t_wall0, t_cpu0);  // the outer step pauses here
  t_step = static_cast<int>(s);
  wall0_ = t_wall0 = now_s(CLOCK_MONOTONIC);
  cpu0_ = t_cpu0 = now_s(CLOCK_THREAD_CPUTIME_ID);
  Ledger& l = ledger();
  std::lock_guard lk(l.mu);
  ++l.totals.scopes[static_cast<std::size_t>(s)];
}

SetupStep::~SetupStep() {
  add_stretch(static_cast<int>(step_), t_wall0, t_cpu0);
  t_step = outer_;
  t_wall0 = now_s(CLOCK_MONOTONIC);  // the outer step resumes now
  t_cpu0 = now_s(CLOCK_THREAD_CPUTIME_ID);
}

void count_setup_ops(std::uint64_t n) noexcept {
  if (t_step >= 0) ledger().ops[static_cast<std::size_t>(t_step)].fetch_add(n, std::memory_order_relaxed);
}

SetupTotals setup_totals() noexcept {
  Ledger& l = ledger();
  std::lock_guard lk(l.mu);
  SetupTotals t = l.totals;
  for (std::size_t s = 0; s < t.ops.size(); ++s) t.ops[s] = l.ops[s].load(std::memory_order_relaxed);
  return t;
}

Json gather_setup_cost(Bootstrap& boot) {
  const auto all = boot.allgather_value("meta.setup", mine());
  return {{"world", boot.world()}, {"of", "max over ranks"}, {"steps", steps_json(all)}};
}

Json local_setup_cost(int rank, int world) {
  return {
      {"world", world}, {"of", "rank " + std::to_string(rank) + " alone"}, {"steps", steps_json({mine()})}};
}

}  // namespace mori::symm
