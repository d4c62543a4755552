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

constexpr const char* kVariables[] = {
    "WHEELFORGE_DATA_DIR",           "WHEELFORGE_LISTEN",
    "WHEELFORGE_MAX_UPLOAD_SIZE",    "WHEELFORGE_WORKER_THREADS",
    "WHEELFORGE_READ_TIMEOUT",       "WHEELFORGE_IDLE_TIMEOUT",
    "WHEELFORGE_MAX_CONNECTIONS",    "WHEELFORGE_SHUTDOWN_GRACE",
    "WHEELFORGE_ACCESS_LOG",         "WHEELFORGE_MAX_CONNECTIONS_PER_CLIENT",
    "WHEELFORGE_FIRST_BYTE_TIMEOUT", "WHEELFORGE_TRUSTED_PROXIES",
};

class SettingsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    clear_env();
    dir_ = fs::temp_directory_path() /
           ("wf-settings-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    clear_env();
    fs::remove_all(dir_);
  }

  static void clear_env() {
    for (const char* v : kVariables) ::unsetenv(v);
  }

  fs::path write_config(const std::string& text) {
    const fs::path p = dir_ / "wheelforge.toml";
    std::ofstream(p, std::ios::binary) << text;
    return p;
  }

  /// The problems reported, or a failure when the configuration loaded.
  static std::vector<std::string> problems_of(const ConfigCheck& c) {
    EXPECT_FALSE(c.config.has_value());
    return c.problems;
  }

  /// The settings part of the one loader.
  static Result<Settings> load_settings(const std::optional<fs::path>& file, const Overrides& o) {
    auto c = load_configuration(file, o);
    if (!c) return c.error();
    return std::move(c->settings);
  }

  static bool has_problem_starting(const std::vector<std::string>& problems,
                                   const std::string& prefix) {
    for (const auto& p : problems) {
      if (p.starts_with(prefix)) return true;
    }
    return false;
  }

  fs::path dir_;
};

TEST_F(SettingsTest, DefaultsWithoutFileEnvironmentOrFlags) {
  auto s = load_settings(std::nullopt, {});
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->data_dir, fs::path("data"));
  EXPECT_EQ(s->listen, "127.0.0.1:8080");
  EXPECT_EQ(s->max_upload_size, 8ULL << 30U);
  EXPECT_EQ(s->worker_threads, 2U);
  EXPECT_EQ(s->read_timeout, seconds{30});
  EXPECT_EQ(s->idle_timeout, seconds{60});
  EXPECT_EQ(s->max_connections, 1024U);
  EXPECT_EQ(s->shutdown_grace, seconds{10});
  EXPECT_TRUE(s->access_log);
  EXPECT_FALSE(s->config_file.has_value());
}

TEST_F(SettingsTest, ArchivePolicyDefaultsAndValues) {
  auto s = load_settings(std::nullopt, {});
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->max_inflated_size, 16ULL << 30U);
  EXPECT_EQ(s->max_compression_ratio, 100U);
  EXPECT_EQ(s->max_archive_members, 200'000U);

  const auto path = write_config(R"(
max_inflated_size = "4G"
max_compression_ratio = 20
max_archive_members = 5000
)");
  s = load_settings(path, {});
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->max_inflated_size, 4ULL << 30U);
  EXPECT_EQ(s->max_compression_ratio, 20U);
  EXPECT_EQ(s->max_archive_members, 5000U);
  EXPECT_NE(settings_to_toml(*s).find("max_inflated_size = \"4G\"\nmax_compression_ratio = 20\n"
                                      "max_archive_members = 5000\n"),
            std::string::npos)
      << settings_to_toml(*s);

  Overrides bad;
  bad.max_inflated_size = "0";
  bad.max_compression_ratio = "0";
  bad.max_archive_members = "lots";
  const auto problems = problems_of(check_configuration(std::nullopt, bad));
  EXPECT_EQ(problems.size(), 3U);
  for (const char* prefix :
       {"max_inflated_size: expected a size", "max_compression_ratio: expected a whole number",
        "max_archive_members: expected a whole number"}) {
    EXPECT_TRUE(has_problem_starting(problems, prefix)) << prefix;
  }
}

