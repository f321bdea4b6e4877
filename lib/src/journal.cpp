#include "mori/symm/journal.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "mori/symm/detail/fault.hpp"
#include "mori/symm/error.hpp"
#include "mori/symm/log.hpp"

namespace mori::symm {
namespace {

using Clock = std::chrono::steady_clock;

// The signal handler's view: one journal per process.
int g_journal_fd = -1;

// The current scenario's name, shared with the watchdog thread and the fatal-signal handler: lock-free
// atomics, so reading it is async-signal-safe and never a data race (a reader racing a new scenario may see a
// mix of the two names).
class SharedName {
 public:
  static constexpr std::size_t kCapacity = 128;
  static_assert(std::atomic<char>::is_always_lock_free);

  void set(const std::string& name) noexcept {
    const std::size_t n = std::min(name.size(), kCapacity - 1);
    for (std::size_t i = 0; i < n; ++i) chars_[i].store(name[i], std::memory_order_relaxed);
    chars_[n].store('\0', std::memory_order_release);
  }
  // Copies the name into buf (kCapacity bytes, NUL-terminated); returns its length.
  std::size_t get(char* buf) const noexcept {
    std::size_t n = 0;
    while (n < kCapacity - 1) {
      const char c = chars_[n].load(std::memory_order_acquire);
      if (c == '\0') break;
      buf[n++] = c;
    }
    buf[n] = '\0';
    return n;
  }
  std::string get() const {
    char buf[kCapacity];
    return std::string(buf, get(buf));
  }

 private:
  std::atomic<char> chars_[kCapacity] = {};
};
SharedName g_scenario;

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

// Returns 0, or the errno of the failed write (async-signal-safe: the fatal-signal handler uses it too).
int write_all(int fd, const char* s, std::size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, s, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return errno;
    if (w == 0) return EIO;
    s += w;
    n -= static_cast<std::size_t>(w);
  }
  return 0;
}

extern "C" void on_fatal_signal(int sig) {
  if (g_journal_fd >= 0) {
    const char* name = sig == SIGSEGV   ? "SIGSEGV"
                       : sig == SIGBUS  ? "SIGBUS"
                       : sig == SIGABRT ? "SIGABRT"
                                        : "SIGNAL";
    write_all(g_journal_fd, "S\t", 2);
    char scenario[SharedName::kCapacity];
    write_all(g_journal_fd, scenario, g_scenario.get(scenario));
    write_all(g_journal_fd, "\t", 1);
    write_all(g_journal_fd, name, std::strlen(name));
    write_all(g_journal_fd, "\n", 1);
    fsync(g_journal_fd);
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

}  // namespace

Journal::Journal(const std::string& dir, int rank, double step_bound_s)
    : rank_(rank), bound_s_(step_bound_s) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw UsageError("--journal-dir: cannot create '" + dir + "': " + ec.message());
  path_ = dir + "/rank-" + std::to_string(rank) + ".journal";
  // O_EXCL: a journal is this job's alone; a second job on the same folder cannot interleave with it.
  fd_ = open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0 && errno == EEXIST)
    throw UsageError("--journal-dir: '" + path_ + "' already exists (another job on the same folder?)");
  if (fd_ < 0) throw ApiError("open(" + path_ + ")", __FILE__, __LINE__, errno_name(errno));
  spdlog::debug("teardown journal: {} (step bound {} s)", path_, format_seconds(bound_s_));
  g_journal_fd = fd_;
  struct sigaction sa {};
  sa.sa_handler = on_fatal_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESETHAND;
  for (int sig : {SIGSEGV, SIGBUS, SIGABRT}) sigaction(sig, &sa, nullptr);
  watchdog_ = std::thread([this] { watchdog(); });
}

Journal::~Journal() {
  stop_ = true;
  if (watchdog_.joinable()) watchdog_.join();
  // The fd stays open while atexit hooks may still write; the handler keeps pointing at it.
}

