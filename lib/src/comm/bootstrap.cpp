// SPDX-License-Identifier: MIT
#include "mori/symm/comm/bootstrap.hpp"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <thread>

#include "mori/symm/base/detail/poll.hpp"
#include "mori/symm/base/detail/text.hpp"
#include "mori/symm/base/error.hpp"
#include "mori/symm/base/log.hpp"
#include "mori/symm/comm/setup_cost.hpp"
#include "mori/symm/platform/runtime.hpp"

namespace mori::symm {
namespace {

using Clock = std::chrono::steady_clock;

// How long an expired MPI_Ibarrier waits for the other ranks to answer "are you there".
constexpr double kPresenceBoundS = 1.0;
// How long a timeout path waits for its cancelled requests to complete before freeing them.
constexpr double kCancelBoundS = 0.25;

using detail::join_ranks;
using detail::poll_until;

// Tests until every request is complete or the deadline passes.
bool test_all_until(std::vector<MPI_Request>& reqs, detail::PollClock::time_point deadline,
                    const detail::Backoff& backoff = detail::Backoff::oversubscribed()) {
  return poll_until(
      [&] {
        int flag = 0;
        MORI_CHECK_MPI(MPI_Testall(static_cast<int>(reqs.size()), reqs.data(), &flag, MPI_STATUSES_IGNORE));
        return flag != 0;
      },
      deadline, backoff);
}

// On a timeout path: cancels every outstanding request and completes it (a cancelled request completes
// without its peer), so that no late message lands in a buffer the caller is about to free; a request that
// still has not completed within the short bound is freed. Never throws.
void cancel_outstanding(std::vector<MPI_Request>& reqs) noexcept {
  for (auto& r : reqs)
    if (r != MPI_REQUEST_NULL) MORI_WARN_MPI(MPI_Cancel(&r));
  const auto deadline = detail::deadline_after(kCancelBoundS);
  poll_until(
      [&] {
        int flag = 0;
        return MPI_Testall(static_cast<int>(reqs.size()), reqs.data(), &flag, MPI_STATUSES_IGNORE) !=
                   MPI_SUCCESS ||
               flag != 0;
      },
      deadline);
  for (auto& r : reqs)
    if (r != MPI_REQUEST_NULL) MORI_WARN_MPI(MPI_Request_free(&r));
}

struct NodeKey {
  char host[64];
  char override_id[32];
  std::int32_t shared_leader;  // lowest global rank of this rank's MPI_COMM_TYPE_SHARED communicator
  std::int32_t pid;
};

}  // namespace

void check_node_id(const std::string& node_id) {
  if (node_id.size() > 31) throw UsageError("--node-id / MORI_NODE_ID: at most 31 characters");
}

namespace {
// MPI's text for an error code; outside MPI_Init..MPI_Finalize (where MPI_Error_string may not be called) the
// code.
std::string mpi_error_name(int rc) {
  const std::string code = "MPI error code " + std::to_string(rc);
  int inited = 0, fin = 0;
  if (MPI_Initialized(&inited) != MPI_SUCCESS || !inited || MPI_Finalized(&fin) != MPI_SUCCESS || fin)
    return code + " (MPI not running)";
  char buf[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  if (MPI_Error_string(rc, buf, &len) != MPI_SUCCESS || len <= 0) return code;
  return std::string(buf, static_cast<std::size_t>(len));
}
}  // namespace

void check_mpi(int rc, const char* call, const char* file, int line) {
  if (rc == MPI_SUCCESS) return;
  throw ApiError(call, file, line, mpi_error_name(rc));
}

bool warn_mpi(int rc, const char* call, const char* file, int line) noexcept {
  if (rc == MPI_SUCCESS) return true;
  try {
    spdlog::warn("{}", ApiError(call, file, line, mpi_error_name(rc)).what());
  } catch (...) {  // the warning could not be made (memory): the call's result is still returned
  }
  return false;
}

int world_rank_noexcept() noexcept {
  int rank = 0;
  return MORI_WARN_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank)) ? rank : 0;
}

int world_size_noexcept() noexcept {
  int size = 1;
  return MORI_WARN_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size)) ? size : 1;
}

