// FdChannel framing and sender checks, across real processes (fork).
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <dirent.h>
#include <cstddef>
#include <cstring>

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

TEST(FdChannel, SocketNameCarriesNonceAndRank) {
  Nonce a = FdChannel::make_nonce(), b = FdChannel::make_nonce();
  EXPECT_NE(a, b);
  EXPECT_NE(FdChannel::socket_name(a, 0), FdChannel::socket_name(a, 1));
  EXPECT_NE(FdChannel::socket_name(a, 0), FdChannel::socket_name(b, 0));
  EXPECT_EQ(FdChannel::socket_name(a, 3).size(), std::string("mori-symm-").size() + 32 + 2);
}

TEST(FdChannel, JobMemberIsAcceptedInAnyOrder) {
  Nonce n = FdChannel::make_nonce();
  int pipefd[2];
  ASSERT_EQ(pipe(pipefd), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Rank 1 sends tag 2 first, then tag 1; it waits until rank 0 is bound.
    char go;
    if (read(pipefd[0], &go, 1) != 1) _exit(3);
    FdChannel ch(n, 1, {0, static_cast<int>(getpid())}, 5);
    int fd = dup(1);
    ch.send(0, fd, 2);
    ch.send(0, fd, 1);
    _exit(0);
  }
  FdChannel ch(n, 0, {static_cast<int>(getpid()), static_cast<int>(child)}, 5);
  ASSERT_EQ(write(pipefd[1], "g", 1), 1);
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
    raw_send(FdChannel::socket_name(n, 0), &w, sizeof(w), 0);
    const char junk[] = "garbage";
    raw_send(FdChannel::socket_name(n, 0), junk, sizeof(junk), 0);
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
  EXPECT_THROW(ch.send(1, 0, 1), TimeoutError);
}
