// SPDX-License-Identifier: MIT
#include "mori/symm/comm/fd_channel.hpp"

#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstring>
#include <thread>

#include "mori/symm/base/detail/poll.hpp"
#include "mori/symm/base/detail/text.hpp"
#include "mori/symm/base/error.hpp"
#include "mori/symm/base/fds.hpp"
#include "mori/symm/base/log.hpp"

namespace mori::symm {
namespace {

using Clock = std::chrono::steady_clock;
constexpr char kMagic[8] = {'M', 'O', 'R', 'I', 'F', 'D', '0', '1'};

struct Message {
  char magic[8];
  std::uint8_t nonce[16];
  std::int32_t sender;
  std::uint32_t tag;
};

socklen_t make_addr(const std::string& name, sockaddr_un& addr) {
  std::memset(&addr, 0, sizeof(addr));
  addr.sun_family = AF_UNIX;
  addr.sun_path[0] = '\0';
  std::memcpy(addr.sun_path + 1, name.data(), name.size());
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
}

}  // namespace

long detail::send_fd_datagram(int sock, const std::string& name, const void* payload, std::size_t len, int fd,
                              int flags) noexcept {
  iovec iov{const_cast<void*>(payload), len};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  sockaddr_un addr{};
  const socklen_t alen = make_addr(name, addr);
  msghdr msg{};
  msg.msg_name = &addr;
  msg.msg_namelen = alen;
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
  return sendmsg(sock, &msg, flags);
}

Nonce FdChannel::make_nonce() {
  Nonce n{};
  std::size_t got = 0;
  while (got < n.size()) {
    ssize_t r = getrandom(n.data() + got, n.size() - got, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw ApiError("getrandom", __FILE__, __LINE__, errno_name(errno));
    got += static_cast<std::size_t>(r);
  }
  return n;
}

std::string FdChannel::socket_name(const Nonce& nonce, int rank, const SocketKey& key) {
  static const char* hex = "0123456789abcdef";
  auto to_hex = [](const std::array<std::uint8_t, 16>& bytes) {
    std::string s;
    for (auto b : bytes) {
      s += hex[b >> 4];
      s += hex[b & 15];
    }
    return s;
  };
  return "mori-symm-" + to_hex(nonce) + "-" + std::to_string(rank) + "-" + to_hex(key);
}

void detail::bind_abstract(int sock, const std::string& name) {
  sockaddr_un addr{};
  const socklen_t len = make_addr(name, addr);
  if (bind(sock, reinterpret_cast<sockaddr*>(&addr), len) == 0) return;
  const int err = errno;
  throw ApiError("bind(@" + name + ")", __FILE__, __LINE__, errno_name(err),
                 err == EADDRINUSE ? "another process holds this abstract socket name" : "");
}

FdChannel::FdChannel(const Nonce& nonce, int rank, std::vector<int> job_pids, double timeout_s)
    : rank_(rank), nonce_(nonce), pids_(std::move(job_pids)), timeout_s_(timeout_s) {
  // The key is drawn here, bound at once, and published only by the bind (and the job's allgather after it):
  // no other process can know the name before this socket holds it.
  key_ = make_nonce();
  sock_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (sock_ < 0) throw ApiError("socket(AF_UNIX, SOCK_DGRAM)", __FILE__, __LINE__, errno_name(errno));
  try {
    int one = 1;
    MORI_CHECK_POSIX(setsockopt(sock_, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)));
    detail::bind_abstract(sock_, name());
  } catch (...) {
    close(sock_);
    throw;
  }
}

void FdChannel::set_peer_keys(std::vector<SocketKey> keys) {
  if (keys.size() != pids_.size())
    throw UsageError("FdChannel::set_peer_keys: " + std::to_string(keys.size()) + " keys for a job of " +
                     std::to_string(pids_.size()) + " ranks");
  peer_keys_ = std::move(keys);
}

FdChannel::~FdChannel() {
  for (auto& [key, fd] : pending_) close(fd);
  if (sock_ >= 0) close(sock_);
}

bool FdChannel::try_send(int peer, int fd, std::uint32_t tag, int& err) {
  if (peer < 0 || peer >= static_cast<int>(pids_.size()))
    throw UsageError("FdChannel::send: peer out of range");
  if (peer_keys_.empty()) throw UsageError("FdChannel::send: the peers' keys are not set (set_peer_keys)");
  Message m{};
  std::memcpy(m.magic, kMagic, sizeof(kMagic));
  std::memcpy(m.nonce, nonce_.data(), nonce_.size());
  m.sender = rank_;
  m.tag = tag;
  const long r =
      detail::send_fd_datagram(sock_, socket_name(nonce_, peer, peer_keys_[static_cast<std::size_t>(peer)]),
                               &m, sizeof(m), fd, MSG_DONTWAIT | MSG_NOSIGNAL);
  if (r == static_cast<long>(sizeof(m))) {
    ++sends_;
    return true;
  }
  err = r < 0 ? errno : EMSGSIZE;
  // Not bound yet, queue full, or too many descriptors in flight for this user (ETOOMANYREFS: they drain as
  // the peers read): all pass once the peers make progress.
  const bool retry = r < 0 && (err == EAGAIN || err == EWOULDBLOCK || err == ECONNREFUSED || err == ENOENT ||
                               err == EINTR || err == ENOBUFS || err == ETOOMANYREFS);
  if (!retry)
    throw ApiError("sendmsg(SCM_RIGHTS)", __FILE__, __LINE__, errno_name(err),
                   "to rank " + std::to_string(peer));
  ++send_retries_;
  return false;
}

void FdChannel::send(int peer, int fd, std::uint32_t tag) {
  int err = 0;
  const bool sent =
      detail::poll_until([&] { return try_send(peer, fd, tag, err); }, detail::deadline_after(timeout_s_),
                         detail::Backoff::sleeping(std::chrono::microseconds(200)));
  if (!sent)
    throw TimeoutError("FdChannel: sending to rank " + std::to_string(peer) + " timed out after " +
                       format_seconds(timeout_s_) + " s on " + rank_tag() + " (last error " +
                       errno_name(err) + ": the peer's socket is not bound or its queue stays full)");
}

bool FdChannel::read_one(int& sender, std::uint32_t& tag, int& fd) {
  Message m{};
  iovec iov{&m, sizeof(m)};
  // Room for a few fds and the credentials: a hostile sender may attach more than one fd.
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 8) + CMSG_SPACE(sizeof(ucred))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t r = recvmsg(sock_, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  if (r < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return false;
    throw ApiError("recvmsg", __FILE__, __LINE__, errno_name(errno));
  }
  ++reads_;
  std::vector<int> fds;
  bool have_cred = false;
  ucred cred{};
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
      const std::size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (std::size_t i = 0; i < n; ++i) {
        int f;
        std::memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        fds.push_back(f);
      }
    } else if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS) {
      std::memcpy(&cred, CMSG_DATA(c), sizeof(cred));
      have_cred = true;
    }
  }
  std::string why;
  if (msg.msg_flags & MSG_TRUNC)
    why = "truncated datagram";
  else if (r != static_cast<ssize_t>(sizeof(m)) || std::memcmp(m.magic, kMagic, sizeof(kMagic)) != 0)
    why = "malformed payload";
  else if (std::memcmp(m.nonce, nonce_.data(), nonce_.size()) != 0)
    why = "wrong job nonce";
  else if (!have_cred)
    why = "no sender credentials";
  else if (cred.uid != geteuid())
    why = "sender uid " + std::to_string(cred.uid) + " is not ours";
  else if (m.sender < 0 || m.sender >= static_cast<int>(pids_.size()))
    why = "sender rank out of range";
  else if (cred.pid != pids_[static_cast<std::size_t>(m.sender)])
    why = "sender pid " + std::to_string(cred.pid) + " is not rank " + std::to_string(m.sender) + "'s";
  else if ((msg.msg_flags & MSG_CTRUNC) && fds.empty())
    fail_out_of_descriptors(m.sender);
  else if (msg.msg_flags & MSG_CTRUNC)
    why = "truncated control data";
  else if (fds.size() != 1)
    why = "carried " + std::to_string(fds.size()) + " fds, expected 1";
  else if (pending_.count({m.tag, m.sender}))
    why = "duplicate from rank " + std::to_string(m.sender);
  if (!why.empty()) {
    for (int f : fds) close(f);
    ++rejected_;
    spdlog::warn("FdChannel: dropped a datagram from pid {}: {} ({} fd(s) closed)", have_cred ? cred.pid : -1,
                 why, fds.size());
    return false;
  }
  sender = m.sender;
  tag = m.tag;
  fd = fds[0];
  return true;
}

