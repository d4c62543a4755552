// The web UI's trusted publishers page, through the route table: the admin check, adding a
// publisher for a configured issuer (claims one per line), the refusals shown with the form
// as it was, removal.

#include <gtest/gtest.h>

#include "handlers/handler_bed.hpp"
#include "wheelforge/handlers/fetcher.hpp"
#include "wheelforge/handlers/oidc.hpp"

namespace wf::handlers {
namespace {

using testing::body_of;
using testing::HandlerBed;

// The page never fetches anything: adding a publisher reads only the configured issuers.
class NoFetcher final : public Fetcher {
 public:
  Result<FetchResponse> fetch(const FetchRequest& /*req*/) override {
    ADD_FAILURE() << "the publishers page fetched something";
    return make_error(Errc::unavailable, "no fetching here");
  }
};

class UiPublishers : public ::testing::Test {
 protected:
  UiPublishers() : h("ui-publishers"), oidc({github()}, fetcher) {}

  static auth::oidc::IssuerConfig github() {
    auth::oidc::IssuerConfig issuer;
    issuer.name = "github";
    issuer.url = "https://token.actions.githubusercontent.com";
    return issuer;
  }

  Response post(const std::string& target, std::string form, const std::string& token,
                bool with_form_token = true) {
    return h.ui_post(target, std::move(form), token, with_form_token);
  }
  Response get(const std::string& target, const std::string& token = {}) {
    return h.ui_get(target, token);
  }

  HandlerBed h;
  NoFetcher fetcher;
  OidcIssuers oidc;
};

TEST_F(UiPublishers, PagesNeedAnAdmin) {
  h.env.oidc = &oidc;
  for (const std::string target : {"/publishers", "/publishers/", "/publishers/x"}) {
    auto r = get(target);
    EXPECT_EQ(r.status, 303) << target;
    EXPECT_EQ(r.header("Location").rfind("/login?next=", 0), 0U) << target;
    EXPECT_EQ(get(target, h.upload).status, 403) << target;
  }
  EXPECT_EQ(get("/publishers", h.admin).header("Location"), "/publishers/");
  EXPECT_EQ(
      post("/publishers/", "project=demo-pkg&issuer=github&claims=repository%3Do%2Fr", h.upload)
          .status,
      403);
  EXPECT_EQ(post("/publishers/1/remove", "", h.admin, false).status, 403);
  EXPECT_NE(body_of(get("/", h.admin)).find("href=\"/publishers/\""), std::string::npos);
  EXPECT_EQ(body_of(get("/", h.upload)).find("href=\"/publishers/\""), std::string::npos);
}

TEST_F(UiPublishers, AddListAndRemove) {
  h.env.oidc = &oidc;
  auto r = post("/publishers/",
                "project=Demo_Pkg&issuer=github&description=release+%3Cb%3E&claims="
                "repository%3Dorg%2Fdemo%0D%0A%0D%0Aworkflow_ref%3Dorg%2Fdemo%2F.github%2Fworkflows"
                "%2Frelease.yml%40refs%2Ftags%2Fv1%0A",
                h.admin);
  ASSERT_EQ(r.status, 303) << body_of(r);
  EXPECT_EQ(r.header("Location"), "/publishers/?added=1");
  auto stored = h.bed.catalog->publishers();
  ASSERT_TRUE(stored && stored->size() == 1U);
  const auto& p = stored->front();
  EXPECT_EQ(p.project, "demo-pkg");
  EXPECT_EQ(p.issuer, "github");
  EXPECT_EQ(p.claims,
            (std::vector<std::pair<std::string, std::string>>{
                {"repository", "org/demo"},
                {"workflow_ref", "org/demo/.github/workflows/release.yml@refs/tags/v1"}}));

  r = get("/publishers/?added=1", h.admin);
  ASSERT_EQ(r.status, 200);
  const std::string page = body_of(r);
  EXPECT_NE(page.find("Publisher 1 was added."), std::string::npos) << page;
  EXPECT_NE(page.find("<code>repository=org/demo</code>"), std::string::npos) << page;
  EXPECT_NE(page.find("release &lt;b&gt;"), std::string::npos);  // escaped
  EXPECT_EQ(page.find("release <b>"), std::string::npos);
  EXPECT_NE(page.find("github (https://token.actions.githubusercontent.com)"), std::string::npos);

  r = post("/publishers/1/remove", "", h.admin);
  ASSERT_EQ(r.status, 303) << body_of(r);
  EXPECT_EQ(r.header("Location"), "/publishers/?removed=1");
  EXPECT_TRUE(h.bed.catalog->publishers()->empty());
  r = post("/publishers/1/remove", "", h.admin);
  EXPECT_EQ(r.status, 404) << body_of(r);
  EXPECT_NE(body_of(r).find("Could not remove publisher 1"), std::string::npos);
}

TEST_F(UiPublishers, ARefusedFormIsShownAgainWithTheReason) {
  h.env.oidc = &oidc;
  auto r =
      post("/publishers/", "project=demo-pkg&issuer=gitlab&claims=iss%3Dx&description=d", h.admin);
  EXPECT_EQ(r.status, 400);
  const std::string page = body_of(r);
  EXPECT_NE(page.find("The publisher was not added: "), std::string::npos) << page;
  EXPECT_NE(page.find("gitlab"), std::string::npos) << page;
  EXPECT_NE(page.find("iss=x</textarea>"), std::string::npos) << page;
  EXPECT_TRUE(h.bed.catalog->publishers()->empty());
}

TEST_F(UiPublishers, WithoutAnIssuerThereIsNothingToAdd) {
  auto r = get("/publishers/", h.admin);
  ASSERT_EQ(r.status, 200);
  EXPECT_NE(body_of(r).find("No OIDC issuer is configured"), std::string::npos);
  EXPECT_EQ(body_of(r).find("id=\"publisher-form\""), std::string::npos);
  r = post("/publishers/", "project=demo-pkg&issuer=github&claims=repository%3Do%2Fr", h.admin);
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(body_of(r).find("no [[oidc_issuer]] is configured"), std::string::npos);
}

}  // namespace
}  // namespace wf::handlers
