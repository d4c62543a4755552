#include "wheelforge/store/blob_store.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

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

TEST_F(BlobStoreTest, TheStoreOwnsTheBlobPathLayout) {
  auto store = BlobStore::open(dir_);
  ASSERT_TRUE(store);
  const std::string sha = crypto::sha256_hex("layout");
  const fs::path expected = dir_ / "blobs" / sha.substr(0, 2) / sha.substr(2, 2) / sha;
  EXPECT_EQ((*store)->blob_path(sha), expected);
  EXPECT_EQ((*store)->blob_file(sha), expected.string());
  EXPECT_EQ((*store)->blobs_dir(), dir_ / "blobs");
  // The same layout in a data directory that is not open as a store (a backup being written).
  const fs::path other = dir_ / "backup";
  const fs::path in_other = other / "blobs" / sha.substr(0, 2) / sha.substr(2, 2) / sha;
  EXPECT_EQ(blob_path_in(other, sha), in_other);
  EXPECT_EQ(blob_path_in(dir_, sha), expected);
  EXPECT_EQ(blob_dirs_in(other, sha),
            (std::vector<fs::path>{in_other.parent_path(), in_other.parent_path().parent_path(),
                                   other / "blobs"}));
  auto put = (*store)->put("layout");
  ASSERT_TRUE(put);
  EXPECT_EQ(*put, sha);
  EXPECT_TRUE(fs::is_regular_file(expected));
}

TEST_F(BlobStoreTest, ListFindsEveryBlobAndNamesEveryOtherFile) {
  auto store = BlobStore::open(dir_);
  ASSERT_TRUE(store);
  EXPECT_TRUE((*store)->list()->blobs.empty());
  auto a = (*store)->put("first blob");
  auto b = (*store)->put("the second blob");
  ASSERT_TRUE(a);
  ASSERT_TRUE(b);
  // Files that are not blobs: a stray name, a blob's name in the wrong place, a symlink.
  fs::create_directories(dir_ / "blobs" / "zz");
  std::ofstream(dir_ / "blobs" / "zz" / "stray") << "x";
  const std::string c = crypto::sha256_hex("misplaced");
  std::ofstream(dir_ / "blobs" / c) << "misplaced";
  const std::string d = crypto::sha256_hex("linked");
  fs::create_directories((*store)->blob_path(d).parent_path());
  fs::create_symlink((*store)->blob_path(*a), (*store)->blob_path(d));

  auto listing = (*store)->list();
  ASSERT_TRUE(listing) << listing.error().message;
  ASSERT_EQ(listing->blobs.size(), 2U);
  std::vector<std::string> shas;
  for (const auto& blob : listing->blobs) {
    shas.push_back(blob.sha256);
    EXPECT_EQ(blob.path, (*store)->blob_path(blob.sha256));
    EXPECT_EQ(blob.size, fs::file_size(blob.path));
    struct stat st {};
    ASSERT_EQ(::stat(blob.path.c_str(), &st), 0);
    EXPECT_EQ(blob.ino, st.st_ino);
    EXPECT_EQ(blob.dev, st.st_dev);
    EXPECT_GT(blob.changed, 0);
  }
  std::sort(shas.begin(), shas.end());
  std::vector<std::string> want{*a, *b};
  std::sort(want.begin(), want.end());
  EXPECT_EQ(shas, want);
  std::vector<fs::path> unexpected = listing->unexpected;
  std::sort(unexpected.begin(), unexpected.end());
  std::vector<fs::path> want_unexpected{dir_ / "blobs" / c, (*store)->blob_path(d),
                                        dir_ / "blobs" / "zz" / "stray"};
  std::sort(want_unexpected.begin(), want_unexpected.end());
  EXPECT_EQ(unexpected, want_unexpected);
}

