#include "wheelforge/store/blob_store.hpp"

#include <gtest/gtest.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <thread>

#include "wheelforge/crypto/digest.hpp"

namespace wf::store {
namespace {

namespace fs = std::filesystem;

class BlobStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("wf-store-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  static std::size_t count_files(const fs::path& p) {
    std::size_t n = 0;
    for (const auto& e : fs::recursive_directory_iterator(p)) n += e.is_regular_file() ? 1U : 0U;
    return n;
  }
  fs::path dir_;
};

TEST_F(BlobStoreTest, CommitPublishesUnderSha256) {
  auto store = BlobStore::open(dir_);
  ASSERT_TRUE(store);
  auto temp = (*store)->create_temp();
  ASSERT_TRUE(temp);
  ASSERT_TRUE(temp->write("hello ", 6));
  ASSERT_TRUE(temp->write("world", 5));
  ASSERT_TRUE(temp->finish());
  EXPECT_EQ(temp->size(), 11U);
  const std::string sha = temp->sha256();
  EXPECT_EQ(sha, crypto::sha256_hex("hello world"));
  auto path = (*store)->commit(std::move(*temp));
  ASSERT_TRUE(path);
  EXPECT_EQ(*path, (*store)->blob_path(sha));
  EXPECT_TRUE((*store)->contains(sha));
  EXPECT_EQ(count_files((*store)->tmp_dir()), 1U);  // only the session lock
  std::ifstream in(*path);
  std::string content((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(content, "hello world");
}

TEST_F(BlobStoreTest, DeferredSyncPublishesTheSameBlobsAndFlushes) {
  auto store = BlobStore::open(dir_);
  ASSERT_TRUE(store);
  auto temp = (*store)->create_temp();
  ASSERT_TRUE(temp);
  ASSERT_TRUE(temp->write("deferred", 8));
  ASSERT_TRUE(temp->finish(Sync::deferred));
  const std::string sha = temp->sha256();
  EXPECT_EQ(sha, crypto::sha256_hex("deferred"));
  auto path = (*store)->commit(std::move(*temp), Sync::deferred);
  ASSERT_TRUE(path);
  EXPECT_EQ(*path, (*store)->blob_path(sha));
  auto meta = (*store)->put("Name: x\n", Sync::deferred);
  ASSERT_TRUE(meta);
  EXPECT_TRUE((*store)->contains(*meta));
  EXPECT_EQ(count_files((*store)->tmp_dir()), 1U);  // only the session lock
  EXPECT_TRUE((*store)->flush());
  EXPECT_EQ(fs::status(*path).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
}

TEST_F(BlobStoreTest, WriteAndHashOnTwoThreadsMatchesWrite) {
  auto store = BlobStore::open(dir_);
  ASSERT_TRUE(store);
  auto temp = (*store)->create_temp();
  ASSERT_TRUE(temp);
  std::string expected;
  for (std::size_t chunk = 0; chunk < 8; ++chunk) {
    const std::string bytes(100000 + chunk, static_cast<char>('a' + static_cast<int>(chunk)));
    expected += bytes;
    Status written = ok_status();
    std::thread writer([&] { written = temp->write_unhashed(bytes.data(), bytes.size()); });
    temp->hash(bytes.data(), bytes.size());
    writer.join();
    ASSERT_TRUE(written);
  }
  ASSERT_TRUE(temp->finish());
  EXPECT_EQ(temp->size(), expected.size());
  EXPECT_EQ(temp->sha256(), crypto::sha256_hex(expected));
  std::ifstream in(temp->path(), std::ios::binary);
  const std::string content((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(content, expected);
}

TEST_F(BlobStoreTest, DroppedTempFileLeavesNothing) {
  auto store = BlobStore::open(dir_);
  ASSERT_TRUE(store);
  {
    auto temp = (*store)->create_temp();
    ASSERT_TRUE(temp);
    ASSERT_TRUE(temp->write("partial", 7));
    EXPECT_EQ(count_files((*store)->tmp_dir()), 2U);  // the lock file and the temp file
  }
  EXPECT_EQ(count_files((*store)->tmp_dir()), 1U);
  EXPECT_EQ(count_files((*store)->blobs_dir()), 0U);
}

TEST_F(BlobStoreTest, OpenRemovesStaleTempsButNotLiveSessions) {
  fs::create_directories(dir_ / "tmp" / "s-dead");
  std::ofstream(dir_ / "tmp" / "s-dead" / ".lock") << "";
  std::ofstream(dir_ / "tmp" / "s-dead" / "upload-stale") << "junk";
  std::ofstream(dir_ / "tmp" / "loose-file") << "junk";
  auto live = BlobStore::open(dir_);
  ASSERT_TRUE(live);
  EXPECT_FALSE(fs::exists(dir_ / "tmp" / "s-dead"));
  EXPECT_FALSE(fs::exists(dir_ / "tmp" / "loose-file"));
  auto temp = (*live)->create_temp();
  ASSERT_TRUE(temp);
  // A second process (here: a second store) must not remove the live session's temp file.
  auto other = BlobStore::open(dir_);
  ASSERT_TRUE(other);
  EXPECT_TRUE(fs::exists(temp->path()));
  EXPECT_NE((*other)->tmp_dir(), (*live)->tmp_dir());
}

TEST_F(BlobStoreTest, PutIsIdempotent) {
  auto store = BlobStore::open(dir_);
  ASSERT_TRUE(store);
  auto a = (*store)->put("Metadata-Version: 2.1\n");
  auto b = (*store)->put("Metadata-Version: 2.1\n");
  ASSERT_TRUE(a);
  ASSERT_TRUE(b);
  EXPECT_EQ(*a, *b);
  EXPECT_EQ(count_files((*store)->blobs_dir()), 1U);
  EXPECT_FALSE((*store)->contains("not-a-hash"));
}

TEST_F(BlobStoreTest, AStoreThatMayNotBeWrittenNamesItsDataDirectory) {
  const Error ro = store_error(dir_, errno_error(EROFS, "create temp file in /x/tmp/s-1"));
  EXPECT_EQ(ro.code, Errc::unavailable);
  EXPECT_EQ(ro.message, "the data directory " + dir_.string() +
                            " is not writable (create temp file in /x/tmp/s-1: Read-only file "
                            "system): the server cannot store files until an administrator makes "
                            "it writable");
  const Error io = store_error(dir_, errno_error(EIO, "fsync x"));
  EXPECT_EQ(io.code, Errc::io);
  EXPECT_EQ(io.message, "fsync x: Input/output error");

  // A real one: the session directory taken away under a live store.
  auto store = BlobStore::open(dir_);
  ASSERT_TRUE(store);
  EXPECT_EQ((*store)->data_dir(), dir_);
  fs::remove_all((*store)->tmp_dir());
  auto temp = (*store)->create_temp();
  ASSERT_FALSE(temp);
  EXPECT_EQ(temp.error().code, Errc::io);
  EXPECT_NE(temp.error().message.find((*store)->tmp_dir().string()), std::string::npos);
}

TEST_F(BlobStoreTest, WithdrawUndoesAPublish) {
  auto store = BlobStore::open(dir_);
  ASSERT_TRUE(store);
  auto sha = (*store)->put("Name: demo\n");
  ASSERT_TRUE(sha);
  EXPECT_TRUE((*store)->contains(*sha));
  EXPECT_TRUE((*store)->withdraw(*sha));
  EXPECT_FALSE((*store)->contains(*sha));
  EXPECT_TRUE((*store)->withdraw(*sha));  // already gone: fine
  EXPECT_FALSE((*store)->withdraw("not-a-hash"));
}

}  // namespace
}  // namespace wf::store