TEST_F(SettingsTest, FileValuesAreRead) {
  const auto path = write_config(R"(
data_dir = "/srv/wheels"
listen = "[::1]:9000"
max_upload_size = 1048576
worker_threads = 8
read_timeout = "1m30s"
idle_timeout = 120
max_connections = 50
shutdown_grace = "0"
access_log = false
)");
  auto s = load_settings(path, {});
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->data_dir, fs::path("/srv/wheels"));
  EXPECT_EQ(s->listen, "[::1]:9000");
  EXPECT_EQ(s->max_upload_size, 1048576U);
  EXPECT_EQ(s->worker_threads, 8U);
  EXPECT_EQ(s->read_timeout, seconds{90});
  EXPECT_EQ(s->idle_timeout, seconds{120});
  EXPECT_EQ(s->max_connections, 50U);
  EXPECT_EQ(s->shutdown_grace, seconds{0});
  EXPECT_FALSE(s->access_log);
  EXPECT_EQ(s->config_file, path);
}

TEST_F(SettingsTest, ConnectionsPerClient) {
  auto s = load_settings(std::nullopt, {});
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->max_connections_per_client, 256U);
  EXPECT_NE(settings_to_toml(*s).find("\nmax_connections_per_client = 256\n"), std::string::npos);

  const auto path = write_config("max_connections_per_client = 8\n");
  s = load_settings(path, {});
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->max_connections_per_client, 8U);
  ::setenv("WHEELFORGE_MAX_CONNECTIONS_PER_CLIENT", "12", 1);
  EXPECT_EQ(load_settings(path, {})->max_connections_per_client, 12U);
  Overrides flags;
  flags.max_connections_per_client = "3";
  EXPECT_EQ(load_settings(path, flags)->max_connections_per_client, 3U);

  for (const char* bad : {"0", "1000001", "lots"}) {
    flags.max_connections_per_client = bad;
    const auto problems = problems_of(check_configuration(path, flags));
    ASSERT_EQ(problems.size(), 1U) << bad;
    EXPECT_TRUE(has_problem_starting(
        problems, "max_connections_per_client: expected a whole number from 1 to 1000000"))
        << problems[0];
    EXPECT_NE(problems[0].find("(from --max-connections-per-client)"), std::string::npos);
  }
}

TEST_F(SettingsTest, TrustedProxies) {
  auto s = load_settings(std::nullopt, {});
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_TRUE(s->trusted_proxies.empty());
  EXPECT_EQ(s->forwarded_header, http::ForwardedHeader::x_forwarded_for);
  EXPECT_NE(settings_to_toml(*s).find("\ntrusted_proxies = []\n"), std::string::npos);
  EXPECT_NE(settings_to_toml(*s).find("\nforwarded_header = \"x-forwarded-for\"\n"),
            std::string::npos);

  const auto path = write_config(
      "trusted_proxies = [\"10.0.0.0/8\", \"::1\"]\nforwarded_header = \"Forwarded\"\n");
  s = load_settings(path, {});
  ASSERT_TRUE(s) << s.error().message;
  ASSERT_EQ(s->trusted_proxies.ranges.size(), 2U);
  EXPECT_TRUE(s->trusted_proxies.trusts(*http::parse_ip("10.2.3.4")));
  EXPECT_FALSE(s->trusted_proxies.trusts(*http::parse_ip("11.2.3.4")));
  EXPECT_EQ(s->forwarded_header, http::ForwardedHeader::forwarded);
  EXPECT_NE(settings_to_toml(*s).find("\ntrusted_proxies = [\"10.0.0.0/8\", \"::1\"]\n"),
            std::string::npos);
  // A string is a list too (the flag's and the variable's form).
  ::setenv("WHEELFORGE_TRUSTED_PROXIES", "192.168.0.0/16 127.0.0.1", 1);
  EXPECT_EQ(load_settings(path, {})->trusted_proxies.ranges.size(), 2U);
  EXPECT_TRUE(load_settings(path, {})->trusted_proxies.trusts(*http::parse_ip("127.0.0.1")));
  ::unsetenv("WHEELFORGE_TRUSTED_PROXIES");
  Overrides flags;
  flags.trusted_proxies = "127.0.0.1,fd00::/8";
  EXPECT_TRUE(load_settings(path, flags)->trusted_proxies.trusts(*http::parse_ip("fd00::7")));

  flags.trusted_proxies = "127.0.0.1,10.0.0.1/8";
  auto problems = problems_of(check_configuration(path, flags));
  ASSERT_EQ(problems.size(), 1U);
  EXPECT_TRUE(has_problem_starting(problems, "trusted_proxies: '10.0.0.1/8' has address bits"))
      << problems[0];
  EXPECT_NE(problems[0].find("(from --trusted-proxies)"), std::string::npos);
  flags = {};
  flags.forwarded_header = "x-real-ip";
  problems = problems_of(check_configuration(path, flags));
  ASSERT_EQ(problems.size(), 1U);
  EXPECT_TRUE(has_problem_starting(problems, "forwarded_header: expected")) << problems[0];

  const auto numbers = write_config("trusted_proxies = [1, 2]\n");
  problems = problems_of(check_configuration(numbers, {}));
  ASSERT_EQ(problems.size(), 1U);
  EXPECT_TRUE(has_problem_starting(problems, "trusted_proxies: expected")) << problems[0];
}

