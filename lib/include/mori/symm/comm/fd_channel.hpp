// SPDX-License-Identifier: MIT
// FdChannel: POSIX file descriptors between the ranks of one node, over UNIX datagram sockets
// (lib/README.md, Windows).
//
// One socket per rank in the abstract namespace, named mori-symm-<nonce>-<rank>-<key>: the per-job nonce that
// rank 0 broadcasts, and a key of 128 random bits that each rank draws for itself and binds before anyone can
// learn it; the keys then travel over MPI (set_peer_keys). Abstract names carry no permission check, so a
// name that could be guessed from another could be taken first by any local user (docs/reliability.md,
// "Hostile senders"). Each datagram carries one fd (SCM_RIGHTS) and {magic, nonce, sender rank, tag}. The
// receiver checks the kernel-supplied credentials (SO_PASSCRED): same uid, and the pid that the job's
// bootstrap recorded for the claimed sender. Anything else is dropped with a warning and the fd it carried is
// closed. Every wait is a poll() against a deadline; messages may arrive in any order.
//
// exchange() sends and receives in one loop: a send that finds the peer's queue full (the kernel holds about
// ten datagrams per socket, /proc/sys/net/unix/max_dgram_qlen) is tried again after this rank has drained its
// own queue, so no rank blocks on a send while others wait for it to read (lib/README.md, Windows).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mori::symm {

using Nonce = std::array<std::uint8_t, 16>;
using SocketKey = std::array<std::uint8_t, 16>;

class FdChannel {
 public:
  FdChannel(const Nonce& nonce, int rank, std::vector<int> job_pids, double timeout_s);
  ~FdChannel();
  FdChannel(const FdChannel&) = delete;
  FdChannel& operator=(const FdChannel&) = delete;

  // 16 random bytes (getrandom): a job nonce or a socket key.
  static Nonce make_nonce();
  // The abstract socket name of `rank` with its key (without the leading NUL).
  static std::string socket_name(const Nonce& nonce, int rank, const SocketKey& key);

  // This rank's key and its socket's name (bound by the constructor).
  const SocketKey& key() const noexcept { return key_; }
  std::string name() const { return socket_name(nonce_, rank_, key_); }
  // Every rank's key, indexed by rank (the job's allgather of key()): where the sends go.
  void set_peer_keys(std::vector<SocketKey> keys);

  // Sends a duplicate-free copy of fd to peer (the caller keeps fd). Retries while the peer has not bound yet
  // or its queue is full, until the deadline.
  void send(int peer, int fd, std::uint32_t tag);
  // One fd from each rank in `from` carrying `tag`; the result is ordered like `from`, and the caller owns
  // the fds. Datagrams for other tags are kept for a later call.
  std::vector<int> receive(const std::vector<int>& from, std::uint32_t tag, const std::string& step);
  // Sends a copy of fd to every rank in `to` and receives one fd carrying `tag` from every rank in `from`,
  // both at once, until the deadline; the result is ordered like `from`, and the caller owns those fds (the
  // caller keeps fd). On expiry the error names the ranks nothing arrived from and those not reached.
  std::vector<int> exchange(int fd, const std::vector<int>& to, const std::vector<int>& from,
                            std::uint32_t tag, const std::string& step);

  // Operations of this channel so far: datagrams sent, send attempts refused by a full or unbound peer,
  // datagrams read (the setup-cost counters, docs/json.md "setup").
  std::uint64_t sends() const noexcept { return sends_; }
  std::uint64_t send_retries() const noexcept { return send_retries_; }
  std::uint64_t reads() const noexcept { return reads_; }

  // Datagrams dropped so far (foreign, malformed, duplicate). A datagram of a job member whose descriptor the
  // kernel could not install (this process is out of descriptors: MSG_CTRUNC) is not dropped: it ends the
  // exchange at once with an ApiError naming EMFILE.
  std::uint64_t rejected() const noexcept { return rejected_; }

 private:
  // Reads one datagram; returns true with (sender, tag, fd) if it passed every check.
  bool read_one(int& sender, std::uint32_t& tag, int& fd);
  // One non-blocking send of fd to peer: true if sent, false if the peer is not bound or its queue is full
  // (err says which); other failures throw.
  bool try_send(int peer, int fd, std::uint32_t tag, int& err);
  // Throws the ApiError (EMFILE) of a job member's datagram whose descriptor this process could not take.
  [[noreturn]] void fail_out_of_descriptors(int sender) const;
  // Reads every datagram queued now into pending_.
  void drain();

  int sock_ = -1;
  int rank_;
  Nonce nonce_;
  SocketKey key_{};
  std::vector<SocketKey> peer_keys_;
  std::vector<int> pids_;
  double timeout_s_;
  std::uint64_t rejected_ = 0;
  std::uint64_t sends_ = 0, send_retries_ = 0, reads_ = 0;
  std::map<std::pair<std::uint32_t, int>, int> pending_;  // (tag, sender) -> fd received early
};

namespace detail {
// One datagram to the abstract socket `name` carrying `payload` and the descriptor `fd` (SCM_RIGHTS), through
// the socket `sock`; returns sendmsg's result (-1 with errno set on failure). Tests use it to play a sender
// from outside the job.
long send_fd_datagram(int sock, const std::string& name, const void* payload, std::size_t len, int fd,
                      int flags) noexcept;
// Binds `sock` to the abstract name `name`; throws ApiError, and for EADDRINUSE names the cause: another
// process holds that name.
void bind_abstract(int sock, const std::string& name);
}  // namespace detail

}  // namespace mori::symm
