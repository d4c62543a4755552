// The admin API's tokens and audit trail, and yanks by upload tokens, through the route table
// over a real catalog.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "handlers/handler_bed.hpp"

namespace wf::handlers {
namespace {

using testing::basic;
using testing::body_of;
using testing::HandlerBed;
using Json = nlohmann::json;

class AdminTokens : public ::testing::Test {
 protected:
  AdminTokens() : h("admin-tokens") {}

  Response as(std::string_view token, Method m, std::string target, std::string body = {}) {
    Request req = testing::make_request(m, std::move(target), {{"authorization", basic(token)}},
                                        std::move(body));
    req.peer = "192.0.2.7";
    return h.respond(req);
  }
  Response admin(Method m, std::string target, std::string body = {}) {
    return as(h.admin, m, std::move(target), std::move(body));
  }
  void store(const std::string& project, const std::string& version, const std::string& token) {
    const auto r = h.put(testing::wheel_name(project, version), h.wheel(project, version), token);
    ASSERT_EQ(r.status, 201) << body_of(r);
  }
  std::string create(const std::string& body) {
    const auto r = admin(Method::post, "/admin/tokens", body);
    EXPECT_EQ(r.status, 201) << body_of(r);
    return Json::parse(body_of(r))["token"].get<std::string>();
  }