MpiSession::MpiSession(int* argc, char*** argv) {
  int inited = 0;
  MORI_CHECK_MPI(MPI_Initialized(&inited));
  if (!inited) {
    prepare_process_environment();
    MORI_CHECK_MPI(MPI_Init(argc, argv));
  }
  // Errors come back as codes, so that every failure is a typed exception with the call named.
  MORI_CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
}

MpiSession::~MpiSession() {
  if (finalized_) return;
  int fin = 0;
  if (MORI_WARN_MPI(MPI_Finalized(&fin)) && !fin) MORI_WARN_MPI(MPI_Finalize());
}

int MpiSession::finish_with(int exit_code, double bound_s) noexcept {
  const int world = world_size_noexcept();
  std::fflush(stdout);
  std::fflush(stderr);
  if (world == 1) return exit_code;
  MPI_Request req;
  if (MORI_WARN_MPI(MPI_Ibarrier(MPI_COMM_WORLD, &req))) {
    int done = 0;
    poll_until(
        [&] {
          // A failed test ends the wait: the job is then aborted below, as for a rank that never came.
          return !MORI_WARN_MPI(MPI_Test(&req, &done, MPI_STATUS_IGNORE)) || done != 0;
        },
        detail::deadline_after(bound_s));
    if (done) return exit_code;  // every rank reached the end: MPI_Finalize in the destructor
  }
  spdlog::error("not every rank reached the end within {} s; aborting the job with exit code {}",
                format_seconds(bound_s), exit_code);
  spdlog::default_logger()->flush();
  finalized_ = true;
  MPI_Abort(MPI_COMM_WORLD, exit_code);
  return exit_code;
}

Bootstrap::Bootstrap(double timeout_s, const std::string& node_id_override, MPI_Comm comm)
    : timeout_s_(timeout_s), node_id_override_(node_id_override) {
  SetupStep timed(Setup::bootstrap);
  MORI_CHECK_MPI(MPI_Comm_dup(comm, &comm_));
  MORI_CHECK_MPI(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
  MORI_CHECK_MPI(MPI_Comm_rank(comm_, &rank_));
  MORI_CHECK_MPI(MPI_Comm_size(comm_, &world_));
  log::set_rank(rank_);
  check_node_id(node_id_override);

  MPI_Comm shared = MPI_COMM_NULL;
  MORI_CHECK_MPI(MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &shared));
  MORI_CHECK_MPI(MPI_Comm_rank(shared, &host_local_rank_));
  int leader = rank_;
  MORI_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &leader, 1, MPI_INT, MPI_MIN, shared));
  MORI_CHECK_MPI(MPI_Comm_free(&shared));

  NodeKey mine{};
  std::strncpy(mine.host, detail::host_name().c_str(), sizeof(mine.host) - 1);
  std::strncpy(mine.override_id, node_id_override.c_str(), sizeof(mine.override_id) - 1);
  mine.shared_leader = leader;
  mine.pid = static_cast<std::int32_t>(getpid());
  auto keys = allgather_value("bootstrap.node-keys", mine);

  node_.assign(static_cast<std::size_t>(world_), -1);
  pids_.resize(static_cast<std::size_t>(world_));
  hosts_.resize(static_cast<std::size_t>(world_));
  node_names_.resize(static_cast<std::size_t>(world_));
  std::map<std::pair<int, std::string>, int> ids;
  for (int r = 0; r < world_; ++r) {
    const auto& k = keys[static_cast<std::size_t>(r)];
    // A peer's texts are read up to their array's end, terminated or not.
    const std::string id(k.override_id, strnlen(k.override_id, sizeof(k.override_id)));
    auto key = std::make_pair(static_cast<int>(k.shared_leader), id);
    auto [it, fresh] = ids.emplace(key, static_cast<int>(ids.size()));
    node_[static_cast<std::size_t>(r)] = it->second;
    pids_[static_cast<std::size_t>(r)] = k.pid;
    hosts_[static_cast<std::size_t>(r)] = std::string(k.host, strnlen(k.host, sizeof(k.host)));
    node_names_[static_cast<std::size_t>(r)] = id.empty() ? hosts_[static_cast<std::size_t>(r)] : id;
  }
  num_nodes_ = static_cast<int>(ids.size());
  team_index_.assign(static_cast<std::size_t>(world_), -1);
  for (int r = 0; r < world_; ++r) {
    if (node_[static_cast<std::size_t>(r)] == node_[static_cast<std::size_t>(rank_)]) {
      team_index_[static_cast<std::size_t>(r)] = static_cast<int>(team_.size());
      team_.push_back(r);
    }
  }
  team_rank_ = team_index_[static_cast<std::size_t>(rank_)];
  // Errors on a job of several nodes name the node first ("nodeB rank 5"); a team's Bootstrap (one node)
  // leaves the job's tag alone.
  if (num_nodes_ > 1) set_node_tag(node_names_[static_cast<std::size_t>(rank_)]);
  spdlog::debug("bootstrap: world {}, {} node(s), node {}, team rank {}/{}, timeout {} s", world_, num_nodes_,
                node_[static_cast<std::size_t>(rank_)], team_rank_, team_.size(), format_seconds(timeout_s_));
}

