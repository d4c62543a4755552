// The web UI's handlers through the route table: pages, static files, login and logout, the
// builds pages, with the checks each makes (private reads, admin scope, origin, form token).

#include <gtest/gtest.h>

#include "handlers/handler_bed.hpp"
#include "handlers/ui.hpp"
#include "wheelforge/ui/assets.hpp"

namespace wf::handlers {
namespace {

using testing::basic;
using testing::body_of;
using testing::HandlerBed;
using testing::Headers;
using testing::wheel_name;

class UiHandlers : public ::testing::Test {
 protected:
  UiHandlers() : h("ui-handlers") {
    EXPECT_EQ(h.put(wheel_name("demo-pkg", "1.0"), h.wheel("demo-pkg", "1.0"), h.upload).status,
              201);
  }

  /// A form POST as the browser sends it from a page of this server, signed in by Basic.
  Response post(const std::string& target, std::string form, const std::string& token) {
    Headers headers = {{"host", "idx.example"}, {"origin", "http://idx.example"}};
    if (!token.empty()) {
      headers.emplace_back("authorization", basic(token));
      form += "&csrf=" + h.sessions.form_token("token:" + token);
    }
    return h.respond(Method::post, target, std::move(headers), std::move(form));
  }
  Response get(const std::string& target, const std::string& token = {}) {
    Headers headers;
    if (!token.empty()) headers.emplace_back("authorization", basic(token));
    return h.respond(Method::get, target, std::move(headers));
  }

