// The admin API's handlers through the route table, over a real catalog, job store and runner
// (a fake executor: no job ever runs).

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "handlers/handler_bed.hpp"

namespace wf::handlers {
namespace {

using testing::basic;
using testing::body_of;
using testing::HandlerBed;
using Json = nlohmann::json;

class AdminHandlers : public ::testing::Test {
 protected:
  AdminHandlers() : h("admin-handlers") {}

  Response admin(Method m, std::string target, std::string body = {}) {
    return h.respond(m, std::move(target), {{"authorization", basic(h.admin)}}, std::move(body));
  }
  void store(const std::string& project, const std::string& version) {
    const auto r =
        h.put(testing::wheel_name(project, version), h.wheel(project, version), h.upload);
    ASSERT_EQ(r.status, 201) << body_of(r);
  }

  HandlerBed h;
};

TEST_F(AdminHandlers, EveryAdminRouteNeedsAnAdminToken) {
  const std::pair<Method, std::string> routes[] = {
      {Method::del, "/admin/files/x.whl"},
      {Method::get, "/admin/tokens"},
      {Method::post, "/admin/tokens"},
      {Method::post, "/admin/tokens/1/revoke"},
      {Method::get, "/admin/audit"},
      {Method::post, "/admin/projects/p/claim"},
      {Method::post, "/admin/projects/p/release"},
      {Method::get, "/admin/builds"},
      {Method::post, "/admin/builds"},
      {Method::get, "/admin/builds/1"},
      {Method::get, "/admin/jobs/1"},
      {Method::get, "/admin/jobs/1/log"},
      {Method::post, "/admin/jobs/1/cancel"},
      {Method::post, "/admin/jobs/1/retry"},
      {Method::get, "/admin/nothing"},
  };
  for (const auto& [method, target] : routes) {
    const auto none = h.respond(method, target);
    EXPECT_EQ(none.status, 401) << target;
    EXPECT_FALSE(none.header("WWW-Authenticate").empty()) << target;
    EXPECT_EQ(h.respond(method, target, {{"authorization", basic(h.upload)}}).status, 403)
        << target;
    EXPECT_EQ(h.respond(method, target, {{"authorization", basic("wf_unknown")}}).status, 401)
        << target;
  }
}

TEST_F(AdminHandlers, YankAndUnyank) {
  store("demo-pkg", "1.0");
  auto r = admin(Method::post, "/admin/yank", "project=Demo_Pkg&version=1.0&reason=broken+ABI");
  ASSERT_EQ(r.status, 200) << body_of(r);
  EXPECT_EQ(r.header("Content-Type"), "application/json");
  EXPECT_EQ(Json::parse(body_of(r)),
            Json::parse(R"({"yanked":["demo_pkg-1.0-py3-none-any.whl"]})"));
  EXPECT_EQ(h.last.changed, Changed::everything);
  EXPECT_EQ(h.snapshot()->files_of("demo-pkg").front()->yanked, "broken ABI");
  // Parameters may come in the query too.
  r = admin(Method::post, "/admin/unyank?project=demo-pkg&filename=demo_pkg-1.0-py3-none-any.whl");
  ASSERT_EQ(r.status, 200) << body_of(r);
  EXPECT_EQ(Json::parse(body_of(r))["unyanked"].size(), 1U);
  EXPECT_FALSE(h.snapshot()->files_of("demo-pkg").front()->yanked);
}

TEST_F(AdminHandlers, YankRefusalsNameEveryProblem) {
  auto r = admin(Method::post, "/admin/yank", "version=1.0&filename=x&colour=red");
  EXPECT_EQ(r.status, 400);
  const std::string body = body_of(r);
  EXPECT_NE(body.find("unknown parameter 'colour'"), std::string::npos) << body;
  EXPECT_NE(body.find("project=NAME is required"), std::string::npos) << body;
  EXPECT_NE(body.find("give exactly one of version=V or filename=F"), std::string::npos) << body;
  // unyank takes no reason.
  r = admin(Method::post, "/admin/unyank", "project=demo-pkg&version=1.0&reason=x");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(body_of(r).find("unknown parameter 'reason'"), std::string::npos);
  // Nothing to yank.
  EXPECT_EQ(admin(Method::post, "/admin/yank", "project=nothing-here&version=1.0").status, 404);
  // A body above the small-body limit is refused from its declared size.
  EXPECT_EQ(admin(Method::post, "/admin/yank", std::string(kMaxSmallBody + 1, 'a')).status, 413);
}

TEST_F(AdminHandlers, DeleteFile) {
  store("demo-pkg", "1.0");
  auto r = admin(Method::del, "/admin/files/demo_pkg-1.0-py3-none-any.whl");
  ASSERT_EQ(r.status, 200) << body_of(r);
  EXPECT_EQ(Json::parse(body_of(r)),
            Json::parse(R"({"deleted":["demo_pkg-1.0-py3-none-any.whl"]})"));
  EXPECT_TRUE(h.snapshot()->files_of("demo-pkg").empty());
  EXPECT_EQ(admin(Method::del, "/admin/files/demo_pkg-1.0-py3-none-any.whl").status, 404);
  EXPECT_EQ(admin(Method::del, "/admin/files/").status, 404);
}

TEST_F(AdminHandlers, ClaimAndRelease) {
  store("demo-pkg", "1.0");
  // The id, read while the snapshot holding the token is alive: the claim publishes a new one.
  const auto before = h.snapshot();
  const auto* upload = before->tokens().find(h.upload);
  ASSERT_NE(upload, nullptr);
  const auto upload_id = upload->id;
  auto r =
      admin(Method::post, "/admin/projects/Demo.Pkg/claim", "token=" + std::to_string(upload_id));
  ASSERT_EQ(r.status, 200) << body_of(r);
  const Json claimed = Json::parse(body_of(r));
  EXPECT_EQ(claimed["project"], "demo-pkg");
  EXPECT_NE(claimed["claim"].get<std::string>().find(std::to_string(upload_id)), std::string::npos);
  r = admin(Method::post, "/admin/projects/demo-pkg/claim");  // admins only
  ASSERT_EQ(r.status, 200) << body_of(r);
  r = admin(Method::post, "/admin/projects/demo-pkg/release");
  ASSERT_EQ(r.status, 200) << body_of(r);
  EXPECT_EQ(h.last.changed, Changed::everything);
  r = admin(Method::post, "/admin/projects/demo-pkg/claim", "token=me");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(body_of(r).find("token=ID must be a token id"), std::string::npos);
  r = admin(Method::post, "/admin/projects/demo-pkg/release", "token=1");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(body_of(r).find("unknown parameter 'token'"), std::string::npos);
  EXPECT_EQ(admin(Method::post, "/admin/projects/..bad/claim").status, 400);
}

TEST_F(AdminHandlers, BuildsAndJobs) {
  auto r = admin(Method::post, "/admin/builds",
                 R"({"recipe": "demo", "version": "1.0.0", "matrix": {"torch": ["2.8"]}})");
  ASSERT_EQ(r.status, 202) << body_of(r);
  const Json created = Json::parse(body_of(r));
  const auto build = created["build"]["id"].get<std::int64_t>();
  ASSERT_EQ(created["jobs"].size(), 1U);
  const auto job = created["jobs"][0]["id"].get<std::int64_t>();
  EXPECT_EQ(h.last.changed, Changed::everything);  // not a catalog route: nothing reloaded

  r = admin(Method::get, "/admin/builds");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(Json::parse(body_of(r))["builds"][0]["id"], build);
  r = admin(Method::get, "/admin/builds/" + std::to_string(build));
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(Json::parse(body_of(r))["jobs"][0]["id"], job);
  r = admin(Method::get, "/admin/jobs/" + std::to_string(job));
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(Json::parse(body_of(r))["state"], "queued");

  r = admin(Method::get, "/admin/jobs/" + std::to_string(job) + "/log?offset=0");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.header("X-Job-State"), "queued");
  EXPECT_EQ(r.header("X-Log-Next-Offset"), std::to_string(body_of(r).size()));
  EXPECT_FALSE(h.last.follow);
  r = admin(Method::get, "/admin/jobs/" + std::to_string(job) + "/log?offset=5&follow=1");
  ASSERT_EQ(r.status, 200);
  ASSERT_TRUE(h.last.follow);
  EXPECT_EQ(h.last.follow->job, job);
  EXPECT_EQ(h.last.follow->offset, 5U);

