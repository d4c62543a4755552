#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "wheelforge/store/object_store.hpp"

namespace wf::store {
namespace {

namespace fs = std::filesystem;

class S3Credentials : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* n : {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"}) {
      ::unsetenv(n);
    }
    secret_ = fs::temp_directory_path() / ("wf-s3-secret-" + std::to_string(::getpid()));
  }
  void TearDown() override { fs::remove(secret_); }
  fs::path secret_;
};

TEST_F(S3Credentials, FromTheEnvironmentWithASessionToken) {
  ::setenv("AWS_ACCESS_KEY_ID", "test:tester", 1);
  ::setenv("AWS_SECRET_ACCESS_KEY", "testing", 1);
  ::setenv("AWS_SESSION_TOKEN", "tok", 1);
  S3Config c;
  ASSERT_TRUE(load_s3_credentials(c, {}).ok());
  EXPECT_EQ(c.access_key_id, "test:tester");
  EXPECT_EQ(c.secret_access_key, "testing");
  EXPECT_EQ(c.session_token, "tok");
}

TEST_F(S3Credentials, FromTheConfigurationAndASecretFile) {
  std::ofstream(secret_) << "  s3cr3t/with+chars \nignored\n";
  S3Config c;
  c.access_key_id = "AKIA";
  ASSERT_TRUE(load_s3_credentials(c, secret_).ok());
  EXPECT_EQ(c.secret_access_key, "s3cr3t/with+chars");
  EXPECT_EQ(c.session_token, "");
}

TEST_F(S3Credentials, MissingPiecesAreNamedWithoutSecrets) {
  S3Config c;
  auto none = load_s3_credentials(c, {});
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().code, Errc::invalid);
  EXPECT_NE(none.error().message.find("AWS_ACCESS_KEY_ID"), std::string::npos);
  c.access_key_id = "AKIA";
  EXPECT_FALSE(load_s3_credentials(c, secret_).ok()) << "no such file";
  std::ofstream(secret_) << "\n";
  EXPECT_FALSE(load_s3_credentials(c, secret_).ok()) << "an empty secret";
  S3Config d;
  EXPECT_FALSE(load_s3_credentials(d, secret_).ok()) << "a secret file without a key id";
}

}  // namespace
}  // namespace wf::store
