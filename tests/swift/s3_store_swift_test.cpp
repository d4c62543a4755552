// The S3 client against a real OpenStack Swift with its s3api middleware, started once for
// this executable by tests/integration/swift_s3.py on a temp directory and loopback ports.
// Its last test stops Swift to see a dead store fail fast.

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>

#include "wheelforge/crypto/digest.hpp"
#include "wheelforge/store/object_store.hpp"

namespace wf::store {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

const std::string kHarness = WF_SOURCE_DIR "/tests/integration/swift_s3.py";

std::string run(const std::string& command, int* rc = nullptr) {
  std::string out;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return out;
  char buf[4096];
  std::size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
  const int status = ::pclose(pipe);
  if (rc != nullptr) *rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

/// Swift for the whole executable.
class Swift : public ::testing::Environment {
 public:
  static inline fs::path dir;
  static inline S3Config config;
  static inline bool running = false;

  void SetUp() override {
    dir = fs::temp_directory_path() / ("wf-swift-" + std::to_string(::getpid()));
    fs::remove_all(dir);
    const auto t0 = std::chrono::steady_clock::now();
    int rc = 0;
    const std::string out = run("/usr/bin/python3 " + kHarness + " start " + dir.string(), &rc);
    const auto info = nlohmann::json::parse(out, nullptr, false);
    ASSERT_EQ(rc, 0) << out;
    ASSERT_TRUE(info.is_object()) << out;
    std::printf("Swift up in %.1f s at %s\n",
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                info["endpoint"].get<std::string>().c_str());
    config.endpoint = info["endpoint"];
    config.bucket = info["bucket"];
    config.region = info["region"];
    config.access_key_id = info["access_key"];
    config.secret_access_key = info["secret_key"];
    config.prefix = "idx";
    config.multipart_threshold = kMinPartSize;
    config.part_size = kMinPartSize;
    running = true;
  }
  void TearDown() override { stop(); }
  static void stop() {
    if (!running) return;
    run("/usr/bin/python3 " + kHarness + " stop " + dir.string());
    running = false;
    fs::remove_all(dir);
  }
};

const auto* const kSwift = ::testing::AddGlobalTestEnvironment(new Swift);

std::unique_ptr<ObjectStore> open(const S3Config& config = Swift::config) {
  auto store = open_s3_store(config);
  EXPECT_TRUE(store.ok()) << store.error().message;
  return std::move(store.value());
}

std::string read_all(ObjectStore& store, std::string_view key, std::uint64_t offset = 0,
                     std::optional<std::uint64_t> length = std::nullopt) {
  std::string out;
  auto got = store.get(key, offset, length, [&](std::string_view chunk) {
    out.append(chunk);
    return ok_status();
  });
  EXPECT_TRUE(got.ok()) << got.error().message;
  return out;
}

/// A file of `size` pseudo-random bytes in the test's temp directory.
fs::path random_file(const std::string& name, std::size_t size) {
  const fs::path p = Swift::dir / name;
  std::mt19937_64 gen(size);
  std::string bytes(size, '\0');
  for (auto& c : bytes) c = static_cast<char>(gen());
  std::ofstream(p, std::ios::binary) << bytes;
  return p;
}

std::string file_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

TEST(SwiftS3, PutFileHeadGetAndRemove) {
  ASSERT_TRUE(Swift::running);
  auto store = open();
  const fs::path file = random_file("small.whl", 100 * 1024 + 3);
  const std::string key = "blobs/ab/cd/" + crypto::sha256_hex(file_bytes(file));
  ASSERT_TRUE(store->put_file(key, file, "application/octet-stream").ok());

  auto info = store->head(key);
  ASSERT_TRUE(info.ok()) << info.error().message;
  ASSERT_TRUE(info->has_value());
  EXPECT_EQ((*info)->size, 100U * 1024 + 3);
  EXPECT_LE(std::abs(std::time(nullptr) - (*info)->modified), 120);

  const std::string bytes = file_bytes(file);
  EXPECT_TRUE(read_all(*store, key) == bytes) << "the object differs from the file";
  EXPECT_TRUE(read_all(*store, key, 1000, 10) == bytes.substr(1000, 10));
  EXPECT_TRUE(read_all(*store, key, 100 * 1024) == bytes.substr(100 * 1024));

  auto past = store->get(key, 200 * 1024, 5, [](std::string_view) { return ok_status(); });
  ASSERT_FALSE(past.ok());
  EXPECT_EQ(past.error().code, Errc::range_not_satisfiable) << past.error().message;

  ASSERT_TRUE(store->remove(key).ok());
  auto gone = store->head(key);
  ASSERT_TRUE(gone.ok());
  EXPECT_FALSE(gone->has_value());
  auto missing = store->get(key, 0, std::nullopt, [](std::string_view) { return ok_status(); });
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, Errc::not_found);
  EXPECT_NE(missing.error().message.find(store->describe()), std::string::npos);
  EXPECT_TRUE(store->remove(key).ok()) << "removing an absent object is ok";
}

TEST(SwiftS3, MultipartUploadOfAFileAboveTheThreshold) {
  ASSERT_TRUE(Swift::running);
  auto store = open();
  const std::size_t size = 2 * kMinPartSize + 4321;  // three parts
  const fs::path file = random_file("big.whl", size);
  const std::string bytes = file_bytes(file);
  auto put = store->put_file("blobs/big", file, "application/octet-stream");
  ASSERT_TRUE(put.ok()) << put.error().message;
  auto info = store->head("blobs/big");
  ASSERT_TRUE(info.ok() && info->has_value());
  EXPECT_EQ((*info)->size, size);
  std::string got;
  std::size_t chunks = 0;
  ASSERT_TRUE(store
                  ->get("blobs/big", 0, std::nullopt,
                        [&](std::string_view c) {
                          got.append(c);
                          ++chunks;
                          return ok_status();
                        })
                  .ok());
  EXPECT_TRUE(got == bytes) << "the object differs from the file";
  EXPECT_GT(chunks, 1U) << "the body reaches the sink in chunks";
  // A range across the first part boundary.
  EXPECT_TRUE(read_all(*store, "blobs/big", kMinPartSize - 10, 20) ==
              bytes.substr(kMinPartSize - 10, 20));
  // A failing sink stops the transfer with its own error.
  auto stopped = store->get("blobs/big", 0, std::nullopt, [](std::string_view) {
    return Status(make_error(Errc::storage_full, "sink full"));
  });
  ASSERT_FALSE(stopped.ok());
  EXPECT_EQ(stopped.error().code, Errc::storage_full);
  ASSERT_TRUE(store->remove("blobs/big").ok());
}

TEST(SwiftS3, AFailedMultipartUploadIsAbortedAndLeavesNothing) {
  ASSERT_TRUE(Swift::running);
  S3Config config = Swift::config;
  config.multipart_threshold = 1000;
  auto store = open(config);
  // A directory: stat() gives it a size above the threshold, reading a part fails (EISDIR).
  const fs::path dir = Swift::dir / "not-a-file";
  fs::create_directories(dir);
  auto put = store->put_file("blobs/failed", dir, "application/octet-stream");
  ASSERT_FALSE(put.ok());
  EXPECT_EQ(put.error().code, Errc::io) << put.error().message;
  auto info = store->head("blobs/failed");
  ASSERT_TRUE(info.ok());
  EXPECT_FALSE(info->has_value());
  int rc = 0;
  const std::string uploads =
      run("/usr/bin/python3 " + kHarness + " uploads " + Swift::dir.string(), &rc);
  ASSERT_EQ(rc, 0) << uploads;
  EXPECT_NE(uploads.find("ListMultipartUploadsResult"), std::string::npos) << uploads;
  EXPECT_EQ(uploads.find("blobs/failed"), std::string::npos) << "not aborted: " << uploads;
}

TEST(SwiftS3, OddKeysRoundTripAndListingFollowsPages) {
  ASSERT_TRUE(Swift::running);
  S3Config config = Swift::config;
  config.list_page_size = 2;
  auto store = open(config);
  const std::vector<std::string> keys = {"list/a b+c=d%41\xc3\xbc", "list/amp&lt<gt>'q\"",
                                         "list/plain", "list/x/y", "list/z~"};
  for (const auto& k : keys) {
    ASSERT_TRUE(store->put_bytes(k, "bytes of " + k, "text/plain").ok()) << k;
  }
  ASSERT_TRUE(store->put_bytes("other/one", "1", "text/plain").ok());
  auto listed = store->list("list/");
  ASSERT_TRUE(listed.ok()) << listed.error().message;
  ASSERT_EQ(listed->size(), keys.size());
  for (std::size_t i = 0; i < keys.size(); ++i) {
    EXPECT_EQ((*listed)[i].key, keys[i]);
    EXPECT_EQ((*listed)[i].size, ("bytes of " + keys[i]).size());
    EXPECT_GT((*listed)[i].modified, 0);
    EXPECT_EQ(read_all(*store, keys[i]), "bytes of " + keys[i]);
  }
  auto none = store->list("nothing/");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

int curl(const std::string& url, const fs::path& body, std::string* headers) {
  const fs::path head = Swift::dir / "curl-headers";
  const std::string out = run("curl -s -o '" + body.string() + "' -D '" + head.string() +
                              "' -w '%{http_code}' '" + url + "'");
  if (headers != nullptr) *headers = file_bytes(head);
  return std::atoi(out.c_str());
}

TEST(SwiftS3, PresignedGetsServeTheObjectUntilTheyExpire) {
  ASSERT_TRUE(Swift::running);
  auto store = open();
  ASSERT_TRUE(store->put_bytes("blobs/presigned", "wheel bytes", "application/octet-stream").ok());
  const fs::path body = Swift::dir / "curl-body";
  std::string headers;
  const std::string url =
      store->presign_get("blobs/presigned", 300s, "application/x-wheel+zip",
                         "attachment; filename=\"demo-1.0-py3-none-any.whl\"", std::time(nullptr));
  EXPECT_EQ(curl(url, body, &headers), 200) << url;
  EXPECT_EQ(file_bytes(body), "wheel bytes");
  EXPECT_NE(headers.find("filename=\"demo-1.0-py3-none-any.whl\""), std::string::npos) << headers;
  EXPECT_NE(headers.find("application/x-wheel+zip"), std::string::npos) << headers;

  const std::string expired =
      store->presign_get("blobs/presigned", 60s, "", "", std::time(nullptr) - 3600);
  EXPECT_EQ(curl(expired, body, nullptr), 403);
  std::string tampered = url;
  tampered.replace(tampered.find("demo-1.0"), 4, "evil");
  EXPECT_EQ(curl(tampered, body, nullptr), 403);
}

TEST(SwiftS3, ThreadsShareTheStoreAndItsConnections) {
  ASSERT_TRUE(Swift::running);
  auto store = open();
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 3; ++i) {
        const std::string key = "threads/" + std::to_string(t) + "-" + std::to_string(i);
        const std::string bytes(static_cast<std::size_t>(1000 + t * 100 + i),
                                static_cast<char>('a' + t));
        std::string got;
        const bool ok = store->put_bytes(key, bytes, "text/plain").ok() &&
                        store
                            ->get(key, 0, std::nullopt,
                                  [&](std::string_view c) {
                                    got.append(c);
                                    return ok_status();
                                  })
                            .ok() &&
                        got == bytes && store->remove(key).ok();
        if (!ok) ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST(SwiftS3, AWrongSecretIsForbidden) {
  ASSERT_TRUE(Swift::running);
  S3Config config = Swift::config;
  config.secret_access_key = "not-the-secret";
  auto store = open(config);
  auto put = store->put_bytes("blobs/x", "x", "text/plain");
  ASSERT_FALSE(put.ok());
  EXPECT_EQ(put.error().code, Errc::forbidden) << put.error().message;
  EXPECT_EQ(put.error().message.find("not-the-secret"), std::string::npos);
}

TEST(SwiftS3, AStoreThatStopsAnsweringTimesOut) {
  // A socket that listens and never answers: the request is sent, the answer never comes.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(fd, 8), 0);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  S3Config config = Swift::config;
  config.endpoint = "http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  config.io_timeout = 500ms;
  auto store = open(config);
  const auto t0 = std::chrono::steady_clock::now();
  auto info = store->head("blobs/x");
  const auto took = std::chrono::steady_clock::now() - t0;
  ::close(fd);
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.error().code, Errc::unavailable);
  EXPECT_NE(info.error().message.find("timed out"), std::string::npos) << info.error().message;
  EXPECT_NE(info.error().message.find(config.endpoint), std::string::npos);
  EXPECT_LT(took, 5s);
}

// Last: stops Swift.
TEST(SwiftS3, ZzAStoppedStoreIsUnavailableNamingItself) {
  ASSERT_TRUE(Swift::running);
  auto store = open();
  ASSERT_TRUE(store->put_bytes("blobs/before", "x", "text/plain").ok());  // a kept connection
  Swift::stop();
  const fs::path file = fs::temp_directory_path() / ("wf-swift-up-" + std::to_string(::getpid()));
  std::ofstream(file) << "bytes";
  const auto t0 = std::chrono::steady_clock::now();
  auto put = store->put_file("blobs/after", file, "text/plain");
  auto listed = store->list("");
  const auto took = std::chrono::steady_clock::now() - t0;
  fs::remove(file);
  for (const Error& e : {put.error(), listed.error()}) {
    EXPECT_EQ(e.code, Errc::unavailable) << e.message;
    EXPECT_NE(e.message.find(Swift::config.endpoint), std::string::npos) << e.message;
    EXPECT_NE(e.message.find("s3://wheelforge/idx"), std::string::npos) << e.message;
  }
  EXPECT_LT(took, 5s);
}

TEST(SwiftS3, ConfigurationIsChecked) {
  S3Config config;
  config.endpoint = "ftp://x";
  auto bad = open_s3_store(config);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, Errc::invalid);
  EXPECT_NE(bad.error().message.find("bucket"), std::string::npos);
  EXPECT_NE(bad.error().message.find("credentials"), std::string::npos);
  config = Swift::config;
  config.endpoint = "http://127.0.0.1:9/path";
  EXPECT_FALSE(open_s3_store(config).ok());
}

}  // namespace
}  // namespace wf::store