void Journal::line(const std::string& s) {
  std::string l = s + "\n";
  std::lock_guard<std::mutex> lock(mu_);
  if (!write_error_.empty()) return;  // the journal ends at its first failed write, said once
  int err = 0;
  if (detail::fault_armed("journal.full", rank_) && lines_ >= 40) {
    // Test-only: a file system that fills up in the middle of a line.
    (void)write_all(fd_, l.data(), l.size() / 2);
    err = ENOSPC;
  } else {
    err = write_all(fd_, l.data(), l.size());
    if (!err && fdatasync(fd_) != 0) err = errno;
  }
  if (err) {
    write_error_ = errno_name(err);
    spdlog::error(
        "teardown journal {}: write failed ({}) after {} line(s); this rank's verdicts are incomplete", path_,
        write_error_, lines_);
    return;
  }
  ++lines_;
}

std::string Journal::write_error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return write_error_;
}

void Journal::watchdog() {
  while (!stop_) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const std::int64_t started = step_started_ns_.load();
    if (started && static_cast<double>(now_ns() - started) * 1e-9 > bound_s_) {
      line("H\t" + g_scenario.get() + "\tstep ran past " + std::to_string(bound_s_) + " s");
      spdlog::error("teardown journal: a step ran past {} s; ending this rank with exit code 4", bound_s_);
      _exit(static_cast<int>(ExitCode::timeout));
    }
  }
}

void Journal::begin_scenario(const std::string& scenario, int world) {
  scenario_ = scenario;
  g_scenario.set(scenario);
  line("O\t" + scenario + "\t" + std::to_string(world));
}

void Journal::end_scenario() {
  line("D\t" + scenario_);
}

std::string Journal::step(const std::string& name, int peer, const std::function<void()>& f) {
  line("B\t" + scenario_ + "\t" + name + "\t" + std::to_string(peer));
  if (detail::fault_armed(("teardown." + name + ".crash").c_str(), rank_)) raise(SIGSEGV);
  const auto t0 = Clock::now();
  step_started_ns_ = now_ns();
  detail::fault_point(("teardown." + name + ".hang").c_str(), rank_);  // test-only: never returns when armed
  std::string status = "ok";
  try {
    f();
  } catch (const ApiError& e) {
    status = e.api_error();
  } catch (const TimeoutError& e) {
    status = "TIMEOUT";
  }
  step_started_ns_ = 0;
  const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.1f", us);
  line("E\t" + scenario_ + "\t" + name + "\t" + std::to_string(peer) + "\t" + status + "\t" + buf);
  return status;
}

void Journal::leak(std::int64_t fds, std::int64_t handles, std::int64_t mappings, std::int64_t device_bytes) {
  line("L\t" + scenario_ + "\t" + std::to_string(fds) + "\t" + std::to_string(handles) + "\t" +
       std::to_string(mappings) + "\t" + std::to_string(device_bytes));
}

void Journal::cycle(int c, std::int64_t fds, std::int64_t handles, std::int64_t mappings,
                    std::uint64_t free_bytes) {
  line("C\t" + scenario_ + "\t" + std::to_string(c) + "\t" + std::to_string(fds) + "\t" +
       std::to_string(handles) + "\t" + std::to_string(mappings) + "\t" + std::to_string(free_bytes));
}

namespace {

std::vector<std::string> split_tabs(const std::string& l) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (true) {
    auto t = l.find('\t', pos);
    out.push_back(l.substr(pos, t == std::string::npos ? std::string::npos : t - pos));
    if (t == std::string::npos) break;
    pos = t + 1;
  }
  return out;
}