std::unique_ptr<Bootstrap> Bootstrap::team_bootstrap(const std::string& step) {
  barrier(step);
  MPI_Comm split = MPI_COMM_NULL;
  MORI_CHECK_MPI(MPI_Comm_split(comm_, node_[static_cast<std::size_t>(rank_)], rank_, &split));
  std::unique_ptr<Bootstrap> team;
  try {
    team = std::make_unique<Bootstrap>(timeout_s_, node_id_override_, split);
  } catch (...) {
    MORI_WARN_MPI(MPI_Comm_free(&split));
    log::set_rank(rank_);
    throw;
  }
  MORI_WARN_MPI(MPI_Comm_free(&split));  // the team's Bootstrap holds a duplicate
  log::set_rank(rank_);                  // its constructor named the team's rank
  team->job_ranks_ = team_;              // split by node, keyed by job rank: team rank i is team_[i]
  team->job_node_ = node_name(rank_);
  return team;
}

std::string Bootstrap::name_ranks(const std::vector<int>& ranks) const {
  std::vector<int> job;
  for (int r : ranks) job.push_back(job_rank(r));
  if (!job_node_.empty()) return job_node_ + ": " + join_ranks(job);
  if (num_nodes_ <= 1) return join_ranks(job);
  // Grouped by node, in the order of each node's first rank.
  std::vector<std::pair<std::string, std::vector<int>>> groups;
  for (int r : job) {
    const bool known = r >= 0 && r < world_;
    const std::string name = known ? node_name(r) : std::string("?");
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == name; });
    if (it == groups.end()) it = groups.insert(groups.end(), {name, {}});
    it->second.push_back(r);
  }
  std::string out;
  for (const auto& [name, rs] : groups) out += (out.empty() ? "" : "; ") + name + ": " + join_ranks(rs);
  return out;
}

Bootstrap::~Bootstrap() {
  if (comm_ != MPI_COMM_NULL) {
    int fin = 0;
    if (MORI_WARN_MPI(MPI_Finalized(&fin)) && !fin) MORI_WARN_MPI(MPI_Comm_free(&comm_));
  }
}

int Bootstrap::next_tag() {
  tag_ = (tag_ + 1) % 30000;
  return 1000 + tag_;
}

double Bootstrap::bound_s() const noexcept {
  return wait_bound_expired() ? std::min(timeout_s_, kExpiredWaitBoundS) : timeout_s_;
}

