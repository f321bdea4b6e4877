// SPDX-License-Identifier: MIT
// MPI bootstrap: rank, world, the node-local team, and collectives that never wait without a bound.
//
// Every collective here is built from non-blocking MPI calls polled against a deadline. On expiry it throws
// TimeoutError naming the step and, on rank 0 (which gathers), the ranks that had not arrived.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mori::symm {

// MPI_Init / MPI_Finalize for a tool's lifetime. Finalize never throws.
class MpiSession {
 public:
  MpiSession(int* argc, char*** argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
  // Ends the job after a failure: a bounded barrier so that every rank can print its own line, then
  // MPI_Finalize if all arrived, else MPI_Abort with the code. Returns the code when the job ended cleanly.
  int finish_with(int exit_code, double bound_s) noexcept;

 private:
  bool finalized_ = false;
};

// Throws UsageError if a node id (--node-id / MORI_NODE_ID) is longer than 31 characters.
void check_node_id(const std::string& node_id);

class Bootstrap {
 public:
  // timeout_s bounds every wait. node_id_override: "" = none; else ranks with different ids form different
  // teams even on one host (CI simulates several nodes this way). Env MORI_NODE_ID is read by the tools.
  explicit Bootstrap(double timeout_s, const std::string& node_id_override = {},
                     MPI_Comm comm = MPI_COMM_WORLD);
  ~Bootstrap();
  Bootstrap(const Bootstrap&) = delete;
  Bootstrap& operator=(const Bootstrap&) = delete;

  int rank() const noexcept { return rank_; }
  int world() const noexcept { return world_; }
  double timeout_s() const noexcept { return timeout_s_; }

  // The load/store team: ranks of this node (after the override).
  int team_rank() const noexcept { return team_rank_; }
  int team_size() const noexcept { return static_cast<int>(team_.size()); }
  const std::vector<int>& team() const noexcept { return team_; }  // global ranks, ascending
  int team_rank_of(int global_rank) const noexcept { return team_index_[global_rank]; }  // -1 outside
  int node_of(int global_rank) const noexcept { return node_[global_rank]; }
  int num_nodes() const noexcept { return num_nodes_; }
  // Ranks of this host that share the physical node (MPI_COMM_TYPE_SHARED), before any override.
  int host_local_rank() const noexcept { return host_local_rank_; }
  const std::vector<int>& pids() const noexcept { return pids_; }
  const std::vector<std::string>& hosts() const noexcept { return hosts_; }
  // A rank's node as users name it: its node id where one was given (--node-id, MORI_NODE_ID), else its host.
  const std::string& node_name(int global_rank) const noexcept {
    return node_names_[static_cast<std::size_t>(global_rank)];
  }

  // Gathers `bytes` from every rank into all[world * bytes], in rank order.
  void allgather(const std::string& step, const void* mine, void* all, std::size_t bytes);
  void broadcast(const std::string& step, void* data, std::size_t bytes, int root);
  // Barrier that reports the missing ranks on expiry (gather to rank 0, then release).
  void barrier(const std::string& step);
  // Barrier for timed loops: MPI_Ibarrier polled; on expiry every rank asks the others directly (one byte
  // each way, bounded) and names the ranks that did not answer.
  void barrier_fast(const std::string& step);

  template <class T>
  std::vector<T> allgather_value(const std::string& step, const T& mine) {
    std::vector<T> all(static_cast<std::size_t>(world_));
    allgather(step, &mine, all.data(), sizeof(T));
    return all;
  }

  MPI_Comm comm() const noexcept { return comm_; }

  // Collective: a Bootstrap over this rank's load/store team alone, for work that runs within every team at
  // once (a job of several nodes: docs/mori-probe.md "Health"). A bounded barrier first, so that every rank
  // is there, then MPI_Comm_split by node. Its rank and world are the team's, its node override this one's;
  // the log and the errors keep naming this job's ranks. step names the barrier.
  std::unique_ptr<Bootstrap> team_bootstrap(const std::string& step);

  // Ranks of this communicator as an error names them: "1,3" on a job of one node; the node first on a job
  // of several ("nodeB: 4,5; nodeC: 9"), and a team Bootstrap names the job's ranks and its node
  // (docs/mori-a2a.md, "Many nodes").
  std::string name_ranks(const std::vector<int>& ranks) const;
  // The job's rank of this communicator's rank (a team Bootstrap's rank r is the job's job_rank(r)).
  int job_rank(int rank) const noexcept {
    const bool mapped = rank >= 0 && static_cast<std::size_t>(rank) < job_ranks_.size();
    return mapped ? job_ranks_[static_cast<std::size_t>(rank)] : rank;
  }

 private:
  int next_tag();
  // The bound of the next wait: timeout_s, or min(timeout_s, kExpiredWaitBoundS) once a bound has expired.
  double bound_s() const noexcept;
  // After an expired MPI_Ibarrier: the ranks that do not answer a direct message within the short bound.
  std::vector<int> ranks_not_responding();
  // Polls reqs until done or deadline; peers[i] names the rank behind reqs[i].
  void wait_all(const std::string& step, std::vector<MPI_Request>& reqs, const std::vector<int>& peers,
                bool report_missing);

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, world_ = 1;
  double timeout_s_;
  int tag_ = 0;
  int team_rank_ = 0;
  int num_nodes_ = 1;
  int host_local_rank_ = 0;
  std::string node_id_override_;
  std::vector<int> team_, team_index_, node_, pids_;
  std::vector<std::string> hosts_, node_names_;
  // Set on a team Bootstrap: the job's rank of each team rank, and the team's node.
  std::vector<int> job_ranks_;
  std::string job_node_;
};

// Checks an MPI call; the error names the call, the MPI error string, file:line and rank.
void check_mpi(int rc, const char* call, const char* file, int line);
#define MORI_CHECK_MPI(expr) ::mori::symm::check_mpi((expr), #expr, __FILE__, __LINE__)

// The same check where nothing may throw (destructors, the cleanup after a failure, the tool's last steps): a
// failed call is a warning with the same facts; returns whether the call succeeded.
bool warn_mpi(int rc, const char* call, const char* file, int line) noexcept;
#define MORI_WARN_MPI(expr) ::mori::symm::warn_mpi((expr), #expr, __FILE__, __LINE__)

// The rank and size of MPI_COMM_WORLD where nothing may throw: 0 and 1 (with the warning) where MPI's query
// fails.
int world_rank_noexcept() noexcept;
int world_size_noexcept() noexcept;

}  // namespace mori::symm
