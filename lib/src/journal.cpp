#include "mori/symm/journal.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "mori/symm/detail/fault.hpp"
#include "mori/symm/error.hpp"
#include "mori/symm/log.hpp"

namespace mori::symm {
namespace {

using Clock = std::chrono::steady_clock;

// The signal handler's view: one journal per process.
int g_journal_fd = -1;
char g_scenario[128] = {};

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

void write_all(int fd, const char* s, std::size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, s, n);
    if (w <= 0) {
      if (w < 0 && errno == EINTR) continue;
      return;
    }
    s += w;
    n -= static_cast<std::size_t>(w);
  }
}

extern "C" void on_fatal_signal(int sig) {
  if (g_journal_fd >= 0) {
    const char* name = sig == SIGSEGV   ? "SIGSEGV"
                       : sig == SIGBUS  ? "SIGBUS"
                       : sig == SIGABRT ? "SIGABRT"
                                        : "SIGNAL";
    write_all(g_journal_fd, "S\t", 2);
    write_all(g_journal_fd, g_scenario, std::strlen(g_scenario));
    write_all(g_journal_fd, "\t", 1);
    write_all(g_journal_fd, name, std::strlen(name));
    write_all(g_journal_fd, "\n", 1);
    fsync(g_journal_fd);
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

}  // namespace

int count_open_fds() {
  int n = 0;
  DIR* d = opendir("/proc/self/fd");
  if (!d) return -1;
  while (readdir(d)) ++n;
  closedir(d);
  return n - 3;  // ".", ".." and the DIR's own fd
}

Journal::Journal(const std::string& dir, int rank, double step_bound_s)
    : rank_(rank), bound_s_(step_bound_s) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw UsageError("--journal-dir: cannot create '" + dir + "': " + ec.message());
  path_ = dir + "/rank-" + std::to_string(rank) + ".journal";
  fd_ = open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) throw ApiError("open(" + path_ + ")", __FILE__, __LINE__, errno_name(errno));
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
  write_all(fd_, l.data(), l.size());
  fdatasync(fd_);
}

void Journal::watchdog() {
  while (!stop_) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const std::int64_t started = step_started_ns_.load();
    if (started && static_cast<double>(now_ns() - started) * 1e-9 > bound_s_) {
      line("H\t" + std::string(g_scenario) + "\tstep ran past " + std::to_string(bound_s_) + " s");
      spdlog::error("teardown journal: a step ran past {} s; ending this rank with exit code 4", bound_s_);
      _exit(static_cast<int>(ExitCode::timeout));
    }
  }
}

void Journal::begin_scenario(const std::string& scenario, int world) {
  scenario_ = scenario;
  std::strncpy(g_scenario, scenario.c_str(), sizeof(g_scenario) - 1);
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
// signal of its own) says less than the rank that hung or took the signal.
int severity(const std::string& outcome, bool own_signal) {
  static const std::map<std::string, int> order = {{"ok", 0}, {"leak", 1}, {"api_error", 2}, {"hang", 4}};
  if (outcome == "crash") return own_signal ? 5 : 3;
  auto it = order.find(outcome);
  return it == order.end() ? 6 : it->second;
}

struct RankScenario {
  Json steps = Json::array();
  std::string open_step;  // begun, not ended
  int open_peer = -1;
  std::string signal, hang, first_error, first_error_step;
  bool done = false;
  Json leaked = {{"fds", 0}, {"handles", 0}, {"mappings", 0}, {"device_bytes", 0}};
  bool leak = false;
  Json cycles = Json::array();
};

}  // namespace

