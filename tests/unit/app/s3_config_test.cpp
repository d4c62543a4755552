// The blob store's keys: blob_store, file_serving, blob_cache and the [s3] table, with
// credentials from the table's secret file or the environment, never shown by `config check`.

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "wheelforge/app/app.hpp"

namespace wf::app {
namespace {

namespace fs = std::filesystem;
using std::chrono::seconds;

class S3ConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("wf-s3-config-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    for (const char* v : {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                          "WHEELFORGE_BLOB_STORE", "WHEELFORGE_FILE_SERVING"}) {
      ::unsetenv(v);
    }
  }
  void TearDown() override {
    fs::remove_all(dir_);
    for (const char* v : {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"}) {
      ::unsetenv(v);
    }
  }
  fs::path write(const std::string& text) {
    const fs::path p = dir_ / "wheelforge.toml";
    std::ofstream(p, std::ios::binary) << text;
    return p;
  }
  static std::string joined(const std::vector<std::string>& problems) {
    std::string all;
    for (const auto& p : problems) all += p + "\n";
    return all;
  }
  fs::path dir_;
};

TEST_F(S3ConfigTest, TheFileBackendByDefaultNeedsNoS3Table) {
  const auto checked = check_configuration(std::nullopt, {});
  ASSERT_TRUE(checked.config) << joined(checked.problems);
  const Settings& s = checked.config->settings;
  EXPECT_EQ(s.blob_store, "file");
  EXPECT_EQ(s.file_serving, "redirect");
  EXPECT_EQ(s.blob_cache, 2ULL << 30U);
  EXPECT_EQ(s.s3.region, "us-east-1");
  EXPECT_EQ(s.s3.addressing, "path");
  EXPECT_EQ(s.s3.presign_expiry, seconds{300});
  const std::string printed = settings_to_toml(s);
  EXPECT_NE(printed.find("blob_store = \"file\"\n"), std::string::npos);
  EXPECT_EQ(printed.find("[s3]"), std::string::npos);
}

TEST_F(S3ConfigTest, ReadsTheTableAndTheSecretFileAndNeverPrintsTheSecret) {
  const fs::path secret = dir_ / "s3-secret";
  std::ofstream(secret) << "wJalrXUtnFEMI-secret\n";
  const auto checked = check_configuration(write(R"(
blob_store = "s3://wheelforge/idx/"
file_serving = "proxy"
blob_cache = "64M"
[s3]
endpoint = "http://127.0.0.1:8080/"
region = "eu-west-1"
addressing = "virtual"
access_key_id = "test:tester"
secret_access_key_file = ")" + secret.string() + R"("
presign_expiry = "10m"
)"),
                                           {});
  ASSERT_TRUE(checked.config) << joined(checked.problems);
  const Settings& s = checked.config->settings;
  EXPECT_EQ(s.blob_store, "s3://wheelforge/idx/");
  EXPECT_EQ(s.file_serving, "proxy");
  EXPECT_EQ(s.blob_cache, 64ULL << 20U);
  EXPECT_EQ(s.s3.endpoint, "http://127.0.0.1:8080");
  EXPECT_EQ(s.s3.region, "eu-west-1");
  EXPECT_EQ(s.s3.addressing, "virtual");
  EXPECT_EQ(s.s3.access_key_id, "test:tester");
  EXPECT_EQ(s.s3.secret_access_key, "wJalrXUtnFEMI-secret");
  EXPECT_EQ(s.s3.presign_expiry, seconds{600});
  const auto url = parse_blob_store_url(s.blob_store);
  ASSERT_TRUE(url);
  EXPECT_EQ(url->bucket, "wheelforge");
  EXPECT_EQ(url->prefix, "idx");
  const std::string printed = settings_to_toml(s);
  EXPECT_NE(printed.find("\n[s3]\nendpoint = \"http://127.0.0.1:8080\"\n"), std::string::npos)
      << printed;
  EXPECT_NE(printed.find("access_key_id = \"test:tester\"\n"), std::string::npos);
  EXPECT_NE(printed.find("presign_expiry = \"10m\"\n"), std::string::npos);
  EXPECT_EQ(printed.find("wJalrXUtnFEMI"), std::string::npos) << printed;
}

TEST_F(S3ConfigTest, CredentialsFromTheEnvironmentWhenTheTableNamesNone) {
  ::setenv("AWS_ACCESS_KEY_ID", "AKIDENV", 1);
  ::setenv("AWS_SECRET_ACCESS_KEY", "env-secret-value", 1);
  ::setenv("AWS_SESSION_TOKEN", "env-session-token", 1);
  Overrides o;
  o.blob_store = "s3://bucket-1";
  const auto checked = check_configuration(std::nullopt, o);
  ASSERT_TRUE(checked.config) << joined(checked.problems);
  const S3Settings& s3 = checked.config->settings.s3;
  EXPECT_EQ(s3.access_key_id, "AKIDENV");
  EXPECT_EQ(s3.secret_access_key, "env-secret-value");
  EXPECT_EQ(s3.session_token, "env-session-token");
  const std::string printed = settings_to_toml(checked.config->settings);
  EXPECT_EQ(printed.find("env-secret-value"), std::string::npos);
  EXPECT_EQ(printed.find("env-session-token"), std::string::npos);
  EXPECT_NE(printed.find("AWS_SECRET_ACCESS_KEY"), std::string::npos);
}

TEST_F(S3ConfigTest, EveryProblemNamesItsKey) {
  Overrides o;
  o.blob_store = "s3://Bad_Bucket/x";
  o.file_serving = "stream";
  auto checked = check_configuration(write(R"(
[s3]
endpoint = "ftp://store"
addressing = "dns"
presign_expiry = "8d"
bucket = "x"
)"),
                                     o);
  EXPECT_FALSE(checked.config);
  const std::string all = joined(checked.problems);
  for (const char* expected :
       {"blob_store: expected \"file\" or s3://BUCKET/PREFIX, got 's3://Bad_Bucket/x'",
        "file_serving: expected \"redirect\" or \"proxy\"", "s3.endpoint: expected an http://",
        "s3.addressing: expected \"path\" or \"virtual\"", "s3.presign_expiry: expected",
        "unknown setting 'bucket' in [s3]"}) {
    EXPECT_NE(all.find(expected), std::string::npos) << expected << "\nin:\n" << all;
  }
  // An S3 blob store without credentials says where they come from.
  o = Overrides{};
  o.blob_store = "s3://wheelforge/idx";
  checked = check_configuration(std::nullopt, o);
  EXPECT_FALSE(checked.config);
  EXPECT_NE(joined(checked.problems).find("AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"),
            std::string::npos)
      << joined(checked.problems);
  // A missing secret file is named.
  checked = check_configuration(write(R"(
blob_store = "s3://wheelforge/idx"
[s3]
access_key_id = "id"
secret_access_key_file = "/nonexistent/secret"
)"),
                                {});
  EXPECT_FALSE(checked.config);
  EXPECT_NE(joined(checked.problems).find("secret_access_key_file /nonexistent/secret"),
            std::string::npos)
      << joined(checked.problems);
}

}  // namespace
}  // namespace wf::app
