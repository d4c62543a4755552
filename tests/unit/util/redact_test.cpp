#include "wheelforge/util/redact.hpp"

#include <gtest/gtest.h>

#include <string>

#include "wheelforge/util/log.hpp"

namespace wf {
namespace {

TEST(Redact, MasksTheUserinfoOfEveryUrlAndKeepsTheLength) {
  const std::string line =
      "==> [preparing] /usr/bin/git clone https://user:ghp_s3cret@github.com/org/repo.git src; "
      "fatal: 'http://tok@127.0.0.1:8080/x' and ssh://git@example.com:org/y.git";
  const std::string masked = redact(line);
  EXPECT_EQ(masked.size(), line.size());
  EXPECT_EQ(masked.find("ghp_s3cret"), std::string::npos) << masked;
  EXPECT_EQ(masked.find("user:"), std::string::npos) << masked;
  const std::string stars(std::string_view("user:ghp_s3cret").size(), '*');
  EXPECT_NE(masked.find("https://" + stars + "@github.com/org/repo.git"), std::string::npos)
      << masked;
  EXPECT_NE(masked.find("http://***@127.0.0.1:8080/x"), std::string::npos) << masked;
  EXPECT_NE(masked.find("ssh://***@example.com"), std::string::npos) << masked;
  EXPECT_TRUE(needs_redaction(line));
}

TEST(Redact, LeavesUrlsWithoutUserinfoAndPlainTextAlone) {
  for (const std::string text :
       {"GET /simple/flash-attn/ 200", "https://pypi.org/simple/ mail@example.com",
        "https://host/path/a@b", "https://host?q=a@b", "://@", "x://"}) {
    EXPECT_FALSE(needs_redaction(text)) << text;
    EXPECT_EQ(redact(text), text);
  }
}

TEST(Redact, MasksRegisteredSecretsEverywhere) {
  const std::string secret = "glpat-0123456789abcdef";
  EXPECT_FALSE(needs_redaction("token " + secret + " in a build log"));
  add_secret(secret);
  add_secret(secret);  // once is enough
  add_secret("abc");   // too short to be registered
  const std::string text = "token " + secret + " twice: " + secret + secret + " abc";
  const std::string masked = redact(text);
  EXPECT_EQ(masked, "token " + std::string(secret.size(), '*') +
                        " twice: " + std::string(2 * secret.size(), '*') + " abc");
  EXPECT_GE(redaction_margin(), secret.size());
  std::string in_place = text;
  EXPECT_TRUE(redact_in_place(in_place));
  EXPECT_EQ(in_place, masked);
}

TEST(Redact, TheLogMasksWhatItIsGiven) {
  std::string seen;
  log::set_output([&seen](log::Level, std::chrono::system_clock::time_point,
                          std::string_view line) { seen = std::string(line); });
  log::info("job={} source {}", 7, "https://me:hunter22@git.example.com/r.git");
  log::shutdown();
  EXPECT_EQ(seen, "job=7 source https://***********@git.example.com/r.git");
}

}  // namespace
}  // namespace wf