  HandlerBed h;
};

TEST_F(UiHandlers, PublicPages) {
  auto r = get("/");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.header("Content-Type"), "text/html; charset=utf-8");
  EXPECT_FALSE(r.header("Content-Security-Policy").empty());
  EXPECT_NE(body_of(r).find("demo-pkg"), std::string::npos);
  EXPECT_EQ(get("/?q=demo").status, 200);
  r = get("/project/demo-pkg/");
  ASSERT_EQ(r.status, 200);
  EXPECT_FALSE(r.header("ETag").empty());
  r = get("/project/Demo_Pkg/?version=1.0");
  EXPECT_EQ(r.status, 301);
  EXPECT_EQ(r.header("Location"), "/project/demo-pkg/?version=1.0");
  EXPECT_EQ(get("/project").header("Location"), "/");
  EXPECT_EQ(get("/project/nothing-here/").status, 404);
  EXPECT_EQ(get("/project/a/b/c").status, 404);
}

TEST_F(UiHandlers, PrivateIndexPagesNeedReadCredentials) {
  h.env.private_reads = true;
  for (const std::string target : {"/", "/project/demo-pkg/"}) {
    const auto r = get(target);
    EXPECT_EQ(r.status, 401) << target;
    EXPECT_FALSE(r.header("WWW-Authenticate").empty()) << target;
    EXPECT_EQ(get(target, h.read).status, 200) << target;
  }
  // The login page and static files are for everyone.
  EXPECT_EQ(get("/login").status, 200);
  EXPECT_EQ(get("/static/style.css").status, 200);
}

TEST_F(UiHandlers, StaticFiles) {
  const auto* css = ui::find_static("style.css");
  ASSERT_NE(css, nullptr);
  auto r = get("/static/" + css->hash + "/style.css");
  ASSERT_EQ(r.status, 200);
  EXPECT_NE(r.header("Cache-Control").find("immutable"), std::string_view::npos);
  EXPECT_EQ(body_of(r), std::string(css->bytes));
  r = h.respond(Method::get, "/static/style.css", {{"accept-encoding", "gzip"}});
  EXPECT_EQ(r.header("Content-Encoding"), "gzip");
  EXPECT_EQ(r.header("Cache-Control"), "no-cache");
  EXPECT_EQ(get("/static/0000000000000000/style.css").status, 404);
  EXPECT_EQ(get("/static/nothing.css").status, 404);
}

TEST_F(UiHandlers, LoginAndLogout) {
  auto r = get("/login?next=/builds/");
  ASSERT_EQ(r.status, 200);
  EXPECT_NE(body_of(r).find("/builds/"), std::string::npos);
  r = post("/login", "token=" + h.admin + "&next=/jobs/3", "");
  ASSERT_EQ(r.status, 303) << body_of(r);
  EXPECT_EQ(r.header("Location"), "/jobs/3");
  const std::string cookie(r.header("Set-Cookie"));
  EXPECT_NE(cookie.find("HttpOnly; SameSite=Strict"), std::string::npos) << cookie;
  EXPECT_EQ(h.last.note, "ui: login (scope admin)");
  const std::string id =
      cookie.substr(cookie.find('=') + 1, cookie.find(';') - cookie.find('=') - 1);
  EXPECT_EQ(h.sessions.token_of(id), h.admin);
  // An admin without a next page goes to the builds; elsewhere is never a next page.
  EXPECT_EQ(post("/login", "token=" + h.admin + "&next=//evil.example/", "").header("Location"),
            "/builds/");
  EXPECT_EQ(post("/login", "token=" + h.read, "").header("Location"), "/");

  // Logout needs the session's form token.
  const Headers session = {
      {"host", "idx.example"}, {"origin", "http://idx.example"}, {"cookie", "wf_session=" + id}};
  r = h.respond(Method::post, "/logout", session, "");
  EXPECT_EQ(r.status, 403);
  r = h.respond(Method::post, "/logout", session, "csrf=" + h.sessions.form_token("session:" + id));
  ASSERT_EQ(r.status, 303);
  EXPECT_NE(r.header("Set-Cookie").find("Max-Age=0"), std::string_view::npos);
  EXPECT_FALSE(h.sessions.token_of(id));
}

TEST_F(UiHandlers, LoginRefusals) {
  auto r = post("/login", "token=wf_not-a-known-token", "");
  EXPECT_EQ(r.status, 401);
  EXPECT_NE(body_of(r).find("Unknown or revoked token."), std::string::npos);
  // The form again, not a challenge: a browser would answer one with its own dialog.
  EXPECT_TRUE(r.header("WWW-Authenticate").empty());
  // The server looks at the catalog once before it answers: the token may be brand new.
  EXPECT_TRUE(h.last.unknown_token);
  EXPECT_EQ(h.last.note, "ui: login refused: unknown token");
  // From another site, or with neither Origin nor Referer.
  r = h.respond(Method::post, "/login", {{"host", "idx.example"}, {"origin", "http://evil"}},
                "token=" + h.admin);
  EXPECT_EQ(r.status, 403);
  EXPECT_EQ(h.respond(Method::post, "/login", {{"host", "idx.example"}}, "token=" + h.admin).status,
            403);
  EXPECT_EQ(h.respond(Method::post, "/login",
                      {{"host", "idx.example"}, {"referer", "http://idx.example/login"}},
                      "token=" + h.admin)
                .status,
            303);
  EXPECT_EQ(get("/login/more").status, 404);
  EXPECT_EQ(h.respond(Method::put, "/login").status, 405);
}

TEST_F(UiHandlers, BuildsPagesNeedAnAdmin) {
  for (const std::string target : {"/builds", "/builds/", "/jobs/1", "/jobs/1/log", "/builds/x"}) {
    auto r = get(target);
    EXPECT_EQ(r.status, 303) << target;
    EXPECT_EQ(r.header("Location").rfind("/login?next=", 0), 0U) << target;
    EXPECT_EQ(get(target, h.read).status, 403) << target;
    EXPECT_EQ(get(target, "wf_unknown").status, 401) << target;
  }
  EXPECT_EQ(get("/builds", h.admin).header("Location"), "/builds/");
  EXPECT_EQ(get("/builds/x", h.admin).status, 404);
  auto r = get("/builds/", h.admin);
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.header("Cache-Control"), "no-store");
  EXPECT_NE(body_of(r).find("demo"), std::string::npos);  // the recipe
}