TEST_F(SettingsTest, FirstByteTimeout) {
  auto s = load_settings(std::nullopt, {});
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->first_byte_timeout, seconds{10});
  EXPECT_NE(settings_to_toml(*s).find("\nfirst_byte_timeout = \"10s\"\n"), std::string::npos);

  const auto path = write_config("first_byte_timeout = \"3s\"\n");
  s = load_settings(path, {});
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->first_byte_timeout, seconds{3});
  ::setenv("WHEELFORGE_FIRST_BYTE_TIMEOUT", "1m", 1);
  EXPECT_EQ(load_settings(path, {})->first_byte_timeout, seconds{60});
  Overrides flags;
  flags.first_byte_timeout = "2";
  s = load_settings(path, flags);
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->first_byte_timeout, seconds{2});
  ::unsetenv("WHEELFORGE_FIRST_BYTE_TIMEOUT");
  auto again = load_settings(write_config(settings_to_toml(*s)), {});
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(again->first_byte_timeout, seconds{2});

  for (const char* bad : {"0s", "2h", "soon"}) {
    flags.first_byte_timeout = bad;
    const auto problems = problems_of(check_configuration(path, flags));
    ASSERT_EQ(problems.size(), 1U) << bad;
    EXPECT_TRUE(has_problem_starting(problems, "first_byte_timeout: expected a duration"))
        << problems[0];
    EXPECT_NE(problems[0].find("(from --first-byte-timeout)"), std::string::npos) << problems[0];
  }
}

TEST_F(SettingsTest, EveryInvalidFileValueIsReportedByName) {
  const auto path = write_config(R"(
data_dir = ""
listen = "x:99999"
max_upload_size = "lots"
worker_threads = 65
read_timeout = "soon"
idle_timeout = "0s"
max_connections = 0
shutdown_grace = "2d"
access_log = "maybe"
)");
  const auto problems = problems_of(check_configuration(path, {}));
  EXPECT_EQ(problems.size(), 9U);
  for (const char* name :
       {"data_dir: ", "listen: invalid port in 'x:99999'", "max_upload_size: expected a size",
        "worker_threads: expected a whole number from 1 to 64", "read_timeout: expected a duration",
        "idle_timeout: expected a duration from 1s", "max_connections: ",
        "shutdown_grace: expected a duration", "access_log: expected a boolean"}) {
    EXPECT_TRUE(has_problem_starting(problems, name)) << name;
  }
  // Each problem says where the value came from.
  for (const auto& p : problems) EXPECT_NE(p.find(path.string()), std::string::npos) << p;

  // load_configuration reports the same problems in one error.
  auto s = load_settings(path, {});
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code, Errc::invalid);
  EXPECT_NE(s.error().message.find("listen: invalid port in 'x:99999'"), std::string::npos);
  EXPECT_NE(s.error().message.find("; max_upload_size: expected a size"), std::string::npos);
}

