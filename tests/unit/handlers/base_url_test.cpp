#include <gtest/gtest.h>

#include "wheelforge/handlers/message.hpp"
#include "wheelforge/handlers/ui_sessions.hpp"

namespace wf::handlers {
namespace {

Request with_host(std::string host, bool tls) {
  Request r;
  r.headers.emplace_back("host", std::move(host));
  r.tls = tls;
  return r;
}

TEST(BaseUrl, SchemeFollowsTheTransport) {
  EXPECT_EQ(base_url(with_host("idx.example:8443", true)), "https://idx.example:8443");
  EXPECT_EQ(base_url(with_host("127.0.0.1:8080", false)), "http://127.0.0.1:8080");
  EXPECT_EQ(base_url(with_host("[::1]:8080", true)), "https://[::1]:8080");
}

TEST(BaseUrl, HostileHostsAreReplaced) {
  EXPECT_EQ(base_url(with_host("evil\"><script>", false)), "http://localhost");
  EXPECT_EQ(base_url(with_host("a/b", true)), "https://localhost");
  EXPECT_EQ(base_url(with_host("", false)), "http://localhost");
}

TEST(UiSessions, SessionsAndFormTokens) {
  UiSessions sessions;
  const std::string id = sessions.create("wf_token");
  EXPECT_GE(id.size(), 40U);
  EXPECT_EQ(sessions.token_of(id), "wf_token");
  EXPECT_FALSE(sessions.token_of("nope"));
  const std::string form = sessions.form_token("session:" + id);
  EXPECT_EQ(form, sessions.form_token("session:" + id));
  EXPECT_NE(form, sessions.form_token("session:other"));
  // Another server (another secret) makes other form tokens.
  EXPECT_NE(form, UiSessions().form_token("session:" + id));
  sessions.remove(id);
  EXPECT_FALSE(sessions.token_of(id));
}

}  // namespace
}  // namespace wf::handlers
