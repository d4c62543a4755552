// The [[upstream]] tables of the configuration file: every key, the defaults, each problem named
// by its key, and passwords that never appear in messages or in `config check`'s output.

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
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

class UpstreamConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("wf-upstream-config-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

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

TEST_F(UpstreamConfigTest, NoneByDefault) {
  const auto checked = check_configuration(write("listen = \"127.0.0.1:9000\"\n"), {});
  ASSERT_TRUE(checked.config) << joined(checked.problems);
  EXPECT_TRUE(checked.config->upstreams.empty());
}

TEST_F(UpstreamConfigTest, ReadsEveryKey) {
  const fs::path secret = dir_ / "token";
  std::ofstream(secret) << "s3cret-from-file\n";
  ::setenv("WF_TEST_UPSTREAM_PASSWORD", "s3cret-from-env", 1);
  const auto checked = check_configuration(write(R"(
[[upstream]]
name = "pypi"
url = "https://pypi.org/simple/"
metadata_ttl = "10m"
cooldown_days = 3
serve_local = ["Setuptools", "wheel"]

[[upstream]]
name = "pytorch-cu128"
url = "https://download.pytorch.org/whl/cu128"
projects = ["torch", "Triton", "nvidia_cudnn_cu12"]
metadata_ttl = 3600
page_timeout = "2m"

[[upstream]]
name = "private"
url = "http://127.0.0.1:9000/simple/"
username = "__token__"
password_file = ")" + secret.string() + R"("
page_timeout = 5

[[upstream]]
name = "mirror"
url = "http://127.0.0.1:9001/simple/"
username = "ci"
password_env = "WF_TEST_UPSTREAM_PASSWORD"
)"),
                                           {});
  ::unsetenv("WF_TEST_UPSTREAM_PASSWORD");
  ASSERT_TRUE(checked.config) << joined(checked.problems);
  const auto& u = checked.config->upstreams;
  ASSERT_EQ(u.size(), 4U);
  EXPECT_EQ(u[0].name, "pypi");
  EXPECT_EQ(u[0].url, "https://pypi.org/simple/");
  EXPECT_EQ(u[0].metadata_ttl, seconds{600});
  EXPECT_EQ(u[0].page_timeout, seconds{60});
  EXPECT_TRUE(u[0].all_projects);
  EXPECT_EQ(u[0].cooldown_days, 3U);
  EXPECT_EQ(u[0].serve_local, (std::vector<std::string>{"setuptools", "wheel"}));
  EXPECT_TRUE(u[0].username.empty());
  EXPECT_TRUE(u[0].password.empty());

  EXPECT_EQ(u[1].url, "https://download.pytorch.org/whl/cu128/");  // the '/' added
  EXPECT_FALSE(u[1].all_projects);
  EXPECT_EQ(u[1].projects, (std::vector<std::string>{"torch", "triton", "nvidia-cudnn-cu12"}));
  EXPECT_EQ(u[1].metadata_ttl, seconds{3600});
  EXPECT_EQ(u[1].page_timeout, seconds{120});
  EXPECT_FALSE(u[1].cooldown_days);

  EXPECT_EQ(u[2].username, "__token__");
  EXPECT_EQ(u[2].password, "s3cret-from-file");
  EXPECT_EQ(u[2].page_timeout, seconds{5});
  EXPECT_EQ(u[3].password, "s3cret-from-env");

  const std::string summary = upstream_summary(u);
  EXPECT_NE(summary.find("# upstream pypi: https://pypi.org/simple/"), std::string::npos);
  EXPECT_EQ(summary.find("s3cret"), std::string::npos) << summary;
}

TEST_F(UpstreamConfigTest, EveryProblemNamesItsKey) {
  const auto checked = check_configuration(write(R"(
upstreams = 1

[[upstream]]
name = "Bad Name"
url = "ftp://x/"

[[upstream]]
name = "nourl"
projects = "some"
cooldown_days = -1
metadata_ttl = "soon"
page_timeout = "0s"
urll = "x"

[[upstream]]
name = "creds"
url = "https://user:pw@example.com/simple/"
page_timeout = "2h"
password = "p4ss-in-file"
password_env = "WF_TEST_SURELY_UNSET_VARIABLE"

[[upstream]]
name = "nourl"
url = "https://example.com/simple/"
serve_local = ["not a name!"]
username = "u"
page_timeout = true
)"),
                                           {});
  ASSERT_FALSE(checked.config);
  const std::string all = joined(checked.problems);
  for (const char* expected : {
           "unknown setting 'upstreams' in",
           "(did you mean 'upstream'?)",
           "upstream.Bad Name.name: expected lower-case letters",
           "upstream.Bad Name.url: expected the http:// or https:// URL",
           "upstream.nourl.url: required",
           "upstream.nourl.projects: expected \"all\" or a list of project names",
           "upstream.nourl.cooldown_days: expected a whole number from 0 to 3650",
           "upstream.nourl.metadata_ttl: expected a duration",
           "upstream.nourl.page_timeout: expected a duration from 1s to 1h such as \"60s\", "
           "got '0s'",
           "upstream.creds.page_timeout: expected a duration from 1s to 1h",
           "upstream.nourl.page_timeout: expected a duration from 1s to 1h such as \"60s\", "
           "got true",
           "unknown setting 'urll' in [[upstream]] upstream.nourl (did you mean 'url'?)",
           "upstream.creds.url: credentials do not belong in the URL",
           "upstream.creds.password_env: the environment variable "
           "'WF_TEST_SURELY_UNSET_VARIABLE' is not set",
           "upstream.creds.username: required with a password",
           "upstream.nourl.serve_local: 'not a name!' is not a valid project name",
           "upstream.nourl: username without a password",
           "upstream.nourl.name: another [[upstream]] has this name",
       }) {
    EXPECT_NE(all.find(expected), std::string::npos) << expected << "\nproblems:\n" << all;
  }
  EXPECT_EQ(all.find("p4ss"), std::string::npos) << all;
}

TEST_F(UpstreamConfigTest, OnePasswordSourceAndAReadableFile) {
  const auto checked = check_configuration(write(R"(
[[upstream]]
name = "two"
url = "https://example.com/simple/"
username = "u"
password = "a"
password_file = "/nonexistent/wf-password"
)"),
                                           {});
  ASSERT_FALSE(checked.config);
  const std::string all = joined(checked.problems);
  EXPECT_NE(all.find("upstream.two.password_file: cannot read '/nonexistent/wf-password'"),
            std::string::npos)
      << all;
  EXPECT_EQ(checked.problems.size(), 1U) << all;  // the unreadable file gave no password
}

TEST_F(UpstreamConfigTest, NotATableArray) {
  const auto checked = check_configuration(write("[upstream]\nname = \"x\"\n"), {});
  ASSERT_FALSE(checked.config);
  ASSERT_EQ(checked.problems.size(), 1U);
  EXPECT_EQ(checked.problems[0], "upstream: expected [[upstream]] tables, got a table");
}

}  // namespace
}  // namespace wf::app