// Which rank's outcome speaks for the scenario: a rank killed because the job was aborted (a crash without a
// signal of its own) says less than the rank that hung or took the signal; a journal that cannot be read or
// was not written says the most, since nothing else about that rank can be trusted.
int severity(const std::string& outcome, bool own_signal) {
  static const std::map<std::string, int> order = {{"ok", 0},   {"leak", 1},    {"api_error", 2},
                                                   {"hang", 4}, {"damaged", 7}, {"journal_error", 7}};
  if (outcome == "crash") return own_signal ? 5 : 3;
  auto it = order.find(outcome);
  return it == order.end() ? 6 : it->second;
}

struct RankScenario {
  Json steps = Json::array();
  std::string open_step;  // begun, not ended
  int open_peer = -1;
  int begun = 0;  // steps begun: how far the rank got
  std::string signal, hang, first_error, first_error_step, damaged;
  bool done = false;
  Json leaked = {{"fds", 0}, {"handles", 0}, {"mappings", 0}, {"device_bytes", 0}};
  bool leak = false;
  Json cycles = Json::array();
};

template <class T>
bool parse_num(const std::string& s, T& out) {
  const auto r = std::from_chars(s.data(), s.data() + s.size(), out);
  return r.ec == std::errc() && r.ptr == s.data() + s.size() && !s.empty();
}

bool parse_double(const std::string& s, double& out) {
  if (s.empty()) return false;
  char* end = nullptr;
  out = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size();
}

// Fields per record kind (at least; H carries a free-text reason).
const std::map<std::string, std::size_t>& record_fields() {
  static const std::map<std::string, std::size_t> m = {{"O", 3}, {"B", 4}, {"E", 6}, {"S", 3},
                                                       {"H", 2}, {"L", 6}, {"C", 7}, {"D", 2}};
  return m;
}

// Applies one record of a started scenario (B, E, S, H, L, C, D) to its rank's state; false on a malformed
// number.
bool apply_record(RankScenario& rs, const std::vector<std::string>& f) {
  const std::string& kind = f[0];
  bool ok = true;
  if (kind == "B") {
    ok = parse_num(f[3], rs.open_peer);
    rs.open_step = f[2];
    ++rs.begun;
  } else if (kind == "E") {
    int peer = 0;
    double us = 0;
    ok = parse_num(f[3], peer) && parse_double(f[5], us);
    Json st = {{"step", f[2]}, {"status", f[4]}, {"us", us}};
    if (peer >= 0) st["peer"] = peer;
    rs.steps.push_back(st);
    rs.open_step.clear();
    if (f[4] != "ok" && rs.first_error.empty()) {
      rs.first_error = f[4];
      rs.first_error_step = f[2];
    }
  } else if (kind == "S") {
    rs.signal = f[2];
  } else if (kind == "H") {
    rs.hang = rs.open_step.empty() ? "?" : rs.open_step;
  } else if (kind == "L") {
    std::int64_t v[4] = {};
    for (int i = 0; i < 4 && ok; ++i) ok = parse_num(f[static_cast<std::size_t>(2 + i)], v[i]);
    rs.leaked = {{"fds", v[0]}, {"handles", v[1]}, {"mappings", v[2]}, {"device_bytes", v[3]}};
    rs.leak = v[0] > 0 || v[1] > 0 || v[2] > 0 || v[3] > 0;
  } else if (kind == "C") {
    int cyc = 0;
    std::int64_t v[3] = {};
    std::uint64_t free_bytes = 0;
    ok = parse_num(f[2], cyc) && parse_num(f[3], v[0]) && parse_num(f[4], v[1]) && parse_num(f[5], v[2]) &&
         parse_num(f[6], free_bytes);
    rs.cycles.push_back(
        {{"cycle", cyc}, {"fds", v[0]}, {"handles", v[1]}, {"mappings", v[2]}, {"free_bytes", free_bytes}});
  } else if (kind == "D") {
    rs.done = true;
  }
  return ok;
}