TEST_F(SettingsTest, EveryInvalidEnvironmentValueIsReportedByName) {
  const std::vector<std::pair<const char*, const char*>> bad = {
      {"WHEELFORGE_LISTEN", "no-port"},       {"WHEELFORGE_MAX_UPLOAD_SIZE", "8X"},
      {"WHEELFORGE_WORKER_THREADS", "0"},     {"WHEELFORGE_READ_TIMEOUT", "-5s"},
      {"WHEELFORGE_IDLE_TIMEOUT", "2 hours"}, {"WHEELFORGE_MAX_CONNECTIONS", "many"},
      {"WHEELFORGE_SHUTDOWN_GRACE", "2h"},    {"WHEELFORGE_ACCESS_LOG", "perhaps"},
  };
  for (const auto& [var, value] : bad) ::setenv(var, value, 1);
  const auto problems = problems_of(check_configuration(std::nullopt, {}));
  EXPECT_EQ(problems.size(), bad.size());
  for (const char* name :
       {"listen: ", "max_upload_size: ", "worker_threads: ", "read_timeout: ", "idle_timeout: ",
        "max_connections: ", "shutdown_grace: ", "access_log: "}) {
    EXPECT_TRUE(has_problem_starting(problems, name)) << name;
  }
  for (const auto& p : problems) {
    EXPECT_NE(p.find("(from WHEELFORGE_"), std::string::npos) << p;
  }
}

TEST_F(SettingsTest, EveryInvalidFlagIsReportedByName) {
  Overrides o;
  o.data_dir = "";
  o.listen = "127.0.0.1:65536";
  o.max_upload_size = "0";
  o.worker_threads = "1.5";
  o.read_timeout = "30x";
  o.idle_timeout = "30s1m";
  o.max_connections = "1000001";
  o.shutdown_grace = "";
  o.access_log = "2";
  const auto problems = problems_of(check_configuration(std::nullopt, o));
  EXPECT_EQ(problems.size(), 9U);
  for (const char* prefix :
       {"data_dir: must not be empty (from --data-dir)",
        "listen: invalid port in '127.0.0.1:65536' (from --listen)", "max_upload_size: ",
        "worker_threads: ", "read_timeout: ", "idle_timeout: ", "max_connections: ",
        "shutdown_grace: ", "access_log: expected true or false, got '2' (from --access-log)"}) {
    EXPECT_TRUE(has_problem_starting(problems, prefix)) << prefix;
  }
}

TEST_F(SettingsTest, UnknownKeysWrongTypesAndSyntaxErrorsAreProblems) {
  auto problems = problems_of(check_configuration(write_config(R"(
listen = 8080
worker_threads = "4"
access_log = 1
colour = "blue"
[server]
port = 1
)"),
                                                  {}));
  EXPECT_EQ(problems.size(), 5U);
  EXPECT_TRUE(has_problem_starting(problems, "listen: expected a string"));
  EXPECT_TRUE(has_problem_starting(problems, "worker_threads: expected an integer"));
  EXPECT_TRUE(has_problem_starting(problems, "access_log: expected a boolean"));
  EXPECT_TRUE(has_problem_starting(problems, "unknown setting 'colour'"));
  EXPECT_TRUE(has_problem_starting(problems, "unknown setting 'server'"));

  problems = problems_of(check_configuration(write_config("listen = \"unterminated\n"), {}));
  ASSERT_EQ(problems.size(), 1U);
  EXPECT_TRUE(
      has_problem_starting(problems, "config: " + (dir_ / "wheelforge.toml").string() + ":1:"))
      << problems[0];
}

TEST_F(SettingsTest, FileProblemsAndFlagProblemsAreReportedTogether) {
  Overrides o;
  o.worker_threads = "100";
  const auto problems =
      problems_of(check_configuration(write_config("listen = \"x:99999\"\nfoo = 1\n"), o));
  EXPECT_EQ(problems.size(), 3U);
  EXPECT_TRUE(has_problem_starting(problems, "listen: "));
  EXPECT_TRUE(has_problem_starting(problems, "unknown setting 'foo'"));
  EXPECT_TRUE(has_problem_starting(problems, "worker_threads: "));
}

