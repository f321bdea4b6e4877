// SPDX-License-Identifier: MIT
// mori-teardown-repro's scenarios (docs/mori-teardown-repro.md): the window library's own teardown steps
// (lib/README.md, Teardown policy) composed in other orders, every step journaled per rank before it runs, so
// that a crash still leaves a report (--summarize DIR).
#include "mori/symm/teardown/scenarios.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "mori/symm/base/error.hpp"
#include "mori/symm/base/fds.hpp"
#include "mori/symm/base/log.hpp"
#include "mori/symm/bringup/doctor.hpp"
#include "mori/symm/bringup/environment.hpp"
#include "mori/symm/bringup/probe.hpp"
#include "mori/symm/teardown/journal_dir.hpp"
#include "mori/symm/window/window.hpp"

namespace mori::symm {
namespace {

// What a scenario runs with: the job's runtime, bootstrap and options, its journal and window options.
struct Ctx {
  Runtime& rt;
  Bootstrap& boot;
  int device;
  Journal& j;
  const TeardownJob& job;
  WindowOptions wo;
  Stream stream = nullptr;
};

using Run = void (*)(Ctx&);

// A scenario and how it runs.
struct Scenario {
  TeardownScenario info;
  Run run;
};

// --- building blocks: every one a journaled library step ---------------------------------------------------
std::unique_ptr<Window> make_window(Ctx& c, const char* tag = "") {
  std::unique_ptr<Window> w;
  auto st = c.j.step(std::string(tag) + "alloc", -1, [&] { w = std::make_unique<Window>(c.rt, c.wo); });
  if (!st.ok()) throw CheckFailed("alloc failed: " + st.error());
  st = c.j.step(std::string(tag) + "rendezvous", -1, [&] { w->rendezvous(c.boot); });
  if (!st.ok()) throw CheckFailed("rendezvous failed: " + st.error());
  return w;
}

// Every rank writes one page into every peer's slot, so the mappings are really used.
void touch_peers(Ctx& c, Window& w) {
  std::vector<std::uint8_t> page(4096, static_cast<std::uint8_t>(c.boot.rank() + 1));
  for (int p = 0; p < c.boot.world(); ++p) {
    void* dst = w.peer_ptrs()[static_cast<std::size_t>(p)];
    if (dst)
      c.rt.copy_to_device(static_cast<char*>(dst) + 4096 * static_cast<std::size_t>(c.boot.rank() % 16),
                          page.data(), page.size());
  }
}

// Asynchronous writes into every peer's slot, left in flight (GPU) for the no-sync and no-barrier scenarios.
void writes_in_flight(Ctx& c, Window& w, int rounds) {
  for (int r = 0; r < rounds; ++r)
    for (int p = 0; p < c.boot.world(); ++p)
      if (void* dst = w.peer_ptrs()[static_cast<std::size_t>(p)])
        c.rt.memset_async(dst, static_cast<std::uint8_t>(r), w.layout().buffer_bytes, c.stream);
}

// Stops a scenario at its first failing step (the journal has recorded it).
void must(const StepStatus& status) {
  if (!status.ok()) throw ApiError("scenario step", __FILE__, __LINE__, status.error());
}

void unmap_slots(Ctx& c, Window& w, const std::string& tag = "") {
  for (int i = 0; i < w.team_size(); ++i)
    must(c.j.step(tag + "unmap_slot", c.boot.team()[static_cast<std::size_t>(i)], [&] { w.unmap_slot(i); }));
}
void release_slots(Ctx& c, Window& w, const std::string& tag = "") {
  for (int i = 0; i < w.team_size(); ++i)
    must(c.j.step(tag + "release_slot", c.boot.team()[static_cast<std::size_t>(i)],
                  [&] { w.release_slot(i); }));
}
void finish_local(Ctx& c, Window& w, const std::string& tag = "") {
  must(c.j.step(tag + "unmap_local", -1, [&] { w.unmap_local(); }));
  must(c.j.step(tag + "release_local", -1, [&] { w.release_local(); }));
  must(c.j.step(tag + "free_span", -1, [&] { w.free_span(); }));
  must(c.j.step(tag + "free_local", -1, [&] { w.free_local(); }));
}
void default_order(Ctx& c, Window& w, bool sync, bool barrier, const std::string& tag = "") {
  if (sync) must(c.j.step(tag + "sync_device", -1, [&] { w.sync_device(); }));
  if (barrier) must(c.j.step(tag + "barrier", -1, [&] { w.barrier(); }));
  unmap_slots(c, w, tag);
  release_slots(c, w, tag);
  finish_local(c, w, tag);
}

// --- scenarios ---------------------------------------------------------------------------------------------
void s_ordered(Ctx& c) {
  auto w = make_window(c);
  touch_peers(c, *w);
  default_order(c, *w, true, true);
}

void s_span_unmap(Ctx& c) {
  auto w = make_window(c);
  touch_peers(c, *w);
  must(c.j.step("sync_device", -1, [&] { w->sync_device(); }));
  must(c.j.step("barrier", -1, [&] { w->barrier(); }));
  must(c.j.step("unmap_span", -1, [&] { w->unmap_span(); }));
  release_slots(c, *w);
  finish_local(c, *w);
}

void s_release_before_unmap(Ctx& c) {
  auto w = make_window(c);
  touch_peers(c, *w);
  must(c.j.step("sync_device", -1, [&] { w->sync_device(); }));
  must(c.j.step("barrier", -1, [&] { w->barrier(); }));
  release_slots(c, *w);
  unmap_slots(c, *w);
  must(c.j.step("release_local", -1, [&] { w->release_local(); }));
  must(c.j.step("unmap_local", -1, [&] { w->unmap_local(); }));
  must(c.j.step("free_span", -1, [&] { w->free_span(); }));
  must(c.j.step("free_local", -1, [&] { w->free_local(); }));
}

void s_exporter_first(Ctx& c) {
  auto w = make_window(c);
  auto& boot = c.boot;
  auto& rt = c.rt;
  const int me = boot.rank();
  // Each rank fills its first page with its own pattern.
  std::vector<std::uint8_t> mine(4096, static_cast<std::uint8_t>(0xA0 + me));
  rt.copy_to_device(w->local(), mine.data(), mine.size());
  must(c.j.step("barrier", -1, [&] { w->barrier("exporter-first.filled"); }));
  const int owner = 0;
  if (me == owner) {
    must(c.j.step("unmap_local", -1, [&] { w->unmap_local(); }));
    must(c.j.step("release_local", -1, [&] { w->release_local(); }));
    const int own = boot.team_rank();
    must(c.j.step("unmap_slot", me, [&] { w->unmap_slot(own); }));
    must(c.j.step("release_slot", me, [&] { w->release_slot(own); }));
  }
  must(c.j.step("barrier", -1, [&] { w->barrier("exporter-first.owner-released"); }));
  char* slot = static_cast<char*>(w->peer_ptrs()[owner]);
  if (me != owner && !slot) {
    // Outside the owner's load/store team (another node): there is no mapping of its memory to read.
    must(c.j.step("read_owner.skipped_not_in_owner_team", owner, [] {}));
    if (boot.team_rank() == 0)
      spdlog::info(
          "exporter-first: ranks of node {} are outside rank {}'s team: they only take part in teardown",
          boot.node_of(me), owner);
  }
  if (me != owner && slot) {
    must(c.j.step("read_owner", owner, [&] {
      std::vector<std::uint8_t> got(4096);
      rt.copy_to_host(got.data(), slot, got.size());
      if (got != std::vector<std::uint8_t>(4096, static_cast<std::uint8_t>(0xA0 + owner)))
        throw ApiError("read_owner", __FILE__, __LINE__, "DATA_MISMATCH",
                       "the owner's bytes changed after release");
    }));
    must(c.j.step("write_owner", owner, [&] {
      std::vector<std::uint8_t> v(64, static_cast<std::uint8_t>(me)), back(64);
      rt.copy_to_device(slot + 4096 + 64 * static_cast<std::size_t>(me), v.data(), v.size());
      rt.copy_to_host(back.data(), slot + 4096 + 64 * static_cast<std::size_t>(me), back.size());
      if (back != v)
        throw ApiError("write_owner", __FILE__, __LINE__, "DATA_MISMATCH", "write did not stick");
    }));
  }
  default_order(c, *w, true, true);
}

void s_no_barrier(Ctx& c) {
  auto w = make_window(c);
  writes_in_flight(c, *w, 8);
  default_order(c, *w, true, false);
}

void s_no_sync(Ctx& c) {
  auto w = make_window(c);
  writes_in_flight(c, *w, 8);
  default_order(c, *w, false, true);
}

void s_divergent_order(Ctx& c) {
  const int k = c.job.windows;
  std::vector<std::unique_ptr<Window>> ws;
  for (int i = 0; i < k; ++i) {
    ws.push_back(make_window(c, ("w" + std::to_string(i) + ".").c_str()));
    touch_peers(c, *ws.back());
  }
  must(c.j.step("barrier", -1, [&] { c.boot.barrier("divergent.start"); }));
  // Rank r frees window (r + i) mod K at its i-th turn, with no barrier between windows.
  for (int i = 0; i < k; ++i) {
    const int idx = (c.boot.rank() + i) % k;
    default_order(c, *ws[static_cast<std::size_t>(idx)], true, false, "w" + std::to_string(idx) + ".");
  }
}

void s_free_before_unmap(Ctx& c) {
  auto w = make_window(c);
  touch_peers(c, *w);
  must(c.j.step("sync_device", -1, [&] { w->sync_device(); }));
  must(c.j.step("barrier", -1, [&] { w->barrier(); }));
  // The address range is freed while every slot is still mapped: an API error is the documented answer.
  const StepStatus st = c.j.step("free_span", -1, [&] { w->free_span(); });
  // Then the right order, so the scenario returns what it took either way.
  unmap_slots(c, *w);
  release_slots(c, *w);
  finish_local(c, *w);
  if (!st.ok()) throw ApiError("free_span while mapped", __FILE__, __LINE__, st.error());
}

void s_cycles(Ctx& c) {
  for (int i = 0; i < c.job.cycles; ++i) {
    {
      auto w = make_window(c);
      touch_peers(c, *w);
      default_order(c, *w, true, true);
    }
    const auto live = c.rt.live_resources();
    c.j.cycle(i, count_open_fds(), live.handles, live.mappings, c.rt.mem_info().free_bytes);
  }
}

void s_leak(Ctx& c) {
  auto w = make_window(c);
  touch_peers(c, *w);
  (void)w.release();  // on purpose: no teardown at all, the baseline a leak check must catch
}

void s_atexit(Ctx& c) {
  // The window lives on a runtime of its own that is never destroyed, so that it still exists when the exit
  // hooks run (after MPI_Finalize): teardown without barrier, from an atexit hook.
  static Runtime* rt = nullptr;
  static Window* w = nullptr;
  static Journal* j = nullptr;
  std::string notice;
  rt = select_runtime(c.job.backend, &notice).release();
  rt->set_device(c.device);
  auto wo = c.wo;
  must(c.j.step("alloc", -1, [&] { w = new Window(*rt, wo); }));
  must(c.j.step("rendezvous", -1, [&] { w->rendezvous(c.boot); }));
  must(c.j.step("barrier", -1, [&] { w->barrier("atexit.ready"); }));
  j = &c.j;
  std::atexit([] {
    // No exception leaves an exit hook: a step's expired bound (journalled by the step) ends the rank with 4,
    // anything else with its code.
    auto step = [](const char* name, auto f) {
      try {
        j->step(name, -1, f);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "mori-teardown-repro: error (%s): %s\n", rank_tag().c_str(), e.what());
        std::fflush(stdout);
        const auto* err = dynamic_cast<const Error*>(&e);
        _exit(static_cast<int>(err ? err->code() : ExitCode::runtime));
      }
    };
    step("atexit.sync_device", [] { w->sync_device(); });
    for (int i = 0; i < w->team_size(); ++i) step("atexit.unmap_slot", [i] { w->unmap_slot(i); });
    for (int i = 0; i < w->team_size(); ++i) step("atexit.release_slot", [i] { w->release_slot(i); });
    step("atexit.unmap_local", [] { w->unmap_local(); });
    step("atexit.release_local", [] { w->release_local(); });
    step("atexit.free_span", [] { w->free_span(); });
    step("atexit.free_local", [] { w->free_local(); });
    j->end_scenario();
  });
}

const std::vector<Scenario>& scenarios() {
  using O = TeardownOutcome;
  static const std::vector<Scenario> v = {
      {{"ordered", O::ok,
        "the library's default order: sync, barrier, unmap each slot, release, unmap/release own, free"},
       s_ordered},
      {{"span-unmap", O::ok, "one unmap over the whole flat span instead of one per slot (ROCR#285)"},
       s_span_unmap},
      {{"release-before-unmap", O::ok, "release every imported handle while it is still mapped, then unmap"},
       s_release_before_unmap},
      {{"exporter-first", O::ok,
        "rank 0 unmaps and releases its own memory while peers map it; peers then read, write and check it"},
       s_exporter_first},
      {{"no-barrier", O::ok, "teardown with no barrier while peers may still be writing"}, s_no_barrier},
      {{"no-sync", O::ok, "teardown with no device sync while this rank's writes are in flight (a race)",
        true},
       s_no_sync},
      {{"divergent-order", O::ok, "K windows (--windows) freed in a different order on each rank"},
       s_divergent_order},
      {{"free-before-unmap", O::api_error,
        "free the span's address range while mapped: an API error is expected"},
       s_free_before_unmap},
      {{"cycles", O::ok, "--cycles C of alloc -> rendezvous -> teardown, fds/mappings/free memory per cycle"},
       s_cycles},
      {{"leak", O::leak, "no teardown at all: the baseline the leak check must catch"}, s_leak},
      {{"atexit", O::ok,
        "teardown from an atexit hook, after MPI_Finalize (summarize the journals after the job)"},
       s_atexit},
  };
  return v;
}

const Scenario* find(const std::string& name) {
  for (const auto& s : scenarios())
    if (name == s.info.name) return &s;
  return nullptr;
}

void run_scenario(Ctx& c, const Scenario& s) {
  auto& boot = c.boot;
  auto& rt = c.rt;
  const char* name = s.info.name;
  c.stream = rt.stream_create();
  boot.barrier(std::string("teardown.") + name + ".start");
  const int fds0 = count_open_fds();
  const auto live0 = rt.live_resources();
  const auto free0 = rt.mem_info().free_bytes;
  c.j.begin_scenario(name, boot.world());
  try {
    s.run(c);
  } catch (const TimeoutError&) {
    throw;  // a step's own bound expired: the rank ends now, naming it (run_teardown_job)
  } catch (const Error& e) {
    // The journal holds the failing step; resources still held are returned by the destructors.
    spdlog::info("scenario {}: {}", name, e.what());
  }
  rt.stream_destroy(c.stream);
  if (std::string(name) == "atexit") return;
  // A fault left by the scenario (a write into memory unmapped under it) is sticky and surfaces at the next
  // synchronisation: journaled as a step of its own, so the report names it instead of a lost rank.
  c.j.step("final_sync", -1, [&] { rt.device_sync(); });
  boot.barrier(std::string("teardown.") + name + ".end");
  const auto live1 = rt.live_resources();
  std::uint64_t free1 = free0;
  c.j.step("leak_check", -1, [&] { free1 = rt.mem_info().free_bytes; });
  const std::int64_t lost = rt.platform() == Platform::host
                                ? 0
                                : static_cast<std::int64_t>(free0) - static_cast<std::int64_t>(free1);
  // Device free memory moves a little with the other ranks' allocations: only more than half a window counts.
  c.j.leak(count_open_fds() - fds0, live1.handles - live0.handles, live1.mappings - live0.mappings,
           lost > static_cast<std::int64_t>(c.wo.bytes / 2) ? lost : 0);
  c.j.end_scenario();
}

// Clears the journal's report callback when the job's scope ends: the journal outlives it (the atexit
// scenario's hook runs after main), the callback refers to what the caller owns; a step of the hook that
// hangs is journalled and exits 4 unreported.
struct ForgetReport {
  Journal& j;
  ~ForgetReport() {
    try {
      j.on_step_expired(nullptr);
    } catch (...) {  // a mutex that cannot lock: nothing better to do in a destructor
    }
  }
};

}  // namespace

