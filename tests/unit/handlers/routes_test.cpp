#include "wheelforge/handlers/routes.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "handlers/handlers.hpp"

namespace wf::handlers {
namespace {

std::vector<std::string> path(std::string_view target) {
  auto parsed = parse_target(target);
  EXPECT_TRUE(parsed) << target;
  return parsed ? parsed->first : std::vector<std::string>{};
}

RouteMatch lookup(Method m, std::string_view target) {
  return find_route(m, path(target));
}

TEST(RouteTable, RowsAreWellFormed) {
  std::set<std::string_view> seen;
  std::string_view previous;
  for (const Route& r : routes()) {
    SCOPED_TRACE(std::string(r.pattern));
    EXPECT_TRUE(r.pattern.starts_with('/'));
    EXPECT_NE(r.methods, 0);
    EXPECT_NE(r.handler, nullptr);
    EXPECT_FALSE(r.label.empty());
    // Rows of one resource are adjacent, so that its Allow header names all of them.
    if (r.pattern != previous) {
      EXPECT_TRUE(seen.insert(r.pattern).second) << "not adjacent";
    }
    previous = r.pattern;
    // Only blocking handlers may change the catalog or read a body.
    if (r.changes_catalog || r.body != BodyPolicy::none) {
      EXPECT_EQ(r.thread, Thread::worker);
    }
    // Uploads stream; the head is checked before a byte of the body is read.
    if (r.body == BodyPolicy::file) {
      EXPECT_EQ(r.access, Access::handler);
    }
    if (r.body == BodyPolicy::form) {
      EXPECT_EQ(r.access, Access::upload);
    }
  }
  // The table ends in the catch-all: every path has a resource.
  EXPECT_EQ(routes().back().pattern, "/*");
}

TEST(RouteTable, EachRequestFindsItsHandlerAndLabel) {
  const std::string sha(64, 'a');
  struct Case {
    Method method;
    std::string target;
    Handler handler;
    std::string_view label;
  };
  const Case cases[] = {
      {Method::get, "/simple/", handle_simple, "simple_root"},
      {Method::head, "/simple", handle_simple, "simple_root"},
      {Method::get, "/simple/flash-attn/", handle_simple, "simple_project"},
      {Method::get, "/cu128/torch2.8/simple/", handle_simple, "view_root"},
      {Method::get, "/cu128/torch2.8/simple/flash-attn/", handle_simple, "view_project"},
      {Method::get, "/files/" + sha + "/a-1.0-py3-none-any.whl", handle_file, "file"},
      {Method::get, "/files/" + sha + "/a-1.0-py3-none-any.whl.metadata", handle_file, "metadata"},
      {Method::get, "/files/" + sha + "/.metadata", handle_file, "file"},
      {Method::get, "/upstream/pypi/" + sha + "/a-1.0-py3-none-any.whl", handle_upstream_file,
       "upstream_file"},
      {Method::get, "/upstream/pypi/" + sha + "/a-1.0-py3-none-any.whl.metadata",
       handle_upstream_file, "upstream_file"},
      {Method::get,
       "/integrity/flash-attn/2.8.3%2Bcu128/a-2.8.3%2Bcu128-py3-none-any.whl/provenance",
       handle_provenance, "provenance"},
      {Method::head, "/integrity/Flash_Attn/1.0/a-1.0.tar.gz/provenance", handle_provenance,
       "provenance"},
      {Method::get, "/integrity/flash-attn/1.0/a-1.0.tar.gz", handle_not_found, "other"},
      {Method::get, "/integrity/flash-attn/1.0/a-1.0.tar.gz/provenance/x", handle_not_found,
       "other"},
      {Method::get, "/api/projects/flash-attn/variants", handle_variants, "api"},
      {Method::get, "/api/resolve?torch=2.8", handle_resolve, "api"},
      {Method::get, "/.well-known/pytp", handle_pytp_discovery, "oidc"},
      {Method::get, "/.well-known/pytp/legacy/", handle_pytp_discovery, "oidc"},
      {Method::get, "/_/oidc/audience", handle_oidc_audience, "oidc"},
      {Method::post, "/_/oidc/mint-token", handle_oidc_mint, "oidc"},
      {Method::get, "/admin/publishers", handle_list_publishers, "admin"},
      {Method::post, "/admin/publishers", handle_add_publisher, "admin"},
      {Method::del, "/admin/publishers/3", handle_remove_publisher, "admin"},
      {Method::get, "/api/files/" + sha + "/contents", handle_file_contents, "api"},
      {Method::get, "/api/other", handle_not_found, "api"},
      {Method::get, "/healthz", handle_healthz, "health"},
      {Method::get, "/readyz", handle_readyz, "health"},
      {Method::get, "/metrics", handle_metrics, "metrics"},
      {Method::put, "/upload/a-1.0-py3-none-any.whl", handle_put_upload, "upload"},
      {Method::put, "/upload/", handle_put_upload, "upload"},
      {Method::post, "/legacy/", handle_form_upload, "legacy_upload"},
      {Method::post, "/legacy", handle_form_upload, "legacy_upload"},
      {Method::post, "/admin/yank", handle_yank, "admin"},
      {Method::post, "/admin/unyank", handle_unyank, "admin"},
      {Method::del, "/admin/files/a-1.0.tar.gz", handle_delete_file, "admin"},
      {Method::post, "/admin/projects/demo/claim", handle_claim, "admin"},
      {Method::post, "/admin/projects/demo/release", handle_release, "admin"},
      {Method::get, "/admin/tokens", handle_list_tokens, "admin"},
      {Method::post, "/admin/tokens", handle_create_token, "admin"},
      {Method::post, "/admin/tokens/3/revoke", handle_revoke_token, "admin"},
      {Method::get, "/admin/audit?project=x", handle_audit, "admin"},
      {Method::get, "/admin/builds", handle_list_builds, "admin"},
      {Method::post, "/admin/builds", handle_submit_build, "admin"},
      {Method::get, "/admin/builds/3", handle_show_build, "admin"},
      {Method::get, "/admin/jobs/7", handle_show_job, "admin"},
      {Method::get, "/admin/jobs/7/log?follow=1", handle_job_log, "admin"},
      {Method::post, "/admin/jobs/7/cancel", handle_cancel_job, "admin"},
      {Method::post, "/admin/jobs/7/retry", handle_retry_job, "admin"},
      {Method::put, "/admin/nothing/here", handle_no_admin_endpoint, "admin"},
      {Method::get, "/", handle_home, "home"},
      {Method::get, "/?q=flash", handle_home, "home"},
      {Method::get, "/project/flash-attn/", handle_project_page, "ui"},
      // A UI path is never a view, whatever follows.
      {Method::get, "/project/simple/", handle_project_page, "ui"},
      {Method::get, "/static/app.css", handle_static, "ui"},
      {Method::get, "/inspect/" + sha, handle_inspect_page, "ui"},
      {Method::get, "/projects", handle_projects_redirect, "ui"},
      {Method::get, "/projects/", handle_projects, "ui"},
      {Method::get, "/projects/?q=flash&sort=updated&page=2", handle_projects, "ui"},
      {Method::get, "/projects/x", handle_no_page, "ui"},
      {Method::get, "/login", handle_login_form, "ui"},
      {Method::post, "/login", handle_login, "ui"},
      {Method::get, "/login/x", handle_no_page, "ui"},
      {Method::post, "/logout", handle_logout, "ui"},
      {Method::get, "/builds", handle_builds_redirect, "ui"},
      {Method::get, "/builds/", handle_builds_page, "ui"},
      {Method::post, "/builds/", handle_start_build, "ui"},
      {Method::get, "/builds/x", handle_no_admin_page, "ui"},
      {Method::get, "/jobs/4", handle_job_page, "ui"},
      {Method::get, "/jobs/4/log?offset=9", handle_job_log_page, "ui"},
      {Method::post, "/jobs/4/cancel", handle_cancel_job_page, "ui"},
      {Method::post, "/jobs/4/retry", handle_retry_job_page, "ui"},
      {Method::get, "/jobs/4/5/6", handle_no_admin_page, "ui"},
      {Method::get, "/tokens", handle_tokens_redirect, "ui"},
      {Method::get, "/tokens/", handle_tokens_page, "ui"},
      {Method::post, "/tokens/", handle_create_token_page, "ui"},
      {Method::post, "/tokens/3/revoke", handle_revoke_token_page, "ui"},
      {Method::get, "/tokens/3", handle_no_admin_page, "ui"},
      {Method::get, "/nothing", handle_not_found, "other"},
      {Method::get, "/healthz/more", handle_not_found, "other"},
  };
  for (const Case& c : cases) {
    const RouteMatch m = lookup(c.method, c.target);
    ASSERT_NE(m.route, nullptr) << method_name(c.method) << " " << c.target;
    EXPECT_EQ(m.route->handler, c.handler) << c.target;
    EXPECT_EQ(m.label, c.label) << c.target;
  }
}

TEST(RouteTable, OtherMethodsGetTheResourcesAllow) {
  struct Case {
    Method method;
    std::string_view target;
    std::string_view allow;
    std::string_view label;
  };
  const Case cases[] = {
      {Method::post, "/simple/", "GET, HEAD", "simple_root"},
      {Method::put, "/files/x/y", "GET, HEAD", "file"},
      {Method::post, "/integrity/a/1.0/a-1.0.tar.gz/provenance", "GET, HEAD", "provenance"},
      {Method::get, "/legacy/", "POST", "legacy_upload"},
      {Method::post, "/upload/a.whl", "PUT", "upload"},
      {Method::get, "/admin/yank", "POST", "admin"},
      {Method::get, "/admin/files/a.whl", "DELETE", "admin"},
      {Method::del, "/admin/tokens", "GET, HEAD, POST", "admin"},
      {Method::get, "/admin/tokens/1/revoke", "POST", "admin"},
      {Method::put, "/admin/builds", "GET, HEAD, POST", "admin"},
      {Method::post, "/admin/jobs/1/log", "GET, HEAD", "admin"},
      {Method::get, "/admin/jobs/1/cancel", "POST", "admin"},
      {Method::post, "/", "GET, HEAD", "home"},
      {Method::del, "/login", "GET, HEAD, POST", "ui"},
      {Method::get, "/logout", "POST", "ui"},
      {Method::put, "/builds/", "GET, HEAD, POST", "ui"},
      {Method::post, "/jobs/1", "GET, HEAD", "ui"},
      {Method::get, "/jobs/1/retry", "POST", "ui"},
      {Method::other, "/nothing", "GET, HEAD", "other"},
      {Method::post, "/projects/", "GET, HEAD", "ui"},
      {Method::post, "/project/flash-attn/", "GET, HEAD", "ui"},
  };
  for (const Case& c : cases) {
    const RouteMatch m = lookup(c.method, c.target);
    EXPECT_EQ(m.route, nullptr) << c.target;
    EXPECT_EQ(allow_header(m.allowed), c.allow) << c.target;
    EXPECT_EQ(m.label, c.label) << c.target;
    // And respond() answers 405 with that Allow header, before any credentials.
    Environment env;
    const auto snap = snapshot::Snapshot::build(catalog::Contents{});
    Context ctx(*snap, env);
    Request req;
    req.method = c.method;
    req.target = std::string(c.target);
    req.segments = path(c.target);
    const Response r = respond(req, ctx);
    EXPECT_EQ(r.status, 405) << c.target;
    EXPECT_EQ(r.header("Allow"), c.allow) << c.target;
  }
}

TEST(RouteTable, UploadsToTheWrongAddressHearWhereUploadsGo) {
  // twine or poetry given the index URL (or a page's) instead of the upload URL.
  const std::string hint = "uploads go to /legacy/ (twine, poetry, pdm) or PUT /upload/<filename>";
  for (const Method method : {Method::post, Method::put}) {
    for (const std::string_view target :
         {"/", "/simple/", "/simple/flash-attn/", "/project/flash-attn/", "/projects/"}) {
      Environment env;
      const auto snap = snapshot::Snapshot::build(catalog::Contents{});
      Context ctx(*snap, env);
      Request req;
      req.method = method;
      req.target = std::string(target);
      req.segments = path(target);
      const Response r = respond(req, ctx);
      EXPECT_EQ(r.status, 405) << target;
      EXPECT_EQ(r.header("Allow"), "GET, HEAD") << target;
      EXPECT_NE(std::get<std::string>(r.body).find(hint), std::string::npos) << target;
      EXPECT_NE(r.reason.find(hint), std::string::npos) << target;
    }
  }
  // Other methods hear only what the address answers.
  const Response r = wrong_method(find_route(Method::del, path("/")), Method::del);
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(std::get<std::string>(r.body).find("uploads go to"), std::string::npos);
}

TEST(RoutePatterns, EachElementKind) {
  const auto matches = [](std::string_view pattern, std::string_view target) {
    return pattern_matches(pattern, path(target));
  };
  EXPECT_TRUE(matches("/", "/"));
  EXPECT_FALSE(matches("/", "/a"));
  EXPECT_TRUE(matches("/a/b", "/a/b"));
  EXPECT_FALSE(matches("/a/b", "/a/b/"));
  EXPECT_FALSE(matches("/a/b", "/a"));
  EXPECT_TRUE(matches("/a/", "/a/"));
  EXPECT_FALSE(matches("/a/", "/a"));
  EXPECT_TRUE(matches("/a/{x}", "/a/anything"));
  EXPECT_TRUE(matches("/a/{x}", "/a/"));  // one segment, empty included
  EXPECT_FALSE(matches("/a/{x}", "/a/b/c"));
  EXPECT_TRUE(matches("/f/{x}.metadata", "/f/a.whl.metadata"));
  EXPECT_FALSE(matches("/f/{x}.metadata", "/f/.metadata"));
  EXPECT_FALSE(matches("/f/{x}.metadata", "/f/a.whl"));
  EXPECT_TRUE(matches("/a/*", "/a"));
  EXPECT_TRUE(matches("/a/*", "/a/"));
  EXPECT_TRUE(matches("/a/*", "/a/b/c/d"));
  EXPECT_FALSE(matches("/a/*", "/b/a"));
  EXPECT_TRUE(matches("/{v...}/simple/", "/cu128/torch2.8/simple/"));
  EXPECT_TRUE(matches("/{v...}/simple/", "/cpu/simple/"));
  EXPECT_FALSE(matches("/{v...}/simple/", "/simple/"));  // one segment at least
  EXPECT_FALSE(matches("/{v...}/simple/", "/cpu/simple/x/"));
  // The view ends at the first "simple".
  EXPECT_FALSE(matches("/{v...}/simple/", "/cpu/simple/simple/"));
  EXPECT_TRUE(matches("/{v...}/simple/*", "/cpu/simple/simple/"));
  EXPECT_TRUE(matches("/{v...}", "/a/b"));
  EXPECT_FALSE(pattern_matches("no-slash", path("/no-slash")));
  // A request made by hand without segments is the root.
  EXPECT_TRUE(pattern_matches("/", {}));
}

TEST(RouteTable, AllowHeadersListMethodsInOneOrder) {
  EXPECT_EQ(allow_header(kGet), "GET, HEAD");
  EXPECT_EQ(allow_header(kDelete | kPost | kGet), "GET, HEAD, POST, DELETE");
  EXPECT_EQ(allow_header(kPut), "PUT");
  EXPECT_EQ(allow_header(0), "");
}

TEST(RouteTable, BodyPolicyOnTheHead) {
  const Route* read = lookup(Method::get, "/simple/").route;
  const Route* admin = lookup(Method::post, "/admin/yank").route;
  const Route* upload = lookup(Method::put, "/upload/a.whl").route;
  ASSERT_TRUE(read && admin && upload);
  EXPECT_FALSE(check_body_head(*read, false, std::nullopt));
  const auto no_body = check_body_head(*read, true, 10);
  ASSERT_TRUE(no_body);
  EXPECT_EQ(no_body->code, Errc::invalid);
  EXPECT_EQ(no_body->message, "this request takes no body");
  EXPECT_FALSE(check_body_head(*admin, true, kMaxSmallBody));
  EXPECT_FALSE(check_body_head(*admin, true, std::nullopt));  // chunked: the parser limits it
  const auto big = check_body_head(*admin, true, kMaxSmallBody + 1);
  ASSERT_TRUE(big);
  EXPECT_EQ(big->code, Errc::too_large);
  EXPECT_EQ(big->message, "request body of 65537 bytes exceeds the limit of 65536 bytes");
  // An upload's size is its head check's (plan_upload).
  EXPECT_FALSE(check_body_head(*upload, true, UINT64_MAX));
}

}  // namespace
}  // namespace wf::handlers
