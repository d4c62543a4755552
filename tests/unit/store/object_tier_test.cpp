// The blob store over an object store (an in-memory one here; the S3 client against a real
// server is tested in tests/integration/test_s3_store.py) and its bounded read cache.

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>

#include "wheelforge/crypto/digest.hpp"
#include "wheelforge/store/blob_store.hpp"
#include "wheelforge/store/read_cache.hpp"
#include "wheelforge/util/fs.hpp"

namespace wf::store {
namespace {

namespace fs = std::filesystem;

/// Objects in memory; `down` makes every request fail as an unreachable store does.
class MemoryObjectStore : public ObjectStore {
 public:
  Status put_file(std::string_view key, const fs::path& path, std::string_view) override {
    if (down) return make_error(Errc::unavailable, "connect: Connection refused");
    auto bytes = read_small_file(path, 1U << 30U);
    if (!bytes) return bytes.error();
    std::lock_guard lock(mu);
    objects[std::string(key)] = Object{std::move(*bytes), ++clock};
    ++puts;
    return ok_status();
  }
  Status put_bytes(std::string_view key, std::string_view bytes, std::string_view) override {
    if (down) return make_error(Errc::unavailable, "connect: Connection refused");
    std::lock_guard lock(mu);
    objects[std::string(key)] = Object{std::string(bytes), ++clock};
    return ok_status();
  }
  Result<std::optional<ObjectInfo>> head(std::string_view key) override {
    if (down) return make_error(Errc::unavailable, "connect: Connection refused");
    std::lock_guard lock(mu);
    const auto it = objects.find(std::string(key));
    if (it == objects.end()) return std::optional<ObjectInfo>{};
    return std::optional<ObjectInfo>(ObjectInfo{it->first, it->second.bytes.size(), it->second.at});
  }
  Status get(std::string_view key, std::uint64_t offset, std::optional<std::uint64_t> length,
             const std::function<Status(std::string_view)>& sink) override {
    if (down) return make_error(Errc::unavailable, "connect: Connection refused");
    std::string bytes;
    {
      std::lock_guard lock(mu);
      const auto it = objects.find(std::string(key));
      if (it == objects.end()) return make_error(Errc::not_found, "NoSuchKey");
      bytes = it->second.bytes;
      ++gets;
    }
    bytes = bytes.substr(offset, length.value_or(std::string::npos));
    // In two chunks, as a transfer arrives.
    const std::size_t half = bytes.size() / 2;
    if (auto st = sink(std::string_view(bytes).substr(0, half)); !st) return st;
    return sink(std::string_view(bytes).substr(half));
  }
  Status probe() override {
    if (down) return make_error(Errc::unavailable, "S3 bucket b at endpoint memory: refused");
    return ok_status();
  }
  Status remove(std::string_view key) override {
    if (down) return make_error(Errc::unavailable, "connect: Connection refused");
    std::lock_guard lock(mu);
    objects.erase(std::string(key));
    return ok_status();
  }
  Result<std::vector<ObjectInfo>> list(std::string_view prefix) override {
    if (down) return make_error(Errc::unavailable, "connect: Connection refused");
    std::lock_guard lock(mu);
    std::vector<ObjectInfo> out;
    for (const auto& [key, o] : objects) {
      if (key.starts_with(prefix)) out.push_back(ObjectInfo{key, o.bytes.size(), o.at});
    }
    return out;
  }
  std::string presign_get(std::string_view key, std::chrono::seconds, std::string_view,
                          std::string_view, std::time_t) const override {
    return "http://store.invalid/bucket/idx/" + std::string(key);
  }
  std::string describe() const override { return "s3://bucket/idx at http://store.invalid"; }

