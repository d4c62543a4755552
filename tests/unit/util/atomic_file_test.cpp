// AtomicFile: commit publishes the whole file and nothing else, a dropped or failed one leaves
// nothing behind, and fsync and rename failures are reported with their cause. The failures
// are injected by this executable's own fsync() and rename(), which take precedence over the
// C library's for the code linked into it (wf_util is a static library) and otherwise do what
// the system calls do.

#include "wheelforge/util/atomic_file.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace {

/// What the interposed calls do: 0 passes through, an errno value fails with it.
struct Injected {
  int fsync_file = 0;  ///< fsync of a regular file
  int fsync_dir = 0;   ///< fsync of a directory
  int rename = 0;
};
Injected g_inject;

}  // namespace

extern "C" int fsync(int fd) {
  struct stat st {};
  const bool is_dir = ::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode);
  const int err = is_dir ? g_inject.fsync_dir : g_inject.fsync_file;
  if (err != 0) {
    errno = err;
    return -1;
  }
  return static_cast<int>(::syscall(SYS_fsync, fd));
}

extern "C" int rename(const char* from, const char* to) noexcept {
  if (g_inject.rename != 0) {
    errno = g_inject.rename;
    return -1;
  }
  return ::renameat(AT_FDCWD, from, AT_FDCWD, to);
}

namespace wf {
namespace {

namespace fs = std::filesystem;

class AtomicFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    g_inject = {};
    dir_ = fs::temp_directory_path() /
           ("wf-atomic-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    g_inject = {};
    fs::remove_all(dir_);
  }

  /// Every name in dir_, sorted.
  [[nodiscard]] std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }
  static std::string content(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
  }

  fs::path dir_;
};

