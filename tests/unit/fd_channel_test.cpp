// SPDX-License-Identifier: MIT
// FdChannel framing and sender checks, across real processes (fork).
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <dirent.h>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <string>

#include "mori/symm/base/error.hpp"
#include "mori/symm/comm/fd_channel.hpp"

using namespace mori::symm;

namespace {

int count_fds() {
  int n = 0;
  DIR* d = opendir("/proc/self/fd");
  while (readdir(d)) ++n;
  closedir(d);
  return n;
}

// Sends `fd` to `name` with an arbitrary payload, as a process outside the job would.
void raw_send(const std::string& name, const void* payload, std::size_t len, int fd) {
  int s = socket(AF_UNIX, SOCK_DGRAM, 0);
  detail::send_fd_datagram(s, name, payload, len, fd, 0);
  close(s);
}

struct Wire {  // the channel's payload layout
  char magic[8];
  std::uint8_t nonce[16];
  std::int32_t sender;
  std::uint32_t tag;
};

}  // namespace

TEST(FdChannel, SocketNameCarriesNonceRankAndKey) {
  Nonce a = FdChannel::make_nonce(), b = FdChannel::make_nonce();
  SocketKey k = FdChannel::make_nonce();
  EXPECT_NE(a, b);
  EXPECT_NE(FdChannel::socket_name(a, 0, k), FdChannel::socket_name(a, 1, k));
  EXPECT_NE(FdChannel::socket_name(a, 0, k), FdChannel::socket_name(b, 0, k));
  EXPECT_EQ(FdChannel::socket_name(a, 3, k).size(), std::string("mori-symm-").size() + 32 + 2 + 1 + 32);
}

// The name a rank binds cannot be derived from the job's nonce and its rank (another user could bind it
// first): two channels of one job and rank draw different keys, and neither binds the name of nonce and rank
// alone.
TEST(FdChannel, BoundNameCarriesAKeyOfItsOwn) {
  Nonce n = FdChannel::make_nonce();
  FdChannel a(n, 2, {static_cast<int>(getpid()), 1, 2}, 1);
  FdChannel b(n, 2, {static_cast<int>(getpid()), 1, 2}, 1);
  EXPECT_NE(a.key(), b.key());
  EXPECT_NE(a.name(), b.name());
  EXPECT_EQ(a.name().rfind(FdChannel::socket_name(n, 2, a.key()), 0), 0u);
  // The old, predictable name is free: a squatter holding it stops nothing.
  int s = socket(AF_UNIX, SOCK_DGRAM, 0);
  ASSERT_GE(s, 0);
  std::string old = a.name().substr(0, a.name().rfind('-'));
  EXPECT_NO_THROW(detail::bind_abstract(s, old));
  close(s);
}

TEST(FdChannel, NameHeldByAnotherProcessIsNamedInTheError) {
  const std::string name = FdChannel::socket_name(FdChannel::make_nonce(), 0, FdChannel::make_nonce());
  int a = socket(AF_UNIX, SOCK_DGRAM, 0), b = socket(AF_UNIX, SOCK_DGRAM, 0);
  detail::bind_abstract(a, name);
  try {
    detail::bind_abstract(b, name);
    FAIL() << "a second bind of one name succeeded";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.api_error(), "EADDRINUSE");
    EXPECT_NE(std::string(e.what()).find("another process holds this abstract socket name"),
              std::string::npos)
        << e.what();
  }
  close(a);
  close(b);
}

TEST(FdChannel, JobMemberIsAcceptedInAnyOrder) {
  Nonce n = FdChannel::make_nonce();
  int pipefd[2];
  ASSERT_EQ(pipe(pipefd), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Rank 1 sends tag 2 first, then tag 1; it waits until rank 0 is bound and says its key.
    SocketKey k0{};
    if (read(pipefd[0], k0.data(), k0.size()) != static_cast<ssize_t>(k0.size())) _exit(3);
    FdChannel ch(n, 1, {0, static_cast<int>(getpid())}, 5);
    ch.set_peer_keys({k0, ch.key()});
    int fd = dup(1);
    ch.send(0, fd, 2);
    ch.send(0, fd, 1);
    _exit(0);
  }
  FdChannel ch(n, 0, {static_cast<int>(getpid()), static_cast<int>(child)}, 5);
  ASSERT_EQ(write(pipefd[1], ch.key().data(), ch.key().size()), static_cast<ssize_t>(ch.key().size()));
  auto fds1 = ch.receive({1}, 1, "test");
  auto fds2 = ch.receive({1}, 2, "test");
  ASSERT_EQ(fds1.size(), 1u);
  EXPECT_GE(fds1[0], 0);
  EXPECT_GE(fds2[0], 0);
  close(fds1[0]);
  close(fds2[0]);
  EXPECT_EQ(ch.rejected(), 0u);
  int st = 0;
  waitpid(child, &st, 0);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  close(pipefd[0]);
  close(pipefd[1]);
}