  HandlerBed h;
};

TEST_F(AdminTokens, CreateListAndRevoke) {
  auto r = admin(Method::post, "/admin/tokens",
                 "scope=upload&project=Demo_Pkg&description=ci+runner&expires=90d");
  ASSERT_EQ(r.status, 201) << body_of(r);
  EXPECT_EQ(r.header("Cache-Control"), "no-store");
  const Json created = Json::parse(body_of(r));
  const std::string secret = created["token"];
  EXPECT_TRUE(secret.starts_with("wf_"));
  EXPECT_EQ(created["scope"], "upload");
  EXPECT_EQ(created["project"], "demo-pkg");
  EXPECT_EQ(created["description"], "ci runner");
  EXPECT_EQ(created["state"], "active");
  EXPECT_FALSE(created["expires_at"].is_null());
  const auto snap = h.snapshot();  // kept: the token record lives in it
  const auto* admin_token = snap->tokens().find(h.admin);
  ASSERT_NE(admin_token, nullptr);
  EXPECT_EQ(created["created_by"], "token:" + std::to_string(admin_token->id));
  EXPECT_EQ(h.last.changed, Changed::everything);

  // The new token works at once and is listed, without its secret.
  store("demo-pkg", "1.0", secret);
  r = admin(Method::get, "/admin/tokens");
  ASSERT_EQ(r.status, 200);
  const std::string listing = body_of(r);
  EXPECT_EQ(listing.find(secret), std::string::npos);
  EXPECT_EQ(listing.find("hash"), std::string::npos);
  const Json tokens = Json::parse(listing)["tokens"];
  const auto id = created["id"].get<std::int64_t>();
  bool found = false;
  for (const auto& t : tokens) found = found || (t["id"] == id && t["description"] == "ci runner");
  EXPECT_TRUE(found) << listing;

  r = admin(Method::post, "/admin/tokens/" + std::to_string(id) + "/revoke");
  ASSERT_EQ(r.status, 200) << body_of(r);
  EXPECT_EQ(Json::parse(body_of(r))["state"], "revoked");
  EXPECT_EQ(
      h.put(testing::wheel_name("demo-pkg", "2.0"), h.wheel("demo-pkg", "2.0"), secret).status,
      401);
  EXPECT_EQ(admin(Method::post, "/admin/tokens/999/revoke").status, 404);
  EXPECT_EQ(admin(Method::post, "/admin/tokens/abc/revoke").status, 404);
}

TEST_F(AdminTokens, CreateRefusalsNameEveryProblem) {
  auto r = admin(Method::post, "/admin/tokens", "expires=soon&project=..bad&colour=red");
  EXPECT_EQ(r.status, 400);
  const std::string body = body_of(r);
  EXPECT_NE(body.find("invalid expiry 'soon'"), std::string::npos) << body;
  EXPECT_NE(body.find("'..bad' is not a valid project name"), std::string::npos) << body;
  EXPECT_NE(body.find("unknown parameter 'colour'"), std::string::npos) << body;
  EXPECT_NE(body.find("scope=read|upload|admin is required"), std::string::npos) << body;
  r = admin(Method::post, "/admin/tokens", "scope=root");
  EXPECT_NE(body_of(r).find("scope must be read, upload or admin"), std::string::npos);
  r = admin(Method::post, "/admin/tokens", "scope=admin&project=demo");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(body_of(r).find("limits upload tokens only"), std::string::npos);
  r = admin(Method::post, "/admin/tokens", "scope=read&expires=2001-01-01");
  EXPECT_NE(body_of(r).find("in the past"), std::string::npos) << body_of(r);
}

TEST_F(AdminTokens, ExpiredTokenIsRefusedWithItsReason) {
  // A token that expired: written straight into the catalog (no API makes one).
  catalog::TokenRecord t;
  t.hash = auth::hash_token("wf_expired_token_for_test");
  t.scope = catalog::Scope::upload;
  t.created_at = now_micros() - 10'000'000;
  t.expires_at = now_micros() - 1'000'000;
  ASSERT_TRUE(h.bed.catalog->insert_token(t, catalog::Actor{}));
  const auto r = h.put(testing::wheel_name("demo-pkg", "1.0"), h.wheel("demo-pkg", "1.0"),
                       "wf_expired_token_for_test");
  EXPECT_EQ(r.status, 401);
  EXPECT_NE(body_of(r).find("expired at"), std::string::npos) << body_of(r);
  EXPECT_FALSE(h.last.unknown_token);
}

TEST_F(AdminTokens, UploadTokensYankTheirOwnProjectOnly) {
  store("demo-pkg", "1.0", h.upload);  // h.upload claims demo-pkg
  const std::string other = create("scope=upload&description=other");
  store("other-pkg", "1.0", other);

  auto r = as(h.upload, Method::post, "/admin/yank", "project=demo-pkg&version=1.0&reason=bad");
  ASSERT_EQ(r.status, 200) << body_of(r);
  EXPECT_EQ(h.snapshot()->files_of("demo-pkg").front()->yanked, "bad");
  r = as(h.upload, Method::post, "/admin/unyank", "project=demo-pkg&version=1.0");
  ASSERT_EQ(r.status, 200) << body_of(r);
  // A token limited to the project by an admin yanks there too.
  r = as(h.limited, Method::post, "/admin/yank", "project=demo-pkg&version=1.0");
  ASSERT_EQ(r.status, 200) << body_of(r);

  r = as(other, Method::post, "/admin/yank", "project=demo-pkg&version=1.0");
  EXPECT_EQ(r.status, 403);
  EXPECT_NE(body_of(r).find("may not yank files of project 'demo-pkg'"), std::string::npos)
      << body_of(r);
  r = as(other, Method::post, "/admin/unyank", "project=demo-pkg&version=1.0");
  EXPECT_EQ(r.status, 403);
  EXPECT_TRUE(h.snapshot()->files_of("demo-pkg").front()->yanked);  // still yanked
  r = as(h.limited, Method::post, "/admin/yank", "project=other-pkg&version=1.0");
  EXPECT_EQ(r.status, 403);
  EXPECT_EQ(as(h.read, Method::post, "/admin/yank", "project=demo-pkg&version=1.0").status, 403);
  // Deleting stays an admin's.
  r = as(h.upload, Method::del, "/admin/files/demo_pkg-1.0-py3-none-any.whl");
  EXPECT_EQ(r.status, 403);
  EXPECT_NE(body_of(r).find("needs 'admin'"), std::string::npos) << body_of(r);
}

TEST_F(AdminTokens, AuditRecordsWhoDidWhatFromWhere) {
  store("demo-pkg", "1.0", h.upload);
  ASSERT_EQ(
      as(h.upload, Method::post, "/admin/yank", "project=demo-pkg&version=1.0&reason=abi").status,
      200);
  ASSERT_EQ(admin(Method::del, "/admin/files/demo_pkg-1.0-py3-none-any.whl").status, 200);
  (void)create("scope=read&description=reader");

  auto r = admin(Method::get, "/admin/audit?project=demo-pkg");
  ASSERT_EQ(r.status, 200) << body_of(r);
  const Json entries = Json::parse(body_of(r))["entries"];
  // Newest first; the oldest is the bed's token limited to the project, made by a command.
  ASSERT_EQ(entries.size(), 4U) << body_of(r);
  EXPECT_EQ(entries[3]["action"], "token-create");
  EXPECT_EQ(entries[3]["actor"], "cli");
  EXPECT_EQ(entries[0]["action"], "delete");
  EXPECT_EQ(entries[0]["address"], "192.0.2.7");
  EXPECT_EQ(entries[1]["action"], "yank");
  EXPECT_EQ(entries[1]["detail"], "reason: abi");
  const auto upload_id = h.snapshot()->tokens().find(h.upload)->id;  // read while alive
  EXPECT_EQ(entries[1]["token_id"], upload_id);
  EXPECT_EQ(entries[2]["action"], "upload");
  EXPECT_EQ(entries[2]["actor"], "token:" + std::to_string(upload_id));
  EXPECT_EQ(entries[2]["target"], "demo_pkg-1.0-py3-none-any.whl");

  r = admin(Method::get, "/admin/audit?limit=1");
  ASSERT_EQ(r.status, 200);
  const Json last = Json::parse(body_of(r))["entries"];
  ASSERT_EQ(last.size(), 1U);
  EXPECT_EQ(last[0]["action"], "token-create");
  EXPECT_NE(last[0]["detail"].get<std::string>().find("description=reader"), std::string::npos);

  r = admin(Method::get, "/admin/audit?since=2999-01-01");
  EXPECT_TRUE(Json::parse(body_of(r))["entries"].empty());
  r = admin(Method::get, "/admin/audit?since=yesterday&limit=0&project=..x&x=1");
  EXPECT_EQ(r.status, 400);
  const std::string body = body_of(r);
  EXPECT_NE(body.find("since: invalid time 'yesterday'"), std::string::npos) << body;
  EXPECT_NE(body.find("limit must be a number"), std::string::npos) << body;
  EXPECT_NE(body.find("not a valid project name"), std::string::npos) << body;
  EXPECT_NE(body.find("unknown parameter 'x'"), std::string::npos) << body;
}

TEST_F(AdminTokens, BuildRequestsAreRecorded) {
  auto r = admin(Method::post, "/admin/builds",
                 R"({"recipe": "demo", "version": "1.0.0", "matrix": {"torch": ["2.8"]}})");
  ASSERT_EQ(r.status, 202) << body_of(r);
  const auto build = Json::parse(body_of(r))["build"]["id"].get<std::int64_t>();
  r = admin(Method::get, "/admin/audit?limit=1");
  const Json entry = Json::parse(body_of(r))["entries"][0];
  EXPECT_EQ(entry["action"], "build");
  EXPECT_EQ(entry["target"], "build #" + std::to_string(build));
  EXPECT_NE(entry["detail"].get<std::string>().find("recipe=demo version=1.0.0 jobs=1"),
            std::string::npos);
  EXPECT_EQ(entry["address"], "192.0.2.7");
  // A refused request records nothing.
  ASSERT_EQ(admin(Method::post, "/admin/builds", R"({"recipe": "nope", "version": "1"})").status,
            400);
  r = admin(Method::get, "/admin/audit?limit=1");
  EXPECT_EQ(Json::parse(body_of(r))["entries"][0]["target"], "build #" + std::to_string(build));
}

TEST_F(AdminTokens, UploadsKeepWhoUploadedThem) {
  store("demo-pkg", "1.0", h.upload);
  const auto snap = h.snapshot();
  const auto* f = snap->find_file("demo_pkg-1.0-py3-none-any.whl");
  ASSERT_NE(f, nullptr);
  const auto upload_id = snap->tokens().find(h.upload)->id;
  EXPECT_EQ(f->uploaded_by, "token:" + std::to_string(upload_id));
  EXPECT_EQ(f->uploaded_by_token, upload_id);
}

}  // namespace
}  // namespace wf::handlers