void Bootstrap::wait_all(const std::string& step, std::vector<MPI_Request>& reqs,
                         const std::vector<int>& peers, bool report_missing) {
  const double bound = bound_s();
  const auto t0 = Clock::now();
  const auto deadline =
      t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(bound));
  try {
    if (test_all_until(reqs, deadline)) {
      spdlog::trace("bootstrap: step '{}' done in {:.3f} ms", step,
                    std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      return;
    }
  } catch (...) {
    cancel_outstanding(reqs);
    throw;
  }
  // A request that completed between the last test and the deadline is not a timeout.
  std::vector<int> missing;
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    int done = 0;
    if (reqs[i] == MPI_REQUEST_NULL) continue;
    if (MPI_Test(&reqs[i], &done, MPI_STATUS_IGNORE) != MPI_SUCCESS || !done) missing.push_back(peers[i]);
  }
  cancel_outstanding(reqs);
  if (missing.empty()) return;
  std::sort(missing.begin(), missing.end());
  missing.erase(std::unique(missing.begin(), missing.end()), missing.end());
  std::string who = report_missing
                        ? "ranks not arrived: " + name_ranks(missing)
                        : "waiting on rank " + name_ranks(missing) + " (rank 0 names the missing ranks)";
  throw TimeoutError("step '" + step + "' timed out after " + format_seconds(bound) + " s on " + rank_tag() +
                     "; " + who);
}

std::vector<int> Bootstrap::ranks_not_responding() {
  // Every rank that gets here sends one byte to every other rank on a tag no collective uses; whoever does
  // not send within the short bound is missing. Best effort: unanswered requests are cancelled.
  static const std::uint8_t kOne = 1;
  constexpr int kPresenceTag = 32500;
  std::vector<std::uint8_t> got(static_cast<std::size_t>(world_), 0);
  std::vector<MPI_Request> recvs(static_cast<std::size_t>(world_), MPI_REQUEST_NULL);
  for (int p = 0; p < world_; ++p) {
    if (p == rank_) continue;
    MPI_Request send = MPI_REQUEST_NULL;
    MORI_CHECK_MPI(MPI_Isend(&kOne, 1, MPI_BYTE, p, kPresenceTag, comm_, &send));
    MORI_CHECK_MPI(MPI_Request_free(&send));
    MORI_CHECK_MPI(MPI_Irecv(&got[static_cast<std::size_t>(p)], 1, MPI_BYTE, p, kPresenceTag, comm_,
                             &recvs[static_cast<std::size_t>(p)]));
  }
  test_all_until(recvs, detail::deadline_after(kPresenceBoundS));
  std::vector<int> missing;
  for (int p = 0; p < world_; ++p) {
    auto& r = recvs[static_cast<std::size_t>(p)];
    if (r == MPI_REQUEST_NULL) continue;
    int done = 0;
    MORI_CHECK_MPI(MPI_Test(&r, &done, MPI_STATUS_IGNORE));
    if (done) continue;
    missing.push_back(p);
    MORI_WARN_MPI(MPI_Cancel(&r));  // best effort (above): the rank is named missing either way
    MORI_WARN_MPI(MPI_Request_free(&r));
  }
  return missing;
}