TEST(FdChannel, ForeignSenderIsRejectedAndItsFdClosed) {
  Nonce n = FdChannel::make_nonce();
  const int fds_before = count_fds();
  // The job is {this process, a pid that is not the sender}: the sender below claims rank 1 but is not it.
  FdChannel ch(n, 0, {static_cast<int>(getpid()), 999999}, 1);
  const int fds_with_socket = count_fds();
  EXPECT_EQ(fds_with_socket, fds_before + 1);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    Wire w{};
    std::memcpy(w.magic, "MORIFD01", 8);
    std::memcpy(w.nonce, n.data(), 16);  // even knowing the nonce
    w.sender = 1;
    w.tag = 1;
    raw_send(ch.name(), &w, sizeof(w), 0);
    const char junk[] = "garbage";
    raw_send(ch.name(), junk, sizeof(junk), 0);
    _exit(0);
  }
  int st = 0;
  waitpid(child, &st, 0);
  EXPECT_THROW(ch.receive({1}, 1, "test"), TimeoutError);
  EXPECT_EQ(ch.rejected(), 2u);
  EXPECT_EQ(count_fds(), fds_with_socket) << "a rejected datagram's fd was not closed";
}

TEST(FdChannel, ReceiveTimesOutNamingTheMissingRanks) {
  Nonce n = FdChannel::make_nonce();
  FdChannel ch(n, 0, {static_cast<int>(getpid()), 1, 2}, 0.2);
  try {
    ch.receive({1, 2}, 1, "exchange");
    FAIL();
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("ranks 1,2"), std::string::npos) << e.what();
  }
}

TEST(FdChannel, SendToUnboundPeerTimesOut) {
  Nonce n = FdChannel::make_nonce();
  FdChannel ch(n, 0, {static_cast<int>(getpid()), 1}, 0.2);
  ch.set_peer_keys({ch.key(), FdChannel::make_nonce()});
  EXPECT_THROW(ch.send(1, 0, 1), TimeoutError);
}

// A job member's descriptor that this process cannot install (out of descriptors: MSG_CTRUNC) ends the
// exchange at once with EMFILE on the receiving rank, instead of a timeout that blames the sender. The
// receiver runs in a child of its own (its descriptor limit is lowered), the sender in a grandchild.
TEST(FdChannel, OutOfDescriptorsFailsAtOnceNamingEmfile) {
  pid_t receiver = fork();
  ASSERT_GE(receiver, 0);
  if (receiver == 0) {
    const Nonce n = FdChannel::make_nonce();
    int keyfd[2];
    if (pipe(keyfd) != 0) _exit(10);
    pid_t sender = fork();
    if (sender < 0) _exit(11);
    if (sender == 0) {
      SocketKey k0{};
      if (read(keyfd[0], k0.data(), k0.size()) != static_cast<ssize_t>(k0.size())) _exit(3);
      FdChannel ch(n, 1, {static_cast<int>(getppid()), static_cast<int>(getpid())}, 5);
      ch.set_peer_keys({k0, ch.key()});
      ch.send(0, 1, 1);
      _exit(0);
    }
    int code = 0;
    try {
      FdChannel ch(n, 0, {static_cast<int>(getpid()), static_cast<int>(sender)}, 5);
      // No descriptor number is free below the limit: the next one the kernel installs fails (EMFILE).
      const int lowest_free = dup(0);
      close(lowest_free);
      rlimit rl{};
      getrlimit(RLIMIT_NOFILE, &rl);
      rl.rlim_cur = static_cast<rlim_t>(lowest_free);
      if (setrlimit(RLIMIT_NOFILE, &rl) != 0) _exit(12);
      if (write(keyfd[1], ch.key().data(), ch.key().size()) != static_cast<ssize_t>(ch.key().size()))
        _exit(13);
      const auto t0 = std::chrono::steady_clock::now();
      try {
        ch.receive({1}, 1, "test");
        code = 20;  // received, though no descriptor was free
      } catch (const ApiError& e) {
        const std::string what = e.what();
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        code = e.api_error() != "EMFILE"                       ? 21
               : what.find("rank 1 sent") == std::string::npos ? 22
               : s > 2                                         ? 23
                                                               : 0;
        if (code) std::fprintf(stderr, "%s (%.1f s)\n", what.c_str(), s);
      } catch (const TimeoutError& e) {
        std::fprintf(stderr, "%s\n", e.what());
        code = 24;  // waited out the bound, blaming the sender
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s\n", e.what());
      code = 25;
    }
    int st = 0;
    waitpid(sender, &st, 0);
    _exit(code);
  }
  int st = 0;
  waitpid(receiver, &st, 0);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0)
      << "20: received; 21: not EMFILE; 22: sender not named; 23: slow; 24: timed out";
}