// Every rank's journals of a folder: scenario -> rank -> state; scenario order as first seen; world per
// scenario; damage before any scenario (rank, what).
struct JournalSet {
  std::string dir;
  std::map<std::string, std::map<int, RankScenario>> all;
  std::vector<std::string> order;
  std::map<std::string, int> world;
  std::vector<std::pair<int, std::string>> unattached;

  // Reads one rank's journal text; returns the number of lines read. Stops at the first damaged line.
  int read(const std::string& name, int rank, const std::string& text) {
    std::string current;  // the scenario this rank's journal is in
    std::size_t pos = 0;
    int lineno = 0;
    auto damage = [&](const std::string& why) {
      const std::string what = name + " line " + std::to_string(lineno) + ": " + why;
      spdlog::warn("teardown journal {}/{}", dir, what);
      if (!current.empty())
        all[current][rank].damaged = what;
      else
        unattached.emplace_back(rank, what);
    };
    while (pos < text.size()) {
      ++lineno;
      const std::size_t nl = text.find('\n', pos);
      if (nl == std::string::npos) {
        damage("truncated line (no end of line)");
        break;
      }
      const auto f = split_tabs(text.substr(pos, nl - pos));
      pos = nl + 1;
      const auto kind_it = record_fields().find(f[0]);
      if (kind_it == record_fields().end()) {
        damage("unknown record");
        break;
      }
      if (f.size() < kind_it->second) {
        damage("record '" + f[0] + "' has " + std::to_string(f.size()) + " field(s), needs " +
               std::to_string(kind_it->second));
        break;
      }
      const std::string& sc = f[1];
      if (f[0] == "O") {
        int w = 0;
        if (!parse_num(f[2], w) || w < 1) {
          damage("malformed world '" + f[2] + "'");
          break;
        }
        if (!all.count(sc)) order.push_back(sc);
        world[sc] = w;
        all[sc][rank] = RankScenario{};
        current = sc;
        continue;
      }
      if (!all.count(sc) || !all[sc].count(rank)) {
        damage("record for scenario '" + sc + "' before its start");
        break;
      }
      current = sc;
      if (!apply_record(all[sc][rank], f)) {
        damage("malformed number in record '" + f[0] + "'");
        break;
      }
    }
    return lineno;
  }
};

// A rank's outcome in a scenario and why; a rank that ended without finishing is added to `unfinished`.
std::pair<std::string, std::string> rank_outcome(int rank, const RankScenario& rs,
                                                 const std::map<int, std::string>& write_errors,
                                                 std::vector<std::pair<int, int>>& unfinished) {
  const std::string r = std::to_string(rank);
  const auto werr = write_errors.find(rank);
  if (werr != write_errors.end() && !rs.done)
    return {"journal_error",
            "rank " + r + "'s journal could not be written (" + werr->second + "): its outcome is unknown"};
  if (!rs.damaged.empty()) return {"damaged", "journal damaged: " + rs.damaged};
  if (!rs.signal.empty())
    return {"crash", rs.signal + " on rank " + r + " in step " + (rs.open_step.empty() ? "?" : rs.open_step)};
  if (!rs.hang.empty()) return {"hang", "rank " + r + " hung in step " + rs.hang};
  if (!rs.done) {
    unfinished.emplace_back(rs.begun, rank);
    return {"crash",
            "rank " + r + " ended without finishing" +
                (rs.open_step.empty() ? std::string(" (killed with the job?)") : " in step " + rs.open_step)};
  }
  if (!rs.first_error.empty())
    return {"api_error", rs.first_error_step + " -> " + rs.first_error + " on rank " + r};
  if (rs.leak) return {"leak", "rank " + r + " did not return " + rs.leaked.dump()};
  return {"ok", ""};
}

