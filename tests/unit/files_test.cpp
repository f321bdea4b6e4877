// SPDX-License-Identifier: MIT
// The one reader and the one writer (files.hpp): what they refuse, what they keep, and how they name a file.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>

#include "mori/symm/base/files.hpp"

using namespace mori::symm;

namespace {

// A fresh folder, removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/mori-files-XXXXXX";
    dir_ = mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(dir_); }
  std::string operator/(const std::string& name) const { return dir_ + "/" + name; }

 private:
  std::string dir_;
};

// The FileError read_file throws for `path`, or a failed expectation.
FileError read_error(const std::string& path, const FileKind& kind) {
  try {
    read_file(path, kind);
  } catch (const FileError& e) {
    return e;
  }
  ADD_FAILURE() << "read_file(" << path << ") did not throw";
  return FileError(FileError::Reason::call_failed, path, "none", __FILE__, __LINE__, 0, {});
}

mode_t mode_of(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(stat(path.c_str(), &st), 0);
  return st.st_mode & 07777;
}

}  // namespace

TEST(FilesRead, RegularFileWhole) {
  TempDir d;
  write_new_file(d / "a.hip", "int x;\n", 0644, false);
  EXPECT_EQ(read_file(d / "a.hip", kKernelSource), "int x;\n");
}

TEST(FilesRead, FifoRefusedAtOnceNamingIt) {
  TempDir d;
  ASSERT_EQ(mkfifo((d / "a.hip").c_str(), 0600), 0);
  const auto t0 = std::chrono::steady_clock::now();
  const FileError e = read_error(d / "a.hip", kKernelSource);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
  EXPECT_EQ(e.reason(), FileError::Reason::not_regular);
  EXPECT_EQ(e.code(), ExitCode::usage);
  EXPECT_NE(std::string(e.what()).find("kernel source '" + (d / "a.hip") + "' is a FIFO"), std::string::npos)
      << e.what();
}

