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

#include "wheelforge/archive/elf.hpp"
#include "wheelforge/archive/reader.hpp"
#include "wheelforge/crypto/digest.hpp"
#include "wheelforge/store/blob_store.hpp"
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

// A wheel of 24 MiB of stored noise, a small deflated ELF library and its .dist-info, written
// by Python's zipfile.
fs::path noisy_wheel() {
  const fs::path noise = random_file("noise.bin", std::size_t{24} << 20U);
  const fs::path wheel = Swift::dir / "demo-1.0-cp311-cp311-linux_x86_64.whl";
  const std::string script =
      "import sys, zipfile\n"
      "with zipfile.ZipFile(sys.argv[1], 'w') as z:\n"
      "    z.writestr('demo/__init__.py', 'x = 1\\n' * 100, zipfile.ZIP_DEFLATED)\n"
      "    z.write(sys.argv[2], 'demo/noise.bin', zipfile.ZIP_STORED)\n"
      "    z.write('/lib/x86_64-linux-gnu/libz.so.1', 'demo/_C.so', zipfile.ZIP_DEFLATED)\n"
      "    z.writestr('demo-1.0.dist-info/METADATA', 'Metadata-Version: 2.1\\nName: demo\\n"
      "Version: 1.0\\n')\n"
      "    z.writestr('demo-1.0.dist-info/WHEEL', 'Wheel-Version: 1.0\\nRoot-Is-Purelib: "
      "false\\nTag: cp311-cp311-linux_x86_64\\n')\n"
      "    z.writestr('demo-1.0.dist-info/RECORD', '')\n";
  const fs::path py = Swift::dir / "make_wheel.py";
  std::ofstream(py) << script;
  int rc = -1;
  const std::string out =
      run("/usr/bin/python3 " + py.string() + " " + wheel.string() + " " + noise.string() + " 2>&1",
          &rc);
  EXPECT_EQ(rc, 0) << out;
  return wheel;
}

// Kept for the last test, which stops Swift: a store holding the wheel, and a reader of it.
struct Inspected {
  static inline std::unique_ptr<BlobStore> store;
  static inline std::string sha256;
  static inline std::uint64_t size = 0;
};