  struct Object {
    std::string bytes;
    std::time_t at = 0;
  };
  std::mutex mu;
  std::map<std::string, Object> objects;
  std::time_t clock = 1000;
  bool down = false;
  int puts = 0;
  int gets = 0;
};

class ObjectTierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("wf-objtier-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    objects_ = std::make_shared<MemoryObjectStore>();
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::unique_ptr<BlobStore> open(std::uint64_t cache_bytes = 1U << 20U) {
    auto store = BlobStore::open(dir_, BlobStoreOptions{objects_, cache_bytes});
    EXPECT_TRUE(store) << store.error().message;
    return std::move(*store);
  }
  static Result<std::string> publish(const BlobStore& store, std::string_view bytes) {
    auto temp = store.create_temp();
    if (!temp) return temp.error();
    if (auto st = temp->write(bytes.data(), bytes.size()); !st) return st.error();
    if (auto st = temp->finish(); !st) return st.error();
    std::string sha = temp->sha256();
    if (auto c = store.commit(std::move(*temp)); !c) return c.error();
    return sha;
  }
  static std::string slurp(const fs::path& p) {
    std::ifstream in(p);
    return {std::istreambuf_iterator<char>(in), {}};
  }

  fs::path dir_;
  std::shared_ptr<MemoryObjectStore> objects_;
};

TEST_F(ObjectTierTest, CommitUploadsUnderTheHashedKeyAndKeepsNoBlobsDirectory) {
  auto store = open();
  EXPECT_EQ(store->backend(), BlobBackend::object_store);
  auto sha = publish(*store, "wheel bytes");
  ASSERT_TRUE(sha) << sha.error().message;
  const std::string key = "blobs/" + sha->substr(0, 2) + "/" + sha->substr(2, 2) + "/" + *sha;
  EXPECT_EQ(blob_key(*sha), key);
  ASSERT_EQ(objects_->objects.count(key), 1U);
  EXPECT_EQ(objects_->objects[key].bytes, "wheel bytes");
  EXPECT_FALSE(fs::exists(dir_ / "blobs"));
  EXPECT_TRUE(store->contains(*sha));
  // The uploaded temp file became the read cache's copy: no download to read it.
  auto local = store->local_copy(*sha);
  ASSERT_TRUE(local);
  EXPECT_EQ(slurp(*local), "wheel bytes");
  EXPECT_EQ(objects_->gets, 0);
  EXPECT_EQ(local->parent_path().parent_path().parent_path(), dir_ / "cache" / "blobs");
}

TEST_F(ObjectTierTest, AStoreThatIsDownFailsTheCommitAsUnavailableNamingIt) {
  auto store = open();
  objects_->down = true;
  auto sha = publish(*store, "wheel bytes");
  ASSERT_FALSE(sha);
  EXPECT_EQ(sha.error().code, Errc::unavailable);
  EXPECT_NE(sha.error().message.find("object store s3://bucket/idx at http://store.invalid"),
            std::string::npos)
      << sha.error().message;
  objects_->down = false;
  EXPECT_TRUE(objects_->objects.empty());
  // Nothing of the failed upload stays locally either.
  std::size_t files = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir_)) {
    files += e.is_regular_file() && e.path().filename() != ".lock" ? 1U : 0U;
  }
  EXPECT_EQ(files, 0U);
}

TEST_F(ObjectTierTest, LocalCopyFetchesVerifiesAndCaches) {
  const std::string sha = crypto::sha256_hex("from the store");
  objects_->objects[blob_key(sha)] = {"from the store", 5};
  auto store = open();
  EXPECT_FALSE(store->serving_path(sha));
  auto local = store->local_copy(sha);
  ASSERT_TRUE(local) << local.error().message;
  EXPECT_EQ(slurp(*local), "from the store");
  EXPECT_EQ(objects_->gets, 1);
  ASSERT_TRUE(store->serving_path(sha));
  EXPECT_EQ(*store->serving_path(sha), local->string());
  ASSERT_TRUE(store->local_copy(sha));
  EXPECT_EQ(objects_->gets, 1);  // cached
  // An absent object is not_found; damaged bytes are refused and not cached.
  auto missing = store->local_copy(crypto::sha256_hex("nothing"));
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, Errc::not_found);
  const std::string other = crypto::sha256_hex("other");
  objects_->objects[blob_key(other)] = {"tampered", 6};
  auto damaged = store->local_copy(other);
  ASSERT_FALSE(damaged);
  EXPECT_EQ(damaged.error().code, Errc::io);
  EXPECT_FALSE(store->serving_path(other));
  EXPECT_FALSE(fs::exists(store->blob_path(other)));
}

TEST_F(ObjectTierTest, ListWithdrawAndRemoveUnlessReplaced) {
  auto store = open();
  auto a = publish(*store, "a");
  auto b = publish(*store, "b");
  ASSERT_TRUE(a && b);
  objects_->objects["blobs/zz/not-a-blob"] = {"x", 1};
  auto listing = store->list();
  ASSERT_TRUE(listing);
  EXPECT_EQ(listing->blobs.size(), 2U);
  ASSERT_EQ(listing->unexpected.size(), 1U);
  EXPECT_EQ(listing->unexpected[0], "blobs/zz/not-a-blob");
  ASSERT_TRUE(store->withdraw(*a));
  EXPECT_FALSE(store->contains(*a));
  EXPECT_FALSE(fs::exists(store->blob_path(*a)));  // its cached copy went too
  // Published again after the listing: left alone.
  StoredBlob listed = *std::find_if(listing->blobs.begin(), listing->blobs.end(),
                                    [&](const StoredBlob& s) { return s.sha256 == *b; });
  ASSERT_TRUE(publish(*store, "b"));
  auto removed = store->remove_unless_replaced(listed);
  ASSERT_TRUE(removed);
  EXPECT_FALSE(*removed);
  EXPECT_TRUE(store->contains(*b));
  auto now = store->stat(*b);
  ASSERT_TRUE(now && now->has_value());
  removed = store->remove_unless_replaced(**now);
  ASSERT_TRUE(removed);
  EXPECT_TRUE(*removed);
  EXPECT_EQ(objects_->objects.count(blob_key(*b)), 0U);
}

class ReadCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("wf-readcache-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "tmp");
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::unique_ptr<ReadCache> open(std::uint64_t bound) {
    auto cache = ReadCache::open(dir_ / "cache", dir_ / "tmp", bound);
    EXPECT_TRUE(cache);
    return std::move(*cache);
  }
  static BlobFetch bytes(const std::string& b) {
    return [b](const ByteSink& sink) { return sink(b); };
  }
  fs::path dir_;
};

TEST_F(ReadCacheTest, StaysWithinItsBoundEvictingTheLeastRecentlyUsedWholeFiles) {
  auto cache = open(250);
  const std::string a(100, 'a');
  const std::string b(100, 'b');
  const std::string c(100, 'c');
  const auto sa = crypto::sha256_hex(a);
  const auto sb = crypto::sha256_hex(b);
  const auto sc = crypto::sha256_hex(c);
  ASSERT_TRUE(cache->fill(sa, bytes(a)));
  ASSERT_TRUE(cache->fill(sb, bytes(b)));
  EXPECT_EQ(cache->bytes(), 200U);
  ASSERT_TRUE(cache->lookup(sa));  // a is now used more recently than b
  auto pc = cache->fill(sc, bytes(c));
  ASSERT_TRUE(pc);
  EXPECT_EQ(cache->bytes(), 200U);
  EXPECT_EQ(cache->files(), 2U);
  EXPECT_TRUE(cache->lookup(sa));
  EXPECT_FALSE(cache->lookup(sb));
  EXPECT_FALSE(fs::exists(cache->path_of(sb)));
  EXPECT_TRUE(fs::exists(*pc));
  // One file above the bound stays alone: it is the one asked for.
  const std::string big(400, 'x');
  auto pbig = cache->fill(crypto::sha256_hex(big), bytes(big));
  ASSERT_TRUE(pbig);
  EXPECT_TRUE(fs::exists(*pbig));
  EXPECT_EQ(cache->files(), 1U);
  EXPECT_EQ(cache->bytes(), 400U);
}

TEST_F(ReadCacheTest, AFailedOrWrongFetchLeavesNothingAndReopeningIndexesWhatIsThere) {
  auto cache = open(1000);
  const std::string a = "alpha";
  const auto sa = crypto::sha256_hex(a);
  // A transfer that breaks off half way: no partial copy, no temp file.
  auto broken = cache->fill(sa, [](const ByteSink& sink) -> Status {
    if (auto st = sink("alp"); !st) return st;
    return make_error(Errc::unavailable, "connection reset");
  });
  ASSERT_FALSE(broken);
  EXPECT_EQ(broken.error().code, Errc::unavailable);
  EXPECT_FALSE(fs::exists(cache->path_of(sa)));
  EXPECT_TRUE(fs::is_empty(dir_ / "tmp"));
  auto wrong = cache->fill(sa, bytes("beta"));
  ASSERT_FALSE(wrong);
  EXPECT_FALSE(fs::exists(cache->path_of(sa)));
  EXPECT_TRUE(fs::is_empty(dir_ / "tmp"));
  auto ok = cache->fill(sa, bytes(a));
  ASSERT_TRUE(ok);
  struct stat st {};
  ASSERT_EQ(::stat(ok->c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0444U);
  // A stray file (a name that is no sha256) goes when the cache opens; copies are indexed.
  std::ofstream(dir_ / "cache" / "stray") << "x";
  cache.reset();
  cache = open(1000);
  EXPECT_FALSE(fs::exists(dir_ / "cache" / "stray"));
  EXPECT_EQ(cache->files(), 1U);
  EXPECT_EQ(cache->bytes(), a.size());
  EXPECT_TRUE(cache->lookup(sa));
  // A copy removed behind its back (another process's eviction) is noticed.
  ::unlink(cache->path_of(sa).c_str());
  EXPECT_FALSE(cache->lookup(sa));
  EXPECT_EQ(cache->files(), 0U);
}

}  // namespace
}  // namespace wf::store