TEST_F(UiHandlers, StartABuildThenCancelAndRetryItsJob) {
  auto r = post("/builds/", "recipe=demo&version=1.0.0&torch=2.8", h.admin);
  ASSERT_EQ(r.status, 303) << body_of(r);
  const std::string location(r.header("Location"));
  EXPECT_EQ(location.rfind("/builds/?created=", 0), 0U) << location;
  EXPECT_NE(h.last.note.find("submitted (1 jobs)"), std::string::npos) << h.last.note;
  auto builds = h.bed.jobs->list_builds(10);
  ASSERT_TRUE(builds && builds->size() == 1);
  auto jobs = h.bed.jobs->jobs_of_build(builds->front().id);
  ASSERT_TRUE(jobs && jobs->size() == 1);
  const std::string job = std::to_string(jobs->front().id);

  EXPECT_EQ(get("/builds/?created=" + std::to_string(builds->front().id), h.admin).status, 200);
  r = get("/jobs/" + job, h.admin);
  ASSERT_EQ(r.status, 200);
  r = get("/jobs/" + job + "/log?offset=0", h.admin);
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.header("X-Job-State"), "queued");
  r = get("/jobs/" + job + "/log?offset=3&follow=1", h.admin);
  ASSERT_TRUE(h.last.follow);
  EXPECT_EQ(h.last.follow->offset, 3U);

  r = post("/jobs/" + job + "/cancel", "", h.admin);
  EXPECT_EQ(r.status, 303);
  EXPECT_EQ(r.header("Location"), "/jobs/" + job);
  EXPECT_EQ(h.last.note, "ui: job " + job + " cancel");
  r = post("/jobs/" + job + "/retry", "", h.admin);
  EXPECT_EQ(r.status, 303);
  // Retrying a queued job is refused on the job's page.
  r = post("/jobs/" + job + "/retry", "", h.admin);
  EXPECT_GE(r.status, 400);
  EXPECT_NE(body_of(r).find("Could not retry the job"), std::string::npos);
}

TEST_F(UiHandlers, BuildFormRefusals) {
  // Without the form token, or from elsewhere.
  auto r = h.respond(Method::post, "/builds/",
                     {{"host", "idx.example"},
                      {"origin", "http://idx.example"},
                      {"authorization", basic(h.admin)}},
                     "recipe=demo&version=1.0.0");
  EXPECT_EQ(r.status, 403);
  // The form's rules are the JSON API's: every problem named on the page.
  r = post("/builds/", "recipe=&version=&python=3&torch=two&cuda=x", h.admin);
  EXPECT_EQ(r.status, 400);
  for (const char* problem : {"missing recipe", "missing version", "python &apos;3&apos;",
                              "torch &apos;two&apos;", "cuda &apos;x&apos;"}) {
    EXPECT_NE(body_of(r).find(problem), std::string::npos) << problem << " in " << body_of(r);
  }
  EXPECT_EQ(h.last.note, "ui: build refused");
  r = post("/builds/", "recipe=nope&version=1.0", h.admin);
  EXPECT_EQ(r.status, 400);
  // Jobs that do not exist.
  EXPECT_EQ(get("/jobs/99", h.admin).status, 404);
  EXPECT_EQ(get("/jobs/abc", h.admin).status, 404);
  EXPECT_EQ(get("/jobs/99/log", h.admin).status, 404);
  EXPECT_EQ(post("/jobs/abc/cancel", "", h.admin).status, 404);
  EXPECT_EQ(get("/jobs/1/2/3", h.admin).status, 404);
}

TEST(UiHandlersWithoutRunner, BuildsPagesSaySo) {
  HandlerBed h("ui-no-runner", false);
  const Headers admin = {{"authorization", basic(h.admin)}};
  auto r = h.respond(Method::get, "/builds/", admin);
  ASSERT_EQ(r.status, 200);
  EXPECT_NE(body_of(r).find("build runner is not enabled"), std::string::npos);
  r = h.respond(Method::get, "/jobs/1", admin);
  EXPECT_EQ(r.status, 404);
  EXPECT_NE(body_of(r).find("The build runner is not enabled."), std::string::npos);
}

TEST(DecodeBuildForm, CommaListsAndTheSharedRules) {
  auto r = decode_build_form({{"recipe", " demo "},
                              {"version", "1.0"},
                              {"force", "on"},
                              {"python", "3.11, 3.12,"},
                              {"torch", ""},
                              {"cuda", "12.8"}});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->recipe, "demo");
  EXPECT_TRUE(r->force);
  EXPECT_EQ(r->yank_superseded, std::nullopt) << "unticked: the recipe's";
  ASSERT_TRUE(r->subset);
  EXPECT_EQ(r->subset->python, (std::vector<std::string>{"3.11", "3.12"}));
  EXPECT_TRUE(r->subset->torch.empty());
  r = decode_build_form({{"recipe", "demo"}, {"version", "1.0"}, {"yank_superseded", "on"}});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->yank_superseded, true);
  EXPECT_FALSE(r->force);
  EXPECT_FALSE(decode_build_form({{"recipe", "demo"}})) << "a version is required";
}

}  // namespace
}  // namespace wf::handlers