void FdChannel::fail_out_of_descriptors(int sender) const {
  // A well-formed datagram of a job member whose descriptor the kernel could not install: this process is out
  // of descriptors. Waiting on would only run out the bound and blame the peers (docs/reliability.md,
  // "Hostile senders").
  const FdLimit limit = raise_fd_limit(0);
  const int open = count_open_fds();  // -1 where not even /proc/self/fd can be opened
  throw ApiError("recvmsg(SCM_RIGHTS)", __FILE__, __LINE__, "EMFILE",
                 "the descriptor rank " + std::to_string(sender) +
                     " sent could not be installed: this process is out of descriptors (" +
                     (open >= 0 ? std::to_string(open) + " open, " : std::string()) + "ulimit -n " +
                     std::to_string(limit.soft) + "); raise the limit before starting the job");
}

void FdChannel::drain() {
  int sender = -1, fd = -1;
  std::uint32_t t = 0;
  while (read_one(sender, t, fd)) pending_[{t, sender}] = fd;
}

std::vector<int> FdChannel::receive(const std::vector<int>& from, std::uint32_t tag,
                                    const std::string& step) {
  return exchange(-1, {}, from, tag, step);
}

std::vector<int> FdChannel::exchange(int fd, const std::vector<int>& to, const std::vector<int>& from,
                                     std::uint32_t tag, const std::string& step) {
  std::vector<int> out(from.size(), -1);
  std::size_t remaining = from.size();
  auto take_pending = [&] {
    for (std::size_t i = 0; i < from.size(); ++i) {
      if (out[i] >= 0) continue;
      auto it = pending_.find({tag, from[i]});
      if (it != pending_.end()) {
        out[i] = it->second;
        pending_.erase(it);
        --remaining;
      }
    }
  };
  // Sends still to make, in the caller's order; each pass tries every one once.
  std::vector<int> unsent = to;
  int last_err = 0;
  auto send_pass = [&] {
    std::size_t kept = 0;
    for (int peer : unsent) {
      int err = 0;
      if (!try_send(peer, fd, tag, err)) {
        unsent[kept++] = peer;
        last_err = err;
      }
    }
    const bool progressed = kept < unsent.size();
    unsent.resize(kept);
    return progressed;
  };
  // Every fd already taken is this call's to close if it ends with an exception (a timeout, a failed poll or
  // recvmsg), so that none leaks.
  try {
    take_pending();
    const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s_);
    while (remaining > 0 || !unsent.empty()) {
      const bool sent_some = !unsent.empty() && send_pass();
      drain();
      const std::size_t before = remaining;
      take_pending();
      if (remaining == 0 && unsent.empty()) break;
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) {
        std::vector<int> missing;
        for (std::size_t i = 0; i < from.size(); ++i)
          if (out[i] < 0) missing.push_back(from[i]);
        std::string what =
            "step '" + step + "' timed out after " + format_seconds(timeout_s_) + " s on " + rank_tag() + ";";
        if (!missing.empty()) what += " no fd arrived from ranks " + detail::join_ranks(missing);
        if (!unsent.empty())
          what += std::string(missing.empty() ? "" : ";") + " could not send to ranks " +
                  detail::join_ranks(unsent) + " (last error " + errno_name(last_err) +
                  ": the peer's socket is not bound or its queue stays full)";
        throw TimeoutError(what);
      }
      if (sent_some || remaining < before) continue;
      // No progress: wait for a datagram, but no longer than a millisecond while sends are pending (a full
      // queue gives no wake-up when it drains).
      const long long wait_ms = unsent.empty() ? std::min<long long>(left, 1000) : 1;
      pollfd p{sock_, POLLIN, 0};
      int pr = poll(&p, 1, static_cast<int>(wait_ms));
      if (pr < 0 && errno != EINTR) throw ApiError("poll", __FILE__, __LINE__, errno_name(errno));
    }
  } catch (...) {
    for (int f : out)
      if (f >= 0) close(f);
    throw;
  }
  return out;
}

}  // namespace mori::symm