Json summarize_journals(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw UsageError("--summarize: '" + dir + "' is not a folder");
  // scenario -> rank -> state; scenario order as first seen; world per scenario.
  std::map<std::string, std::map<int, RankScenario>> all;
  std::vector<std::string> order;
  std::map<std::string, int> world;
  int journals = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("rank-", 0) != 0 || entry.path().extension() != ".journal") continue;
    int rank = 0;
    try {
      rank = std::stoi(name.substr(5));
    } catch (const std::exception&) {
      continue;
    }
    ++journals;
    std::ifstream in(entry.path());
    if (!in) throw ApiError("open(" + entry.path().string() + ")", __FILE__, __LINE__, errno_name(errno));
    std::string l, current;
    while (std::getline(in, l)) {
      auto f = split_tabs(l);
      if (f.size() < 2) continue;
      const std::string& kind = f[0];
      const std::string& sc = f[1];
      if (kind == "O") {
        if (!all.count(sc)) order.push_back(sc);
        world[sc] = f.size() > 2 ? std::atoi(f[2].c_str()) : 0;
        all[sc][rank] = RankScenario{};
        continue;
      }
      auto& rs = all[sc][rank];
      if (kind == "B" && f.size() >= 4) {
        rs.open_step = f[2];
        rs.open_peer = std::atoi(f[3].c_str());
      } else if (kind == "E" && f.size() >= 6) {
        Json s = {{"step", f[2]}, {"status", f[4]}, {"us", std::atof(f[5].c_str())}};
        const int peer = std::atoi(f[3].c_str());
        if (peer >= 0) s["peer"] = peer;
        rs.steps.push_back(s);
        rs.open_step.clear();
        if (f[4] != "ok" && rs.first_error.empty()) {
          rs.first_error = f[4];
          rs.first_error_step = f[2];
        }
      } else if (kind == "S" && f.size() >= 3) {
        rs.signal = f[2];
      } else if (kind == "H") {
        rs.hang = rs.open_step.empty() ? "?" : rs.open_step;
      } else if (kind == "L" && f.size() >= 6) {
        rs.leaked = {{"fds", std::atoll(f[2].c_str())},
                     {"handles", std::atoll(f[3].c_str())},
                     {"mappings", std::atoll(f[4].c_str())},
                     {"device_bytes", std::atoll(f[5].c_str())}};
        rs.leak = std::atoll(f[2].c_str()) > 0 || std::atoll(f[3].c_str()) > 0 ||
                  std::atoll(f[4].c_str()) > 0 || std::atoll(f[5].c_str()) > 0;
      } else if (kind == "C" && f.size() >= 7) {
        rs.cycles.push_back({{"cycle", std::atoi(f[2].c_str())},
                             {"fds", std::atoll(f[3].c_str())},
                             {"handles", std::atoll(f[4].c_str())},
                             {"mappings", std::atoll(f[5].c_str())},
                             {"free_bytes", std::stoull(f[6])}});
      } else if (kind == "D") {
        rs.done = true;
      }
    }
  }
  if (journals == 0) throw UsageError("--summarize: no rank-*.journal files in '" + dir + "'");

  Json scenarios = Json::array();
  for (const auto& sc : order) {
    Json ranks = Json::array();
    std::string outcome = "ok", detail;
    int worst = 0;
    for (auto& [rank, rs] : all[sc]) {
      std::string o = "ok", d;
      if (!rs.signal.empty()) {
        o = "crash";
        d = rs.signal + " on rank " + std::to_string(rank) + " in step " +
            (rs.open_step.empty() ? "?" : rs.open_step);
      } else if (!rs.hang.empty()) {
        o = "hang";
        d = "rank " + std::to_string(rank) + " hung in step " + rs.hang;
      } else if (!rs.done) {
        o = "crash";
        d = "rank " + std::to_string(rank) + " ended without finishing" +
            (rs.open_step.empty() ? std::string(" (killed with the job?)") : " in step " + rs.open_step);
      } else if (!rs.first_error.empty()) {
        o = "api_error";
        d = rs.first_error_step + " -> " + rs.first_error + " on rank " + std::to_string(rank);
      } else if (rs.leak) {
        o = "leak";
        d = "rank " + std::to_string(rank) + " did not return " + rs.leaked.dump();
      }
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
    Json s = {{"name", sc}, {"world", world[sc]}, {"outcome", outcome}};
    if (!detail.empty()) s["detail"] = detail;
    s["ranks"] = ranks;
    scenarios.push_back(s);
  }
  return scenarios;
}

}  // namespace mori::symm