TEST_F(SettingsTest, MissingExplicitFileIsAnError) {
  auto s = load_settings(dir_ / "absent.toml", {});
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("absent.toml: no such file"), std::string::npos);
}

TEST_F(SettingsTest, ResolveConfigFilePrefersTheGivenFile) {
  EXPECT_EQ(resolve_config_file(std::string("/x/y.toml")), fs::path("/x/y.toml"));
  const auto implicit = resolve_config_file(std::nullopt);
  if (fs::exists(kDefaultConfigFile)) {
    EXPECT_EQ(implicit, fs::path(kDefaultConfigFile));
  } else {
    EXPECT_FALSE(implicit.has_value());
  }
}

TEST_F(SettingsTest, FlagsBeatEnvironmentBeatsFileBeatsDefaults) {
  const auto path = write_config("listen = \"127.0.0.1:7001\"\nworker_threads = 3\n");
  Overrides flags;
  flags.listen = "127.0.0.1:7003";

  auto s = load_settings(path, {});
  ASSERT_TRUE(s);
  EXPECT_EQ(s->listen, "127.0.0.1:7001");
  EXPECT_EQ(s->worker_threads, 3U);
  EXPECT_EQ(s->idle_timeout, seconds{60});  // default: in no source

  ::setenv("WHEELFORGE_LISTEN", "127.0.0.1:7002", 1);
  s = load_settings(path, {});
  ASSERT_TRUE(s);
  EXPECT_EQ(s->listen, "127.0.0.1:7002");
  EXPECT_EQ(s->worker_threads, 3U);  // the file still provides what the environment lacks

  s = load_settings(path, flags);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->listen, "127.0.0.1:7003");

  // An empty variable counts as unset.
  ::setenv("WHEELFORGE_LISTEN", "", 1);
  s = load_settings(path, {});
  ASSERT_TRUE(s);
  EXPECT_EQ(s->listen, "127.0.0.1:7001");
}

TEST_F(SettingsTest, AValueOverriddenByAFlagIsNotValidated) {
  ::setenv("WHEELFORGE_LISTEN", "x:99999", 1);
  Overrides flags;
  flags.listen = "127.0.0.1:0";
  auto s = load_settings(std::nullopt, flags);
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->listen, "127.0.0.1:0");
}

TEST_F(SettingsTest, EverySettingHasAnEnvironmentVariable) {
  ::setenv("WHEELFORGE_DATA_DIR", "/var/lib/wheelforge", 1);
  ::setenv("WHEELFORGE_LISTEN", "0.0.0.0:80", 1);
  ::setenv("WHEELFORGE_MAX_UPLOAD_SIZE", "512M", 1);
  ::setenv("WHEELFORGE_WORKER_THREADS", "64", 1);
  ::setenv("WHEELFORGE_READ_TIMEOUT", "1h", 1);
  ::setenv("WHEELFORGE_IDLE_TIMEOUT", "5", 1);
  ::setenv("WHEELFORGE_MAX_CONNECTIONS", "1", 1);
  ::setenv("WHEELFORGE_SHUTDOWN_GRACE", "2m", 1);
  ::setenv("WHEELFORGE_ACCESS_LOG", "off", 1);
  auto s = load_settings(std::nullopt, {});
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->data_dir, fs::path("/var/lib/wheelforge"));
  EXPECT_EQ(s->listen, "0.0.0.0:80");
  EXPECT_EQ(s->max_upload_size, 512ULL << 20U);
  EXPECT_EQ(s->worker_threads, 64U);
  EXPECT_EQ(s->read_timeout, seconds{3600});
  EXPECT_EQ(s->idle_timeout, seconds{5});
  EXPECT_EQ(s->max_connections, 1U);
  EXPECT_EQ(s->shutdown_grace, seconds{120});
  EXPECT_FALSE(s->access_log);
}