TEST(SwiftS3, InspectionReadsOnlyThePartsOfAWheelItNeeds) {
  ASSERT_TRUE(Swift::running);
  std::shared_ptr<ObjectStore> objects = open();
  const fs::path wheel = noisy_wheel();
  const std::string bytes = file_bytes(wheel);
  ASSERT_GT(bytes.size(), std::size_t{24} << 20U);

  // One server uploads the wheel; another, with an empty read cache, inspects it.
  auto uploader = BlobStore::open(Swift::dir / "inspect-up", {objects, std::uint64_t{1} << 30U});
  ASSERT_TRUE(uploader.ok()) << uploader.error().message;
  auto temp = (*uploader)->create_temp();
  ASSERT_TRUE(temp.ok());
  ASSERT_TRUE(temp->write(bytes.data(), bytes.size()).ok());
  ASSERT_TRUE(temp->finish().ok());
  const std::string sha = temp->sha256();
  ASSERT_TRUE((*uploader)->commit(std::move(*temp)).ok());

  auto reader_store =
      BlobStore::open(Swift::dir / "inspect-read", {objects, std::uint64_t{1} << 30U});
  ASSERT_TRUE(reader_store.ok()) << reader_store.error().message;
  auto reader = (*reader_store)->open_reader(sha);
  ASSERT_TRUE(reader.ok()) << reader.error().message;
  EXPECT_EQ((*reader)->size(), bytes.size());
  auto members = archive::list_wheel_members(**reader);
  ASSERT_TRUE(members.ok()) << members.error().message;
  auto binaries = archive::inspect_wheel_binaries(**reader);
  ASSERT_TRUE(binaries.ok()) << binaries.error().message;

  // The same answers as from the whole file on disk.
  auto local_members = archive::list_wheel_members(wheel);
  auto local_binaries = archive::inspect_wheel_binaries(wheel);
  ASSERT_TRUE(local_members.ok() && local_binaries.ok());
  ASSERT_EQ(members->size(), local_members->size());
  for (std::size_t i = 0; i < members->size(); ++i) {
    EXPECT_EQ((*members)[i].name, (*local_members)[i].name);
    EXPECT_EQ((*members)[i].size, (*local_members)[i].size);
    EXPECT_EQ((*members)[i].compressed_size, (*local_members)[i].compressed_size);
  }
  ASSERT_EQ(binaries->size(), local_binaries->size());
  for (std::size_t i = 0; i < binaries->size(); ++i) {
    EXPECT_EQ((*binaries)[i].path, (*local_binaries)[i].path);
    EXPECT_EQ((*binaries)[i].elf, (*local_binaries)[i].elf);
    EXPECT_EQ((*binaries)[i].problem, (*local_binaries)[i].problem);
  }
  ASSERT_EQ(binaries->size(), 1U);
  EXPECT_EQ(binaries->front().path, "demo/_C.so");
  EXPECT_TRUE(binaries->front().elf.has_value());

  // Core metadata as an upstream wheel without a .metadata file gives it.
  auto contents = archive::read_wheel(**reader, "demo", "1.0");
  ASSERT_TRUE(contents.ok()) << contents.error().message;
  EXPECT_EQ(contents->metadata, "Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n");

  // Ranges around the central directory, the local headers, the library and the metadata;
  // not the noise, and nothing into the read cache.
  std::printf("inspection fetched %llu bytes in %llu requests of a %zu-byte wheel\n",
              static_cast<unsigned long long>((*reader)->fetched_bytes()),
              static_cast<unsigned long long>((*reader)->requests()), bytes.size());
  EXPECT_GT((*reader)->requests(), 0U);
  EXPECT_LT((*reader)->fetched_bytes(), std::uint64_t{2} << 20U)
      << (*reader)->fetched_bytes() << " bytes fetched of " << bytes.size();
  EXPECT_FALSE((*reader_store)->serving_path(sha).has_value())
      << "ranged reads put no copy into the read cache";
  EXPECT_EQ((*reader_store)->read_cache()->files(), 0U);

  // A blob in the read cache is read from there.
  auto copy = (*uploader)->open_reader(sha);
  ASSERT_TRUE(copy.ok()) << copy.error().message;
  ASSERT_TRUE(archive::inspect_wheel_binaries(**copy).ok());
  EXPECT_EQ((*copy)->requests(), 0U);

  auto missing = (*reader_store)->open_reader(std::string(64, 'e'));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, Errc::not_found) << missing.error().message;

  Inspected::store = std::move(*reader_store);
  Inspected::sha256 = sha;
  Inspected::size = bytes.size();
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

  // Reading parts of a blob: unavailable naming the store, not a damaged wheel.
  if (Inspected::store) {
    auto reader = Inspected::store->open_reader(Inspected::sha256);
    ASSERT_FALSE(reader.ok());
    EXPECT_EQ(reader.error().code, Errc::unavailable) << reader.error().message;
    EXPECT_NE(reader.error().message.find("s3://wheelforge/idx"), std::string::npos)
        << reader.error().message;
    auto objects = open();
    auto direct = make_object_reader(*objects, blob_key(Inspected::sha256), Inspected::size,
                                     Inspected::store->describe());
    auto members = archive::list_wheel_members(*direct);
    ASSERT_FALSE(members.ok());
    EXPECT_EQ(members.error().code, Errc::unavailable) << members.error().message;
    EXPECT_NE(members.error().message.find("s3://wheelforge/idx"), std::string::npos)
        << members.error().message;
    auto contents = archive::read_wheel(*direct, "demo", "1.0");
    ASSERT_FALSE(contents.ok());
    EXPECT_EQ(contents.error().code, Errc::unavailable) << contents.error().message;
    Inspected::store.reset();
  }
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