TEST(FilesRead, FolderDeviceAndSocketRefused) {
  TempDir d;
  std::filesystem::create_directory(d / "dir.hip");
  EXPECT_NE(std::string(read_error(d / "dir.hip", kKernelSource).what()).find("is a folder"),
            std::string::npos);
  ASSERT_EQ(symlink("/dev/zero", (d / "zero.hip").c_str()), 0);
  const std::string zero = read_error(d / "zero.hip", kKernelSource).what();
  EXPECT_NE(zero.find("a character device, a symlink to /dev/zero"), std::string::npos) << zero;
  // A socket cannot even be opened (ENXIO): still said to be a socket.
  const int s = socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(s, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, (d / "sock").c_str(), sizeof(addr.sun_path) - 1);
  ASSERT_EQ(bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  const FileError e = read_error(d / "sock", kTeardownJournal);
  close(s);
  EXPECT_EQ(e.reason(), FileError::Reason::not_regular);
  EXPECT_NE(std::string(e.what()).find("teardown journal '" + (d / "sock") + "' is a socket"),
            std::string::npos)
      << e.what();
}

TEST(FilesRead, CapPerKind) {
  TempDir d;
  write_new_file(d / "big", "", 0644, false);
  ASSERT_EQ(truncate((d / "big").c_str(), (4 << 20) + 1), 0);
  const FileError e = read_error(d / "big", kKernelSource);
  EXPECT_EQ(e.reason(), FileError::Reason::too_large);
  EXPECT_NE(std::string(e.what()).find("EFBIG"), std::string::npos);
  EXPECT_NE(std::string(e.what()).find("4 MiB"), std::string::npos);
  // The same file is within a journal's cap.
  EXPECT_EQ(read_file(d / "big", kTeardownJournal).size(), (4u << 20) + 1);
}

TEST(FilesRead, MissingIsACallErrorOrAbsent) {
  TempDir d;
  const FileError e = read_error(d / "none", kJitCacheFile);
  EXPECT_EQ(e.reason(), FileError::Reason::call_failed);
  EXPECT_EQ(e.errno_value(), ENOENT);
  EXPECT_EQ(e.code(), ExitCode::runtime);
  std::string out = "untouched";
  EXPECT_FALSE(read_file_if_present(d / "none", kKernelSource, out));
  EXPECT_EQ(out, "untouched");
}

TEST(FilesRead, ProcFilesWithSizeZero) {
  // /proc files say 0 bytes and still have content: read to their end.
  EXPECT_FALSE(read_file("/proc/self/status", kSystemFile).empty());
}

TEST(FilesWrite, ReplacedFileKeepsItsMode) {
  TempDir d;
  write_new_file(d / "r.json", "old\n", 0600, false);
  ASSERT_EQ(chmod((d / "r.json").c_str(), 0600), 0);
  write_output(d / "r.json", "new\n");
  EXPECT_EQ(read_file(d / "r.json", kSystemFile), "new\n");
  EXPECT_EQ(mode_of(d / "r.json"), 0600u);
}

TEST(FilesWrite, HardLinkKeepsTheOldContent) {
  TempDir d;
  write_new_file(d / "r.json", "old\n", 0644, false);
  ASSERT_EQ(link((d / "r.json").c_str(), (d / "other.json").c_str()), 0);
  write_output(d / "r.json", "new\n");
  EXPECT_EQ(read_file(d / "r.json", kSystemFile), "new\n");
  EXPECT_EQ(read_file(d / "other.json", kSystemFile), "old\n");
}

TEST(FilesWrite, NewFileExclusive) {
  TempDir d;
  write_new_file(d / "claim", "a", 0644, true);
  try {
    write_new_file(d / "claim", "b", 0644, false);
    ADD_FAILURE() << "a second create succeeded";
  } catch (const FileError& e) {
    EXPECT_EQ(e.errno_value(), EEXIST);
  }
  EXPECT_EQ(read_file(d / "claim", kSystemFile), "a");
}

// The FileError write_output throws for `path`, or a failed expectation.
FileError write_error(const std::string& path) {
  try {
    write_output(path, "x\n");
  } catch (const FileError& e) {
    return e;
  }
  ADD_FAILURE() << "write_output(" << path << ") did not throw";
  return FileError(FileError::Reason::call_failed, path, "none", __FILE__, __LINE__, 0, {});
}

bool is_type(const std::string& path, mode_t type) {
  struct stat st {};
  return lstat(path.c_str(), &st) == 0 && (st.st_mode & S_IFMT) == type;
}

TEST(FilesWrite, DeviceRefusedNotWritten) {
  const FileError e = write_error("/dev/full");
  EXPECT_EQ(e.reason(), FileError::Reason::not_regular);
  EXPECT_EQ(e.code(), ExitCode::usage);
  EXPECT_NE(std::string(e.what()).find("'/dev/full' is a character device"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("only to a regular file or a new name"), std::string::npos)
      << e.what();
}

TEST(FilesWrite, FifoRefusedStillAFifo) {
  TempDir d;
  ASSERT_EQ(mkfifo((d / "out").c_str(), 0600), 0);
  const FileError e = write_error(d / "out");
  EXPECT_EQ(e.reason(), FileError::Reason::not_regular);
  EXPECT_NE(std::string(e.what()).find("is a FIFO"), std::string::npos) << e.what();
  EXPECT_THROW(resolve_output_path(d / "out"), FileError);
  EXPECT_TRUE(is_type(d / "out", S_IFIFO));
}

TEST(FilesWrite, SymlinkLoopRefusedNotReplaced) {
  TempDir d;
  ASSERT_EQ(symlink("l2", (d / "l1").c_str()), 0);
  ASSERT_EQ(symlink("l1", (d / "l2").c_str()), 0);
  const FileError e = write_error(d / "l1");
  EXPECT_EQ(e.reason(), FileError::Reason::not_regular);
  EXPECT_NE(std::string(e.what()).find("symlink loop"), std::string::npos) << e.what();
  EXPECT_THROW(resolve_output_path(d / "l1"), FileError);
  EXPECT_TRUE(is_type(d / "l1", S_IFLNK));
  EXPECT_TRUE(is_type(d / "l2", S_IFLNK));
  // Nothing left beside them: no temporary file.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(d / ""), std::filesystem::directory_iterator{}),
            2);
}

TEST(FilesWrite, DanglingSymlinkRefusedNothingCreated) {
  TempDir d;
  ASSERT_EQ(symlink("t.json", (d / "link").c_str()), 0);
  const FileError e = write_error(d / "link");
  EXPECT_EQ(e.code(), ExitCode::usage);
  EXPECT_NE(std::string(e.what()).find("dangling symlink"), std::string::npos) << e.what();
  EXPECT_THROW(resolve_output_path(d / "link"), FileError);
  EXPECT_TRUE(is_type(d / "link", S_IFLNK));
  EXPECT_FALSE(std::filesystem::exists(d / "t.json"));
}

TEST(FilesWrite, OwnSymlinkToAFileAndThroughAFolderLinkFollowed) {
  TempDir d;
  ASSERT_EQ(mkdir((d / "real").c_str(), 0755), 0);
  write_new_file(d / "real/t.json", "old\n", 0600, false);
  ASSERT_EQ(symlink("real/t.json", (d / "link").c_str()), 0);
  ASSERT_EQ(symlink("real", (d / "dir").c_str()), 0);
  write_output(d / "link", "new\n");
  EXPECT_TRUE(is_type(d / "link", S_IFLNK));
  EXPECT_EQ(read_file(d / "real/t.json", kSystemFile), "new\n");
  EXPECT_EQ(mode_of(d / "real/t.json"), 0600u);
  // A new name in a folder reached through a symlink is no dangling link: created there.
  EXPECT_EQ(resolve_output_path(d / "dir/../dir/n.json"), d / "real/n.json");
  write_output(d / "dir/n.json", "n\n");
  EXPECT_EQ(read_file(d / "real/n.json", kSystemFile), "n\n");
}

// A sticky world-writable folder (as /tmp) holding a symlink of uid 65534 (another user): as the kernel's
// protected_symlinks rule, this process (root) does not follow it, whether it leads to a new name or to a
// file.
TEST(FilesWrite, AnotherUsersSymlinkInAStickyFolderRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (to give a symlink to another uid)";
  TempDir d;
  ASSERT_EQ(mkdir((d / "sticky").c_str(), 0700), 0);
  ASSERT_EQ(chmod((d / "sticky").c_str(), 01777), 0);
  write_new_file(d / "victim", "keep\n", 0644, false);
  ASSERT_EQ(symlink((d / "victim").c_str(), (d / "sticky/to-file").c_str()), 0);
  ASSERT_EQ(symlink((d / "created").c_str(), (d / "sticky/to-new").c_str()), 0);
  ASSERT_EQ(symlink((d / "sticky/to-file").c_str(), (d / "sticky/own").c_str()), 0);
  for (const char* l : {"sticky/to-file", "sticky/to-new"})
    ASSERT_EQ(lchown((d / l).c_str(), 65534, 65534), 0);
  for (const char* l : {"sticky/to-file", "sticky/to-new", "sticky/own"}) {
    const FileError e = write_error(d / l);
    EXPECT_EQ(e.code(), ExitCode::usage) << e.what();
    EXPECT_NE(std::string(e.what()).find("sticky world-writable folder"), std::string::npos) << e.what();
    EXPECT_NE(output_path_refusal(d / l), "") << l;
  }
  EXPECT_EQ(read_file(d / "victim", kSystemFile), "keep\n");
  EXPECT_FALSE(std::filesystem::exists(d / "created"));
  // The folder's owner's link (root's) is followed as before; so is another user's link in a folder that is
  // not sticky.
  ASSERT_EQ(lchown((d / "sticky/to-file").c_str(), 0, 0), 0);
  write_output(d / "sticky/to-file", "root\n");
  EXPECT_EQ(read_file(d / "victim", kSystemFile), "root\n");
  ASSERT_EQ(chmod((d / "sticky").c_str(), 0777), 0);
  ASSERT_EQ(lchown((d / "sticky/to-file").c_str(), 65534, 65534), 0);
  write_output(d / "sticky/to-file", "plain\n");
  EXPECT_EQ(read_file(d / "victim", kSystemFile), "plain\n");
}

TEST(FilesWrite, FolderTakingNoNewFileRefusedUpFront) {
  // As root /proc says it is writable (access W_OK), yet no file can be created there.
  if (geteuid() != 0 || access("/proc", W_OK) != 0) GTEST_SKIP() << "needs root (access(/proc, W_OK) == 0)";
  try {
    resolve_output_path("/proc/version");
    ADD_FAILURE() << "resolve_output_path(/proc/version) did not throw";
  } catch (const FileError& e) {
    EXPECT_EQ(e.code(), ExitCode::usage);
    EXPECT_NE(std::string(e.what()).find("the folder '/proc'"), std::string::npos) << e.what();
  }
}
