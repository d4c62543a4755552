// The web UI's tokens page and the project page's "uploaded by" for admins, through the route
// table: the admin check, the form checks, the secret shown once, revocation.

#include <gtest/gtest.h>

#include <regex>

#include "handlers/handler_bed.hpp"
#include "wheelforge/auth/tokens.hpp"

namespace wf::handlers {
namespace {

using testing::body_of;
using testing::HandlerBed;
using testing::wheel_name;

class UiTokens : public ::testing::Test {
 protected:
  UiTokens() : h("ui-tokens") {}

  Response post(const std::string& target, std::string form, const std::string& token,
                bool with_form_token = true) {
    return h.ui_post(target, std::move(form), token, with_form_token);
  }
  Response get(const std::string& target, const std::string& token = {}) {
    return h.ui_get(target, token);
  }

  HandlerBed h;
};

TEST_F(UiTokens, PagesNeedAnAdmin) {
  for (const std::string target : {"/tokens", "/tokens/", "/tokens/x"}) {
    auto r = get(target);
    EXPECT_EQ(r.status, 303) << target;
    EXPECT_EQ(r.header("Location").rfind("/login?next=", 0), 0U) << target;
    EXPECT_EQ(get(target, h.upload).status, 403) << target;
  }
  EXPECT_EQ(get("/tokens", h.admin).header("Location"), "/tokens/");
  EXPECT_EQ(post("/tokens/", "scope=read", h.upload).status, 403);
  EXPECT_EQ(post("/tokens/1/revoke", "", h.upload).status, 403);
}

TEST_F(UiTokens, CreateShowsTheSecretOnceThenRevoke) {
  auto r =
      post("/tokens/", "scope=upload&project=Demo_Pkg&description=ci+%3Cb%3E&expires=30d", h.admin);
  ASSERT_EQ(r.status, 201) << body_of(r);
  EXPECT_EQ(r.header("Cache-Control"), "no-store");
  const std::string page = body_of(r);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(page, m, std::regex("<code id=\"new-token\">(wf_[A-Za-z0-9_-]+)")))
      << page;
  const std::string secret = m[1];
  EXPECT_NE(page.find("ci &lt;b&gt;"), std::string::npos);  // escaped
  EXPECT_EQ(page.find("ci <b>"), std::string::npos);
  // The secret works, and the page never shows it again.
  ASSERT_EQ(h.put(wheel_name("demo-pkg", "1.0"), h.wheel("demo-pkg", "1.0"), secret).status, 201);
  r = get("/tokens/", h.admin);
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(body_of(r).find(secret), std::string::npos);
  EXPECT_NE(body_of(r).find("demo-pkg"), std::string::npos);

  const auto snap = h.snapshot();
  const auto* record = snap->tokens().find(secret);
  ASSERT_NE(record, nullptr);
  const std::string id = std::to_string(record->id);
  // Without the form token: refused, the token lives on.
  EXPECT_EQ(post("/tokens/" + id + "/revoke", "", h.admin, false).status, 403);
  r = post("/tokens/" + id + "/revoke", "", h.admin);
  ASSERT_EQ(r.status, 303) << body_of(r);
  EXPECT_EQ(r.header("Location"), "/tokens/?revoked=" + id);
  EXPECT_EQ(h.put(wheel_name("demo-pkg", "2.0"), h.wheel("demo-pkg", "2.0"), secret).status, 401);
  EXPECT_EQ(post("/tokens/999/revoke", "", h.admin).status, 404);
}

TEST_F(UiTokens, CreateRefusalsAreShownOnThePage) {
  auto r = post("/tokens/", "scope=admin&project=demo&expires=later", h.admin);
  EXPECT_EQ(r.status, 400);
  const std::string page = body_of(r);
  EXPECT_NE(page.find("The token was not created"), std::string::npos) << page;
  EXPECT_NE(page.find("invalid expiry"), std::string::npos) << page;
  EXPECT_NE(page.find("limits upload tokens only"), std::string::npos) << page;
  EXPECT_EQ(page.find("new-token"), std::string::npos);
}

TEST_F(UiTokens, AdminsSeeWhoUploadedEachFile) {
  ASSERT_EQ(h.put(wheel_name("demo-pkg", "1.0"), h.wheel("demo-pkg", "1.0"), h.upload).status, 201);
  const auto snap = h.snapshot();
  const std::string id = std::to_string(snap->tokens().find(h.upload)->id);
  auto r = get("/project/demo-pkg/", h.admin);
  ASSERT_EQ(r.status, 200);
  EXPECT_NE(body_of(r).find("by token #" + id), std::string::npos) << body_of(r);
  for (const std::string& who : {std::string(), h.read, h.upload}) {
    r = get("/project/demo-pkg/", who);
    ASSERT_EQ(r.status, 200);
    EXPECT_EQ(body_of(r).find("uploaded-by"), std::string::npos);
  }
}

}  // namespace
}  // namespace wf::handlers