TEST_F(BlobStoreTest, TakeOutMovesTheListedFileButNeverAReplacement) {
  auto store = BlobStore::open(dir_);
  ASSERT_TRUE(store);
  auto sha = (*store)->put("take me");
  ASSERT_TRUE(sha);
  auto listed = (*store)->list();
  ASSERT_TRUE(listed);
  ASSERT_EQ(listed->blobs.size(), 1U);
  const StoredBlob old = listed->blobs.front();

  // Published again since it was listed (a new inode, as an upload's commit makes): stays.
  auto again = (*store)->put("take me");
  ASSERT_TRUE(again);
  const fs::path aside = dir_ / "aside";
  auto replaced = (*store)->take_out(*sha, old.dev, old.ino, aside);
  ASSERT_TRUE(replaced) << replaced.error().message;
  EXPECT_EQ(*replaced, TakeOut::replaced);
  EXPECT_TRUE((*store)->contains(*sha));
  EXPECT_FALSE(fs::exists(aside));
  auto kept = (*store)->remove_unless_replaced(old);
  ASSERT_TRUE(kept);
  EXPECT_FALSE(*kept);
  EXPECT_TRUE((*store)->contains(*sha));

  // The file that is there now is moved.
  auto current = (*store)->list();
  ASSERT_TRUE(current);
  const StoredBlob now = current->blobs.front();
  auto moved = (*store)->take_out(*sha, now.dev, now.ino, aside);
  ASSERT_TRUE(moved);
  EXPECT_EQ(*moved, TakeOut::moved);
  EXPECT_FALSE((*store)->contains(*sha));
  std::ifstream in(aside);
  EXPECT_EQ(std::string((std::istreambuf_iterator<char>(in)), {}), "take me");
  auto vanished = (*store)->take_out(*sha, now.dev, now.ino, dir_ / "aside2");
  ASSERT_TRUE(vanished);
  EXPECT_EQ(*vanished, TakeOut::vanished);
  EXPECT_FALSE(fs::exists(dir_ / "aside2"));
  EXPECT_FALSE((*store)->take_out("not-a-hash", now.dev, now.ino, aside));
}

TEST_F(BlobStoreTest, RemoveUnlessReplacedRemovesTheListedBlobAndLeavesNoTemp) {
  auto store = BlobStore::open(dir_);
  ASSERT_TRUE(store);
  auto sha = (*store)->put("orphan");
  ASSERT_TRUE(sha);
  auto listed = (*store)->list();
  ASSERT_TRUE(listed);
  ASSERT_EQ(listed->blobs.size(), 1U);
  auto removed = (*store)->remove_unless_replaced(listed->blobs.front());
  ASSERT_TRUE(removed);
  EXPECT_TRUE(*removed);
  EXPECT_FALSE((*store)->contains(*sha));
  EXPECT_EQ(count_files((*store)->blobs_dir()), 0U);
  EXPECT_EQ(count_files((*store)->tmp_dir()), 1U);  // only the session lock
  auto gone = (*store)->remove_unless_replaced(listed->blobs.front());
  ASSERT_TRUE(gone);
  EXPECT_FALSE(*gone);
}

TEST_F(BlobStoreTest, OpenCountsTheStaleTempsItRemoved) {
  {
    auto first = BlobStore::open(dir_);
    ASSERT_TRUE(first);
    EXPECT_EQ((*first)->stale_temps_removed(), 0U);
  }  // a clean exit removes its own session
  fs::create_directories(dir_ / "tmp" / "s-dead1");
  fs::create_directories(dir_ / "tmp" / "s-dead2");
  std::ofstream(dir_ / "tmp" / "s-dead2" / "upload-x") << "junk";
  auto live = BlobStore::open(dir_);
  ASSERT_TRUE(live);
  EXPECT_EQ((*live)->stale_temps_removed(), 2U);
  auto other = BlobStore::open(dir_);  // the live session is not stale
  ASSERT_TRUE(other);
  EXPECT_EQ((*other)->stale_temps_removed(), 0U);
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