  // A queued job is not retried; a cancelled one is.
  EXPECT_GE(admin(Method::post, "/admin/jobs/" + std::to_string(job) + "/retry").status, 400);
  r = admin(Method::post, "/admin/jobs/" + std::to_string(job) + "/cancel");
  ASSERT_EQ(r.status, 200) << body_of(r);
  EXPECT_EQ(Json::parse(body_of(r))["state"], "cancelled");
  r = admin(Method::post, "/admin/jobs/" + std::to_string(job) + "/retry");
  ASSERT_EQ(r.status, 200) << body_of(r);
  EXPECT_EQ(Json::parse(body_of(r))["state"], "queued");
}

TEST_F(AdminHandlers, BuildAndJobRefusals) {
  auto r = admin(Method::post, "/admin/builds", R"({"recipe": 1, "matrix": {"torch": ["x"]}})");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(body_of(r).find("\"recipe\" must be a string"), std::string::npos) << body_of(r);
  EXPECT_NE(body_of(r).find("missing version"), std::string::npos) << body_of(r);
  EXPECT_NE(body_of(r).find("torch 'x' is not a series like 2.8"), std::string::npos);
  r = admin(Method::post, "/admin/builds", R"({"recipe": "nope", "version": "1.0"})");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(body_of(r).find("unknown recipe 'nope'"), std::string::npos) << body_of(r);
  EXPECT_EQ(body_of(admin(Method::get, "/admin/builds/abc")), "no such admin endpoint\n");
  EXPECT_EQ(body_of(admin(Method::get, "/admin/builds/99")), "no such build\n");
  EXPECT_EQ(body_of(admin(Method::get, "/admin/jobs/99")), "no such job\n");
  EXPECT_EQ(admin(Method::get, "/admin/jobs/99/log?follow=1").status, 404);
  EXPECT_FALSE(h.last.follow);
  EXPECT_EQ(admin(Method::post, "/admin/jobs/99/cancel").status, 404);
  EXPECT_EQ(body_of(admin(Method::put, "/admin/nothing")), "no such admin endpoint\n");
  // Methods a resource does not take: 405 naming those it does.
  r = admin(Method::del, "/admin/builds");
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.header("Allow"), "GET, HEAD, POST");
}

TEST(AdminHandlersWithoutRunner, BuildRoutesSayTheRunnerIsOff) {
  HandlerBed h("admin-no-runner", false);
  for (const auto& [method, target] :
       std::vector<std::pair<Method, std::string>>{{Method::get, "/admin/builds"},
                                                   {Method::post, "/admin/builds"},
                                                   {Method::get, "/admin/builds/1"},
                                                   {Method::get, "/admin/jobs/1"},
                                                   {Method::get, "/admin/jobs/1/log"},
                                                   {Method::post, "/admin/jobs/1/cancel"},
                                                   {Method::post, "/admin/jobs/1/retry"}}) {
    const auto r = h.respond(method, target, {{"authorization", basic(h.admin)}});
    EXPECT_EQ(r.status, 404) << target;
    EXPECT_NE(body_of(r).find("the build runner is not enabled"), std::string::npos) << target;
  }
}

}  // namespace
}  // namespace wf::handlers