const std::vector<TeardownScenario>& teardown_scenarios() {
  static const std::vector<TeardownScenario> v = [] {
    std::vector<TeardownScenario> out;
    for (const auto& s : scenarios()) out.push_back(s.info);
    return out;
  }();
  return v;
}

const TeardownScenario* find_teardown_scenario(const std::string& name) {
  const Scenario* s = find(name);
  return s ? &s->info : nullptr;
}

bool outcome_as_expected(const TeardownScenario& s, TeardownOutcome o) noexcept {
  if (o == s.expected) return true;
  return s.race && s.expected == TeardownOutcome::ok &&
         (o == TeardownOutcome::api_error || o == TeardownOutcome::crash);
}

const char* expected_text(const TeardownScenario& s) noexcept {
  return s.race ? "ok|api_error|crash" : to_string(s.expected);
}

const char* expected_text(const ScenarioSummary& s) {
  const Scenario* sc = find(s.name);
  return sc ? expected_text(sc->info) : "?";
}

namespace {
bool judged_as_expected(const ScenarioSummary& s) {
  const Scenario* sc = find(s.name);
  return sc && outcome_as_expected(sc->info, s.outcome);
}
}  // namespace

int count_unexpected(const std::vector<ScenarioSummary>& scs) {
  int bad = 0;
  for (const auto& s : scs)
    if (s.outcome != TeardownOutcome::pending && !judged_as_expected(s)) ++bad;
  return bad;
}