TEST_F(SettingsTest, SourcesAreRecordedForReload) {
  const auto path = write_config("worker_threads = 4\n");
  Overrides flags;
  flags.listen = "127.0.0.1:0";
  auto s = load_settings(path, flags);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->config_file, path);
  EXPECT_EQ(s->overrides.listen, flags.listen);

  write_config("worker_threads = 6\n");
  auto reloaded = load_settings(s->config_file, s->overrides);
  ASSERT_TRUE(reloaded);
  EXPECT_EQ(reloaded->worker_threads, 6U);
  EXPECT_EQ(reloaded->listen, "127.0.0.1:0");
}

TEST_F(SettingsTest, PrintedTomlReadsBackToTheSameSettings) {
  Overrides o;
  o.data_dir = "/srv/odd \"dir\"\\with\ttab";
  o.max_upload_size = "1536K";
  o.read_timeout = "90";
  o.idle_timeout = "2m";
  o.shutdown_grace = "1h";
  o.access_log = "no";
  o.worker_threads = "7";
  auto s = load_settings(std::nullopt, o);
  ASSERT_TRUE(s) << s.error().message;
  const std::string text = settings_to_toml(*s);
  EXPECT_NE(text.find("max_upload_size = \"1536K\"\n"), std::string::npos) << text;
  EXPECT_NE(text.find("read_timeout = \"90s\"\n"), std::string::npos) << text;
  EXPECT_NE(text.find("idle_timeout = \"2m\"\n"), std::string::npos) << text;
  EXPECT_NE(text.find("shutdown_grace = \"1h\"\n"), std::string::npos) << text;
  EXPECT_NE(text.find("access_log = false\n"), std::string::npos) << text;
  EXPECT_NE(text.find("worker_threads = 7\n"), std::string::npos) << text;

  auto again = load_settings(write_config(text), {});
  ASSERT_TRUE(again) << again.error().message << "\n" << text;
  EXPECT_EQ(again->data_dir, s->data_dir);
  EXPECT_EQ(again->listen, s->listen);
  EXPECT_EQ(again->max_upload_size, s->max_upload_size);
  EXPECT_EQ(again->worker_threads, s->worker_threads);
  EXPECT_EQ(again->read_timeout, s->read_timeout);
  EXPECT_EQ(again->idle_timeout, s->idle_timeout);
  EXPECT_EQ(again->max_connections, s->max_connections);
  EXPECT_EQ(again->shutdown_grace, s->shutdown_grace);
  EXPECT_EQ(again->access_log, s->access_log);
}

TEST(ParseDuration, AcceptsUnitsAndBareSeconds) {
  EXPECT_EQ(parse_duration("0"), seconds{0});
  EXPECT_EQ(parse_duration("45"), seconds{45});
  EXPECT_EQ(parse_duration("30s"), seconds{30});
  EXPECT_EQ(parse_duration("2m"), seconds{120});
  EXPECT_EQ(parse_duration("1h"), seconds{3600});
  EXPECT_EQ(parse_duration("1h30m"), seconds{5400});
  EXPECT_EQ(parse_duration("1m30s"), seconds{90});
  EXPECT_EQ(parse_duration(" 10s "), seconds{10});
  for (const char* bad : {"", "s", "-1s", "1.5s", "10ms", "1d", "30s1m", "1m1m", "1 m",
                          "99999999999999999999s", "3000000000"}) {
    EXPECT_FALSE(parse_duration(bad).has_value()) << bad;
  }
}

TEST(ParseBool, AcceptsCommonSpellings) {
  for (const char* t : {"true", "TRUE", "yes", "on", "1"}) EXPECT_EQ(parse_bool(t), true) << t;
  for (const char* f : {"false", "No", "off", "0"}) EXPECT_EQ(parse_bool(f), false) << f;
  for (const char* bad : {"", "2", "enabled", "truthy"}) EXPECT_FALSE(parse_bool(bad)) << bad;
}

TEST(ParseSize, BinaryMultiples) {
  EXPECT_EQ(parse_size("123"), 123U);
  EXPECT_EQ(parse_size("64K"), 64U << 10U);
  EXPECT_EQ(parse_size("8g"), 8ULL << 30U);
  EXPECT_FALSE(parse_size("8X"));
  EXPECT_FALSE(parse_size("99999999999T"));
}

}  // namespace
}  // namespace wf::app