TEST_F(AtomicFileTest, CommitPublishesTheWholeFileUnderItsNameAndNothingElse) {
  {
    auto file = AtomicFile::create_for(dir_ / "out.txt");
    ASSERT_TRUE(file) << file.error().message;
    const fs::path temp = file->temp_path();
    EXPECT_EQ(temp.parent_path(), dir_);  // in the target directory: the rename stays on it
    EXPECT_EQ(temp.filename().string().rfind(".tmp-", 0), 0U) << temp;
    ASSERT_TRUE(file->write("hello "));
    ASSERT_TRUE(file->write("world"));
    ASSERT_TRUE(file->set_mode(0640));
    EXPECT_FALSE(fs::exists(dir_ / "out.txt"));  // nothing under the name before commit()
    ASSERT_TRUE(file->commit(dir_ / "out.txt"));
    EXPECT_EQ(content(dir_ / "out.txt"), "hello world");
    EXPECT_EQ(fs::status(dir_ / "out.txt").permissions() & fs::perms::all,
              fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
    EXPECT_EQ(names(), std::vector<std::string>{"out.txt"});
    EXPECT_TRUE(file->temp_path().empty());
    EXPECT_EQ(file->fd(), -1);
    // Committed once: the object is spent.
    auto again = file->commit(dir_ / "other.txt");
    ASSERT_FALSE(again);
    EXPECT_EQ(again.error().code, Errc::internal);
  }
  // Its destructor left the published file alone.
  EXPECT_EQ(names(), std::vector<std::string>{"out.txt"});
  EXPECT_EQ(content(dir_ / "out.txt"), "hello world");
}

TEST_F(AtomicFileTest, CommitReplacesAnExistingFile) {
  std::ofstream(dir_ / "out.txt") << "old";
  auto file = AtomicFile::create_for(dir_ / "out.txt");
  ASSERT_TRUE(file);
  ASSERT_TRUE(file->write("new"));
  ASSERT_TRUE(file->commit(dir_ / "out.txt"));
  EXPECT_EQ(content(dir_ / "out.txt"), "new");
  EXPECT_EQ(names(), std::vector<std::string>{"out.txt"});
}

TEST_F(AtomicFileTest, CreateForMakesTheTargetDirectory) {
  const fs::path dest = dir_ / "a" / "b" / "out.txt";
  auto file = AtomicFile::create_for(dest, ".partial-");
  ASSERT_TRUE(file) << file.error().message;
  EXPECT_EQ(file->temp_path().parent_path(), dest.parent_path());
  EXPECT_EQ(file->temp_path().filename().string().rfind(".partial-", 0), 0U);
  ASSERT_TRUE(file->commit(dest));
  EXPECT_TRUE(fs::is_regular_file(dest));
  EXPECT_EQ(content(dest), "");
}

TEST_F(AtomicFileTest, ATempFileInAnotherDirectoryIsRenamedIntoTheTarget) {
  fs::create_directories(dir_ / "tmp");
  fs::create_directories(dir_ / "final");
  auto file = AtomicFile::create(dir_ / "tmp", "upload-");
  ASSERT_TRUE(file);
  ASSERT_TRUE(file->write("blob"));
  ASSERT_TRUE(file->sync());
  ASSERT_TRUE(file->commit(dir_ / "final" / "name"));
  EXPECT_EQ(content(dir_ / "final" / "name"), "blob");
  EXPECT_TRUE(fs::is_empty(dir_ / "tmp"));
}

TEST_F(AtomicFileTest, TheDestructorNeverCommitsItRemovesTheTemp) {
  {
    auto file = AtomicFile::create_for(dir_ / "out.txt");
    ASSERT_TRUE(file);
    ASSERT_TRUE(file->write("half of it"));
    ASSERT_TRUE(file->sync());
    EXPECT_EQ(names().size(), 1U);  // the temp file
  }
  EXPECT_TRUE(names().empty());
  // Moved: only the last owner removes it, once.
  {
    auto file = AtomicFile::create_for(dir_ / "out.txt");
    ASSERT_TRUE(file);
    AtomicFile moved = std::move(*file);
    EXPECT_TRUE(file->temp_path().empty());  // NOLINT(bugprone-use-after-move)
    EXPECT_EQ(names().size(), 1U);
    ASSERT_TRUE(moved.write("x"));
  }
  EXPECT_TRUE(names().empty());
  // abort() does it early.
  auto file = AtomicFile::create_for(dir_ / "out.txt");
  ASSERT_TRUE(file);
  file->abort();
  EXPECT_TRUE(names().empty());
  EXPECT_FALSE(file->commit(dir_ / "out.txt"));
  EXPECT_TRUE(names().empty());
}

TEST_F(AtomicFileTest, AFailedFileFsyncIsReportedAndNothingIsPublished) {
  auto file = AtomicFile::create_for(dir_ / "out.txt");
  ASSERT_TRUE(file);
  ASSERT_TRUE(file->write("data"));
  const std::string temp = file->temp_path().string();
  g_inject.fsync_file = EIO;
  auto committed = file->commit(dir_ / "out.txt");
  ASSERT_FALSE(committed);
  EXPECT_EQ(committed.error().code, Errc::io);
  EXPECT_EQ(committed.error().message, "fsync " + temp + ": Input/output error");
  EXPECT_FALSE(fs::exists(dir_ / "out.txt"));
  // The bytes on disk are unknown after a failed fsync: no later commit publishes them.
  g_inject = {};
  auto retried = file->commit(dir_ / "out.txt");
  ASSERT_FALSE(retried);
  EXPECT_EQ(retried.error().code, Errc::internal);
  EXPECT_FALSE(fs::exists(dir_ / "out.txt"));
  file->abort();
  EXPECT_TRUE(names().empty());
}

TEST_F(AtomicFileTest, SyncReportsAFullDiskAsStorageFull) {
  auto file = AtomicFile::create_for(dir_ / "out.txt");
  ASSERT_TRUE(file);
  g_inject.fsync_file = ENOSPC;
  auto synced = file->sync();
  ASSERT_FALSE(synced);
  EXPECT_EQ(synced.error().code, Errc::storage_full);
  EXPECT_NE(synced.error().message.find("No space left on device"), std::string::npos);
  g_inject = {};
  EXPECT_FALSE(file->commit(dir_ / "out.txt"));
  EXPECT_FALSE(fs::exists(dir_ / "out.txt"));
}

TEST_F(AtomicFileTest, AFailedDirectoryFsyncTakesANewFileBackAndKeepsAReplacedOne) {
  auto file = AtomicFile::create_for(dir_ / "new.txt");
  ASSERT_TRUE(file);
  ASSERT_TRUE(file->write("data"));
  g_inject.fsync_dir = EIO;
  auto committed = file->commit(dir_ / "new.txt");
  ASSERT_FALSE(committed);
  EXPECT_EQ(committed.error().code, Errc::io);
  EXPECT_EQ(committed.error().message, "fsync directory " + dir_.string() + ": Input/output error");
  EXPECT_TRUE(names().empty());  // neither the new file nor the temp

  // A replaced file cannot be brought back: the new bytes stay, and the error is reported.
  g_inject = {};
  std::ofstream(dir_ / "old.txt") << "old";
  auto replacing = AtomicFile::create_for(dir_ / "old.txt");
  ASSERT_TRUE(replacing);
  ASSERT_TRUE(replacing->write("new"));
  g_inject.fsync_dir = EIO;
  EXPECT_FALSE(replacing->commit(dir_ / "old.txt"));
  g_inject = {};
  EXPECT_EQ(names(), std::vector<std::string>{"old.txt"});
  EXPECT_EQ(content(dir_ / "old.txt"), "new");
}

TEST_F(AtomicFileTest, AFailedRenameIsReportedAndTheDestructorRemovesTheTemp) {
  std::ofstream(dir_ / "out.txt") << "old";
  {
    auto file = AtomicFile::create_for(dir_ / "out.txt");
    ASSERT_TRUE(file);
    ASSERT_TRUE(file->write("new"));
    g_inject.rename = EROFS;
    auto committed = file->commit(dir_ / "out.txt");
    g_inject = {};
    ASSERT_FALSE(committed);
    // A store this process may not write waits for an administrator.
    EXPECT_EQ(committed.error().code, Errc::unavailable);
    EXPECT_EQ(committed.error().message,
              "rename to " + (dir_ / "out.txt").string() + ": Read-only file system");
    EXPECT_EQ(names().size(), 2U);  // the old file and the temp, until the destructor
  }
  EXPECT_EQ(names(), std::vector<std::string>{"out.txt"});
  EXPECT_EQ(content(dir_ / "out.txt"), "old");
}

TEST_F(AtomicFileTest, DeferredDurabilityRenamesWithoutSyncing) {
  auto file = AtomicFile::create_for(dir_ / "out.txt");
  ASSERT_TRUE(file);
  ASSERT_TRUE(file->write("batch"));
  // The caller makes the batch durable later (syncfs, fsync_dir): no fsync here.
  g_inject.fsync_file = EIO;
  g_inject.fsync_dir = EIO;
  ASSERT_TRUE(file->commit(dir_ / "out.txt", Durability::deferred));
  g_inject = {};
  EXPECT_EQ(content(dir_ / "out.txt"), "batch");
  EXPECT_EQ(names(), std::vector<std::string>{"out.txt"});
}

TEST_F(AtomicFileTest, CreateFailsWithTheDirectoryNamed) {
  auto file = AtomicFile::create(dir_ / "missing");
  ASSERT_FALSE(file);
  EXPECT_EQ(file.error().code, Errc::io);
  EXPECT_EQ(file.error().message,
            "create temp file in " + (dir_ / "missing").string() + ": No such file or directory");
}

TEST_F(AtomicFileTest, WriteFileAtomicGoesThroughIt) {
  ASSERT_TRUE(write_file_atomic(dir_ / "sub" / "marker", "ready\n"));
  EXPECT_EQ(content(dir_ / "sub" / "marker"), "ready\n");
  EXPECT_EQ(fs::status(dir_ / "sub" / "marker").permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                fs::perms::others_read);
  g_inject.fsync_file = EIO;
  auto failed = write_file_atomic(dir_ / "sub" / "other", "x");
  g_inject = {};
  ASSERT_FALSE(failed);
  EXPECT_EQ(failed.error().code, Errc::io);
  EXPECT_EQ(failed.error().message.rfind("fsync " + (dir_ / "sub").string() + "/.tmp-", 0), 0U)
      << failed.error().message;
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(dir_ / "sub")) {
    left.push_back(e.path().filename().string());
  }
  EXPECT_EQ(left, std::vector<std::string>{"marker"});
}

}  // namespace
}  // namespace wf
