// mori-teardown-repro: which teardown order breaks, on which rank, at which step.
//
// Scenarios compose the window library's own teardown steps in other orders; every step is journaled per rank
// before it runs, so a crash still leaves a report (--summarize DIR).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>

#include "journal_dir.hpp"
#include "mori/symm/base/error.hpp"
#include "mori/symm/base/fds.hpp"
#include "mori/symm/base/log.hpp"
#include "mori/symm/base/report.hpp"
#include "mori/symm/base/units.hpp"
#include "mori/symm/bringup/environment.hpp"
#include "mori/symm/bringup/probe.hpp"
#include "mori/symm/teardown/journal.hpp"
#include "mori/symm/tool/tool.hpp"
#include "mori/symm/window/window.hpp"

using namespace mori::symm;

using teardown::claim_journal_dir;
using teardown::gather_write_errors;

namespace {

struct Options {
  std::string scenario = "ordered";
  bool list = false;
  int windows = 3;
  std::string size = "4M";
  std::string handle_type = "auto";
  int cycles = 10;
  std::string journal_dir;  // empty: a new per-job folder under teardown-journal/
  std::string summarize;
};

struct Ctx {
  ToolEnv& env;
  Journal& j;
  const Options& o;
  WindowOptions wo;
  Stream stream = nullptr;
};

using Run = void (*)(Ctx&);

struct Scenario {
  const char* name;
  TeardownOutcome expected;  // on a platform that behaves as the VMM API documents
  const char* line;
  Run run;
};

// --- building blocks: every one a journaled library step ---------------------------------------------------
std::unique_ptr<Window> make_window(Ctx& c, const char* tag = "") {
  std::unique_ptr<Window> w;
  auto st = c.j.step(std::string(tag) + "alloc", -1, [&] { w = std::make_unique<Window>(*c.env.rt, c.wo); });
  if (!st.ok()) throw CheckFailed("alloc failed: " + st.error());
  st = c.j.step(std::string(tag) + "rendezvous", -1, [&] { w->rendezvous(*c.env.boot); });
  if (!st.ok()) throw CheckFailed("rendezvous failed: " + st.error());
  return w;
}

// Every rank writes one page into every peer's slot, so the mappings are really used.
void touch_peers(Ctx& c, Window& w) {
  std::vector<std::uint8_t> page(4096, static_cast<std::uint8_t>(c.env.boot->rank() + 1));
  for (int p = 0; p < c.env.boot->world(); ++p) {
    void* dst = w.peer_ptrs()[static_cast<std::size_t>(p)];
    if (dst)
      c.env.rt->copy_to_device(
          static_cast<char*>(dst) + 4096 * static_cast<std::size_t>(c.env.boot->rank() % 16), page.data(),
          page.size());
  }
}

// Asynchronous writes into every peer's slot, left in flight (GPU) for the no-sync and no-barrier scenarios.
void writes_in_flight(Ctx& c, Window& w, int rounds) {
  for (int r = 0; r < rounds; ++r)
    for (int p = 0; p < c.env.boot->world(); ++p)
      if (void* dst = w.peer_ptrs()[static_cast<std::size_t>(p)])
        c.env.rt->memset_async(dst, static_cast<std::uint8_t>(r), w.layout().buffer_bytes, c.stream);
}

// Stops a scenario at its first failing step (the journal has recorded it).
void must(const StepStatus& status) {
  if (!status.ok()) throw ApiError("scenario step", __FILE__, __LINE__, status.error());
}

void unmap_slots(Ctx& c, Window& w, const std::string& tag = "") {
  for (int i = 0; i < w.team_size(); ++i)
    must(c.j.step(tag + "unmap_slot", c.env.boot->team()[static_cast<std::size_t>(i)],
                  [&] { w.unmap_slot(i); }));
}
void release_slots(Ctx& c, Window& w, const std::string& tag = "") {
  for (int i = 0; i < w.team_size(); ++i)
    must(c.j.step(tag + "release_slot", c.env.boot->team()[static_cast<std::size_t>(i)],
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
  auto& boot = *c.env.boot;
  auto& rt = *c.env.rt;
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
  const int k = c.o.windows;
  std::vector<std::unique_ptr<Window>> ws;
  for (int i = 0; i < k; ++i) {
    ws.push_back(make_window(c, ("w" + std::to_string(i) + ".").c_str()));
    touch_peers(c, *ws.back());
  }
  must(c.j.step("barrier", -1, [&] { c.env.boot->barrier("divergent.start"); }));
  // Rank r frees window (r + i) mod K at its i-th turn, with no barrier between windows.
  for (int i = 0; i < k; ++i) {
    const int idx = (c.env.boot->rank() + i) % k;
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
  for (int i = 0; i < c.o.cycles; ++i) {
    {
      auto w = make_window(c);
      touch_peers(c, *w);
      default_order(c, *w, true, true);
    }
    const auto live = c.env.rt->live_resources();
    c.j.cycle(i, count_open_fds(), live.handles, live.mappings, c.env.rt->mem_info().free_bytes);
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
  rt = select_runtime(parse_backend(c.env.common.backend), &notice).release();
  rt->set_device(c.env.device);
  auto wo = c.wo;
  must(c.j.step("alloc", -1, [&] { w = new Window(*rt, wo); }));
  must(c.j.step("rendezvous", -1, [&] { w->rendezvous(*c.env.boot); }));
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
      {"ordered", O::ok,
       "the library's default order: sync, barrier, unmap each slot, release, unmap/release own, free",
       s_ordered},
      {"span-unmap", O::ok, "one unmap over the whole flat span instead of one per slot (ROCR#285)",
       s_span_unmap},
      {"release-before-unmap", O::ok, "release every imported handle while it is still mapped, then unmap",
       s_release_before_unmap},
      {"exporter-first", O::ok,
       "rank 0 unmaps and releases its own memory while peers map it; peers then read, write and check it",
       s_exporter_first},
      {"no-barrier", O::ok, "teardown with no barrier while peers may still be writing", s_no_barrier},
      {"no-sync", O::ok, "teardown with no device sync while this rank's writes are in flight", s_no_sync},
      {"divergent-order", O::ok, "K windows (--windows) freed in a different order on each rank",
       s_divergent_order},
      {"free-before-unmap", O::api_error,
       "free the span's address range while mapped: an API error is expected", s_free_before_unmap},
      {"cycles", O::ok, "--cycles C of alloc -> rendezvous -> teardown, fds/mappings/free memory per cycle",
       s_cycles},
      {"leak", O::leak, "no teardown at all: the baseline the leak check must catch", s_leak},
      {"atexit", O::ok,
       "teardown from an atexit hook, after MPI_Finalize (summarize the journals after the job)", s_atexit},
  };
  return v;
}

const Scenario* find(const std::string& name) {
  for (const auto& s : scenarios())
    if (name == s.name) return &s;
  return nullptr;
}

void run_scenario(ToolEnv& env, Journal& j, const Options& o, const Scenario& s, const WindowOptions& wo) {
  auto& boot = *env.boot;
  auto& rt = *env.rt;
  Ctx c{env, j, o, wo};
  c.stream = rt.stream_create();
  boot.barrier(std::string("teardown.") + s.name + ".start");
  const int fds0 = count_open_fds();
  const auto live0 = rt.live_resources();
  const auto free0 = rt.mem_info().free_bytes;
  j.begin_scenario(s.name, boot.world());
  try {
    s.run(c);
  } catch (const TimeoutError&) {
    throw;  // a step's own bound expired: the rank ends now, naming it (run_in)
  } catch (const Error& e) {
    // The journal holds the failing step; resources still held are returned by the destructors.
    spdlog::info("scenario {}: {}", s.name, e.what());
  }
  rt.stream_destroy(c.stream);
  if (std::string(s.name) != "atexit") {
    // A fault left by the scenario (a write into memory unmapped under it) is sticky and surfaces at the next
    // synchronisation: journaled as a step of its own, so the report names it instead of a lost rank.
    j.step("final_sync", -1, [&] { rt.device_sync(); });
    boot.barrier(std::string("teardown.") + s.name + ".end");
    const auto live1 = rt.live_resources();
    std::uint64_t free1 = free0;
    j.step("leak_check", -1, [&] { free1 = rt.mem_info().free_bytes; });
    const std::int64_t lost = rt.platform() == Platform::host
                                  ? 0
                                  : static_cast<std::int64_t>(free0) - static_cast<std::int64_t>(free1);
    // Device free memory moves a little with the other ranks' allocations: only more than half a window
    // counts.
    j.leak(count_open_fds() - fds0, live1.handles - live0.handles, live1.mappings - live0.mappings,
           lost > static_cast<std::int64_t>(wo.bytes / 2) ? lost : 0);
    j.end_scenario();
  }
}

// A scenario's expected outcome as the report writes it: "?" for a name this tool does not know.
const char* expected_text(const ScenarioSummary& s) {
  const Scenario* sc = find(s.name);
  return sc ? to_string(sc->expected) : "?";
}

void print_table(const std::vector<ScenarioSummary>& scs) {
  std::printf("%-22s %5s %-10s %-10s %s\n", "scenario", "world", "outcome", "expected", "detail");
  for (const auto& s : scs)
    std::printf("%-22s %5d %-10s %-10s %s\n", s.name.c_str(), s.world, to_string(s.outcome), expected_text(s),
                s.detail.c_str());
}

// Adds scenarios[] (each with its expected outcome) to doc, prints the table and writes the document. Returns
// the exit code: check_failed where an outcome differs from the expected one (a pending one is not judged).
// writer: this rank prints the table and writes the document (rank 0; after an expired bound, any rank whose
// bound expired writes the file, since mpirun may end rank 0 before its own bound expires).
int finish_report(ToolEnv& env, Json& doc, const std::vector<ScenarioSummary>& scs, bool writer) {
  int bad = 0;
  doc["scenarios"] = Json::array();
  for (const auto& s : scs) {
    const Scenario* sc = find(s.name);
    if (s.outcome != TeardownOutcome::pending && (!sc || s.outcome != sc->expected)) ++bad;
    Json j = to_json(s);
    j["expected"] = expected_text(s);
    doc["scenarios"].push_back(j);
  }
  if (writer) {
    int world_rank = 0;  // not env.is_root(): after an expired bound the bootstrap may not exist
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    if (env.common.json != "-" && world_rank == 0) print_table(scs);
    if (!env.common.json.empty() && (env.common.json != "-" || world_rank == 0))
      write_json(env.common.json, doc);
  }
  return bad ? static_cast<int>(ExitCode::check_failed) : 0;
}

// --summarize DIR: the report of an earlier run's journals.
int summarize_only(ToolEnv& env, const Options& o) {
  Json doc;
  doc["schema"] = "mori.teardown/1";
  doc["meta"] = make_meta(env, "");
  doc["config"] = {{"summarize", o.summarize}};
  return finish_report(env, doc, summarize_journals(o.summarize), env.is_root());
}

int report(ToolEnv& env, const Options& o, const WindowOptions& wo,
           const std::map<int, std::string>& write_errors) {
  Json doc;
  doc["schema"] = "mori.teardown/1";
  doc["meta"] = make_meta(env, to_string(wo.handle_type));
  doc["config"] = {{"scenario", o.scenario},       {"windows", o.windows},
                   {"size_bytes", wo.bytes},       {"cycles", o.cycles},
                   {"journal_dir", o.journal_dir}, {"timeout_s", env.common.timeout_s}};
  // Rank 0 alone reads the journals (world journals of world-sized steps each) and says the verdict to the
  // others: every rank reading all of them was O(world^2) work per rank.
  std::vector<ScenarioSummary> scs;
  if (env.is_root()) scs = summarize_journals(o.journal_dir, write_errors);
  if (!write_errors.empty()) {
    Json je = Json::array();
    std::string list;
    for (const auto& [r, e] : write_errors) {
      je.push_back({{"rank", r}, {"error", e}});
      list += (list.empty() ? "" : ", ") + ("rank " + std::to_string(r) + " (" + e + ")");
    }
    doc["journal_errors"] = je;
    if (env.is_root())
      spdlog::error("journals that could not be written: {}; the verdicts of those ranks are unknown", list);
  }
  for (auto& sc : scs)
    if (sc.name == "atexit") {  // its teardown runs after this report: only --summarize can judge it
      sc.outcome = TeardownOutcome::pending;
      sc.detail = "teardown runs at exit; run --summarize " + o.journal_dir + " after the job";
    }
  std::uint8_t code = static_cast<std::uint8_t>(finish_report(env, doc, scs, env.is_root()));
  env.boot->broadcast("teardown.verdict", &code, 1, 0);
  return code;
}

// Whether this job claimed its journal folder: only then are the journals there its own.
std::string g_claimed_journal_dir;  // the folder this job claimed (run), "" before

// The report of a rank whose bound expired, wherever (the bootstrap included): no collective (its peers may
// be gone), this rank's meta, this job's journals as they are now (none before it claimed the folder), and
// bound_expired naming the wait. The exit code stays 4 (docs/mori-teardown-repro.md).
void report_expired_bound(ToolEnv& env, const Options& o, const std::string& what) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (!o.summarize.empty()) return;
  Json doc;
  doc["schema"] = "mori.teardown/1";
  doc["meta"] = make_meta(env, "", false);
  doc["config"] = {{"scenario", o.scenario},
                   {"windows", o.windows},
                   {"size", o.size},
                   {"cycles", o.cycles},
                   {"journal_dir", g_claimed_journal_dir.empty() ? o.journal_dir : g_claimed_journal_dir},
                   {"timeout_s", env.common.timeout_s}};
  doc["bound_expired"] = {{"rank", rank}, {"what", what}};
  std::vector<ScenarioSummary> scs;
  // A bound that expired before any rank began its journal (the bootstrap, the doctor's exchange) leaves a
  // claimed folder without journals: the report is still written, saying so.
  if (!g_claimed_journal_dir.empty()) {
    try {
      scs = summarize_journals(g_claimed_journal_dir);
    } catch (const Error& e) {
      doc["bound_expired"]["journals"] = e.what();
    }
  }
  (void)finish_report(env, doc, scs, true);
}

// The scenarios of one job, journaled under o.journal_dir (claimed by run).
int run_in(ToolEnv& env, const Options& o) {
  auto& boot = *env.boot;
  // The cheap doctor checks: errors are printed now, and a failing rendezvous prints the kept causes again.
  const auto dx = cheap_diagnoses(boot, env.rt.get(), env.device, o.windows);
  if (env.is_root() && has_error(dx)) spdlog::warn("doctor:\n{}", format_diagnoses(dx));

  WindowOptions wo;
  wo.bytes = parse_size("--size", o.size);
  wo.handle_type =
      o.handle_type == "auto" ? choose_handle_type(*env.rt, env.device) : parse_handle_type(o.handle_type);
  wo.device = env.device;
  // Static, so that it outlives main for the atexit scenario's hook (constructed before the hook is
  // registered, hence destroyed after it runs).
  static std::unique_ptr<Journal> journal;
  journal = std::make_unique<Journal>(o.journal_dir, boot.rank(), env.common.timeout_s);
  Journal& j = *journal;
  // A step that runs past the bound ends the rank from the watchdog's thread: rank 0 writes the report first.
  j.on_step_expired([&env, &o](const std::string& what) { report_expired_bound(env, o, what); });
  // The journal outlives this function (the atexit scenario's hook runs after main): the report callback
  // refers to env and o, so it goes when they do; a step of the hook that hangs is journalled and exits 4
  // unreported.
  struct ForgetReport {
    Journal& j;
    ~ForgetReport() {
      try {
        j.on_step_expired(nullptr);
      } catch (...) {  // a mutex that cannot lock: nothing better to do in a destructor
      }
    }
  } forget_report{j};
  std::vector<const Scenario*> todo;
  if (o.scenario == "all") {
    for (const auto& s : scenarios()) todo.push_back(&s);
  } else {
    todo.push_back(find(o.scenario));
  }
  try {
    for (const auto* s : todo) {
      if (env.is_root()) spdlog::info("scenario {} ...", s->name);
      run_scenario(env, j, o, *s, wo);
    }
    boot.barrier("teardown.done");
    return report(env, o, wo, gather_write_errors(boot, j));
  } catch (const TimeoutError& e) {
    // A wait between steps ran past --timeout-s: the journal says so (an expired bound, not a crash); rank 0
    // writes the report (report_expired_bound, through tool_main).
    j.bound_expired(e.what());
    throw;
  }
}

// --summarize, or a job: its journal folder claimed (a new one per job by default), then the scenarios.
int run(ToolEnv& env, const Options& o) {
  if (!o.summarize.empty()) return summarize_only(env, o);
  auto& boot = *env.boot;
  Options oj = o;
  oj.journal_dir = claim_journal_dir(boot, o.journal_dir);
  g_claimed_journal_dir = oj.journal_dir;
  if (env.is_root()) spdlog::info("journals in {}", oj.journal_dir);
  return run_in(env, oj);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  ToolSpec spec;
  spec.name = "mori-teardown-repro";
  spec.description = "Runs symmetric-window teardown orders on purpose and reports which break, where.";
  spec.declare = [&](CLI::App& app) {
    app.add_flag("--list", o.list, "List the scenarios, one line each");
    app.add_option("--scenario", o.scenario, "A scenario name or 'all'")->capture_default_str();
    app.add_option("--windows", o.windows, "Windows for divergent-order")->capture_default_str();
    app.add_option("--size", o.size, "Window size per rank (K/M/G suffixes)")->capture_default_str();
    app.add_option("--handle-type", o.handle_type, "auto | posix_fd | fabric")->capture_default_str();
    app.add_option("--cycles", o.cycles, "Cycles for the cycles scenario")->capture_default_str();
    app.add_option("--journal-dir", o.journal_dir,
                   "Folder for the per-rank journals (must hold none yet; default: a new folder "
                   "teardown-journal/job-<UTC time>-<pid>/ for each job)");
    app.add_option("--summarize", o.summarize, "Build the report from the journals in DIR (after a crash)");
  };
  spec.validate = [&] {
    if (o.list) {
      int rank = 0;
      MPI_Comm_rank(MPI_COMM_WORLD, &rank);
      if (rank == 0)
        for (const auto& s : scenarios())
          std::printf("%-22s %s (expected: %s)\n", s.name, s.line, to_string(s.expected));
      throw CLI::Success();
    }
    if (o.scenario != "all" && !find(o.scenario)) {
      std::string names;
      for (const auto& s : scenarios()) names += std::string(names.empty() ? "" : ", ") + s.name;
      throw UsageError("--scenario: unknown '" + o.scenario + "' (accepted: all, " + names + ")");
    }
    if (o.windows < 1 || o.windows > 64) throw UsageError("--windows: must be in 1..64");
    if (o.cycles < 1 || o.cycles > 100000) throw UsageError("--cycles: must be in 1..100000");
    const auto size = parse_size("--size", o.size);
    if (size == 0 || size > (std::size_t{1} << 36)) throw UsageError("--size: must be in 1 byte..64 GiB");
    if (o.handle_type != "auto") parse_handle_type(o.handle_type);
  };
  spec.body = [&](ToolEnv& env) { return run(env, o); };
  spec.bound_expired = [&](ToolEnv& env, const std::string& what) { report_expired_bound(env, o, what); };
  return tool_main(argc, argv, spec);
}