void Bootstrap::allgather(const std::string& step, const void* mine, void* all, std::size_t bytes) {
  auto* out = static_cast<std::uint8_t*>(all);
  if (world_ == 1) {
    std::memcpy(out, mine, bytes);
    return;
  }
  // Bruck's allgather: in round k every rank sends the blocks it has (at most 2^k) to rank - 2^k and receives
  // as many from rank + 2^k. ceil(log2(world)) rounds, and world - 1 blocks in and out of every rank: no rank
  // carries the whole job's traffic (docs/json.md, "meta.setup").
  const int tag = next_tag();
  std::vector<std::uint8_t> have(static_cast<std::size_t>(world_) * bytes);
  std::memcpy(have.data(), mine, bytes);
  const double bound = bound_s();
  const auto t0 = Clock::now();
  const auto deadline = detail::deadline_after(bound);
  for (int dist = 1; dist < world_; dist *= 2) {
    const int blocks = std::min(dist, world_ - dist);
    const int to = (rank_ - dist + world_) % world_, from = (rank_ + dist) % world_;
    const int n = static_cast<int>(static_cast<std::size_t>(blocks) * bytes);
    std::vector<MPI_Request> reqs(2, MPI_REQUEST_NULL);
    MORI_CHECK_MPI(MPI_Irecv(have.data() + static_cast<std::size_t>(dist) * bytes, n, MPI_BYTE, from, tag,
                             comm_, &reqs[0]));
    MORI_CHECK_MPI(MPI_Isend(have.data(), n, MPI_BYTE, to, tag, comm_, &reqs[1]));
    count_setup_ops(2 + static_cast<std::uint64_t>(blocks));  // two messages, the blocks they carry
    bool done = false;
    try {
      done = test_all_until(reqs, deadline);
      if (!done) {
        int flag = 0;  // a request that completed between the last test and the deadline is no timeout
        MORI_CHECK_MPI(MPI_Testall(2, reqs.data(), &flag, MPI_STATUSES_IGNORE));
        done = flag != 0;
      }
    } catch (...) {
      cancel_outstanding(reqs);
      throw;
    }
    if (done) continue;
    cancel_outstanding(reqs);
    // The rounds cannot say who is missing (the peer of this round may itself be waiting): ask every rank
    // directly, within a short bound, as barrier_fast does.
    note_wait_bound_expired();
    const auto missing = ranks_not_responding();
    throw TimeoutError("step '" + step + "' timed out after " + format_seconds(bound) + " s on " +
                       rank_tag() + "; " +
                       (missing.empty() ? "waiting on rank " + std::to_string(from) +
                                              " (every rank answered: not every rank reached this step)"
                                        : "ranks not arrived: " + name_ranks(missing)));
  }
  // scripts/faults reads this line to tell where a signal landed (docs/reliability.md, "GPU fault suite").
  spdlog::trace("bootstrap: step '{}' done in {:.3f} ms", step,
                std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  // Block i came from rank (rank + i) mod world.
  for (int i = 0; i < world_; ++i)
    std::memcpy(out + static_cast<std::size_t>((rank_ + i) % world_) * bytes,
                have.data() + static_cast<std::size_t>(i) * bytes, bytes);
}

void Bootstrap::broadcast(const std::string& step, void* data, std::size_t bytes, int root) {
  const int tag = next_tag();
  const int n = static_cast<int>(bytes);
  if (world_ == 1) return;
  std::vector<MPI_Request> reqs;
  std::vector<int> peers;
  if (rank_ == root) {
    for (int p = 0; p < world_; ++p) {
      if (p == root) continue;
      reqs.emplace_back();
      peers.push_back(p);
      MORI_CHECK_MPI(MPI_Isend(data, n, MPI_BYTE, p, tag, comm_, &reqs.back()));
    }
  } else {
    reqs.emplace_back();
    peers.push_back(root);
    MORI_CHECK_MPI(MPI_Irecv(data, n, MPI_BYTE, root, tag, comm_, &reqs.back()));
  }
  wait_all(step, reqs, peers, rank_ == root);
}

void Bootstrap::barrier(const std::string& step) {
  std::uint8_t one = 1;
  std::vector<std::uint8_t> all(static_cast<std::size_t>(world_));
  allgather(step, &one, all.data(), 1);
}

void Bootstrap::barrier_fast(const std::string& step) {
  if (world_ == 1) return;
  std::vector<MPI_Request> reqs(1);
  MORI_CHECK_MPI(MPI_Ibarrier(comm_, &reqs[0]));
  const double bound = bound_s();
  if (test_all_until(reqs, detail::deadline_after(bound), detail::Backoff::spin_then_yield(4096))) return;
  int flag = 0;
  // MPI_Ibarrier cannot say who is missing: ask every rank directly, within a short bound.
  note_wait_bound_expired();
  const auto missing = ranks_not_responding();
  if (missing.empty()) {
    // Every rank is alive: a bound far below the barrier's own latency (--timeout-s 0.001). One more short
    // wait before calling it a timeout.
    if (test_all_until(reqs, detail::deadline_after(kExpiredWaitBoundS))) return;
  }
  MORI_CHECK_MPI(MPI_Test(&reqs[0], &flag, MPI_STATUS_IGNORE));
  if (flag) return;
  throw TimeoutError("step '" + step + "' timed out after " + format_seconds(bound) + " s on " + rank_tag() +
                     "; " +
                     (missing.empty() ? "no rank is missing (ranks 0-" + std::to_string(world_ - 1) +
                                            " answered), but not every rank reached this barrier"
                                      : "ranks not arrived: " + name_ranks(missing)));
}

}  // namespace mori::symm