Json scenarios_json(const std::vector<ScenarioSummary>& scs) {
  Json out = Json::array();
  for (const auto& s : scs) {
    Json j = to_json(s);
    const Scenario* sc = find(s.name);
    j["expected"] = sc ? to_string(sc->info.expected) : "?";
    j["race"] = sc && sc->info.race;
    j["as_expected"] = s.outcome == TeardownOutcome::pending ? Json(nullptr) : Json(judged_as_expected(s));
    out.push_back(j);
  }
  return out;
}

int teardown_windows_held(const std::string& scenario, int windows) noexcept {
  // Under "all", divergent-order's are gone when leak keeps its window and atexit makes one more.
  if (scenario == "all") return std::max(windows, 2);
  return scenario == "divergent-order" ? windows : 1;
}

int run_teardown_job(Runtime& rt, Bootstrap& boot, int device, const TeardownJob& job,
                     const std::function<void(const std::string& what)>& on_step_expired,
                     const std::function<int(const TeardownRun&)>& report) {
  std::vector<const Scenario*> todo;
  if (job.scenario == "all") {
    for (const auto& s : scenarios()) todo.push_back(&s);
  } else if (const Scenario* s = find(job.scenario)) {
    todo.push_back(s);
  } else {
    throw UsageError("--scenario: unknown '" + job.scenario + "'");
  }
  // The cheap doctor checks: errors are printed now, and a failing rendezvous prints the kept causes again.
  const auto dx = cheap_diagnoses(boot, &rt, device, teardown_windows_held(job.scenario, job.windows));
  if (boot.rank() == 0 && has_error(dx)) spdlog::warn("doctor:\n{}", format_diagnoses(dx));

  WindowOptions wo;
  wo.bytes = job.size_bytes;
  wo.handle_type = resolve_handle_type(rt, device, job.handle_type);
  wo.device = device;
  // Static, so that it outlives main for the atexit scenario's hook (constructed before the hook is
  // registered, hence destroyed after it runs).
  static std::unique_ptr<Journal> journal;
  journal = std::make_unique<Journal>(job.journal_dir, boot.rank(), boot.timeout_s());
  Journal& j = *journal;
  // A step that runs past the bound ends the rank from the watchdog's thread: the caller reports first.
  j.on_step_expired(on_step_expired);
  ForgetReport forget_report{j};
  try {
    for (const auto* s : todo) {
      if (boot.rank() == 0) spdlog::info("scenario {} ...", s->info.name);
      Ctx c{rt, boot, device, j, job, wo};
      run_scenario(c, *s);
    }
    boot.barrier("teardown.done");
    return report({wo.handle_type, gather_write_errors(boot, j)});
  } catch (const TimeoutError& e) {
    // A wait between steps ran past --timeout-s: the journal says so (an expired bound, not a crash); the
    // caller's tool writes the report of what happened (tool_main's bound_expired).
    j.bound_expired(e.what());
    throw;
  }
}