// Ranks that ended without a signal of their own: every one is named, the one whose journal stops first
// (fewest steps begun) leading, since the others were most likely waiting for it when the job ended.
std::string unfinished_detail(std::vector<std::pair<int, int>> unfinished,
                              std::map<int, RankScenario>& ranks) {
  std::sort(unfinished.begin(), unfinished.end());
  const bool first_alone = unfinished.size() == 1 || unfinished[0].first < unfinished[1].first;
  std::string detail = "ended without finishing:";
  for (std::size_t i = 0; i < unfinished.size(); ++i) {
    const auto& rs = ranks[unfinished[i].second];
    detail += std::string(i ? "," : "") + " rank " + std::to_string(unfinished[i].second) +
              (rs.open_step.empty() ? " (between steps)" : " in step " + rs.open_step) +
              (i == 0 && first_alone && unfinished.size() > 1 ? " (its journal stops first)" : "");
  }
  return detail;
}

Json scenario_json(const std::string& sc, int world, std::map<int, RankScenario>& ranks_state,
                   const std::map<int, std::string>& write_errors) {
  // A rank whose journal could not be written may have no record of this scenario at all.
  for (const auto& [rank, err] : write_errors)
    if (!ranks_state.count(rank)) ranks_state[rank] = RankScenario{};
  Json ranks = Json::array();
  std::string outcome = "ok", detail;
  int worst = 0;
  std::vector<std::pair<int, int>> unfinished;  // (steps begun, rank) of ranks that ended without finishing
  for (auto& [rank, rs] : ranks_state) {
    const auto [o, d] = rank_outcome(rank, rs, write_errors, unfinished);
    Json r = {{"rank", rank}, {"outcome", o}, {"steps", rs.steps}, {"leaked", rs.leaked}};
    if (!d.empty()) r["detail"] = d;
    if (!rs.cycles.empty()) r["cycles"] = rs.cycles;
    ranks.push_back(r);
    if (severity(o, !rs.signal.empty()) > worst) {
      worst = severity(o, !rs.signal.empty());
      outcome = o;
      detail = d;
    }
  }
  if (worst == severity("crash", false) && !unfinished.empty())
    detail = unfinished_detail(unfinished, ranks_state);
  Json s = {{"name", sc}, {"world", world}, {"outcome", outcome}};
  if (!detail.empty()) s["detail"] = detail;
  s["ranks"] = ranks;
  return s;
}

Json damaged_journal_json(int rank, const std::string& what) {
  Json r = {{"rank", rank},
            {"outcome", "damaged"},
            {"steps", Json::array()},
            {"leaked", {{"fds", 0}, {"handles", 0}, {"mappings", 0}, {"device_bytes", 0}}},
            {"detail", what}};
  return {{"name", "(damaged journal)"},
          {"world", 0},
          {"outcome", "damaged"},
          {"detail", "journal damaged: " + what},
          {"ranks", Json::array({r})}};
}

}  // namespace

Json summarize_journals(const std::string& dir, const std::map<int, std::string>& write_errors) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw UsageError("--summarize: '" + dir + "' is not a folder");
  JournalSet set;
  set.dir = dir;
  int journals = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("rank-", 0) != 0 || entry.path().extension() != ".journal") continue;
    int rank = 0;
    if (!parse_num(name.substr(5, name.size() - 5 - 8), rank) || rank < 0) continue;
    ++journals;
    std::ifstream in(entry.path(), std::ios::binary);
    if (!in) throw ApiError("open(" + entry.path().string() + ")", __FILE__, __LINE__, errno_name(errno));
    std::stringstream ss;
    ss << in.rdbuf();
    if (set.read(name, rank, ss.str()) == 0) set.unattached.emplace_back(rank, name + ": empty journal");
  }
  if (journals == 0) throw UsageError("--summarize: no rank-*.journal files in '" + dir + "'");

  Json scenarios = Json::array();
  for (const auto& [rank, what] : set.unattached) scenarios.push_back(damaged_journal_json(rank, what));
  for (const auto& sc : set.order)
    scenarios.push_back(scenario_json(sc, set.world[sc], set.all[sc], write_errors));
  return scenarios;
}

}  // namespace mori::symm