std::vector<ScenarioSummary> summarize_job(const TeardownJob& job, int world,
                                           const std::map<int, std::string>& write_errors) {
  std::vector<ScenarioSummary> scs = summarize_journals(job.journal_dir, write_errors);
  for (auto& sc : scs)
    if (sc.name == "atexit") {  // its teardown runs after this report: only --summarize can judge it
      sc.outcome = TeardownOutcome::pending;
      sc.detail = "teardown runs at exit; run --summarize " + job.journal_dir + " after the job";
    }
  // A scenario that ran while every journal was failing (a full file system) has no record anywhere: it keeps
  // its row, journal_error, naming the journals that could not be written (docs/mori-teardown-repro.md).
  std::string errors;
  for (const auto& [rank, err] : write_errors)
    errors += (errors.empty() ? "" : ", ") + ("rank " + std::to_string(rank) + " (" + err + ")");
  for (const auto& s : scenarios()) {
    const std::string name = s.info.name;
    if (job.scenario != "all" && job.scenario != name) continue;
    if (std::any_of(scs.begin(), scs.end(), [&](const ScenarioSummary& x) { return x.name == name; }))
      continue;
    scs.push_back({name, world, TeardownOutcome::journal_error,
                   "no journal holds a record of this scenario" +
                       (errors.empty()
                            ? std::string(": its outcome is unknown")
                            : "; journals that could not be written: " + errors + ": its outcome is unknown"),
                   Json::array()});
  }
  return scs;
}

}  // namespace mori::symm
