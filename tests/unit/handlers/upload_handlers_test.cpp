// The upload routes through the route table: the head checks (plan_upload, plan_form) and the
// handlers that ingest the body once it has arrived, over a real catalog and blob store.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "handlers/handler_bed.hpp"
#include "wheelforge/auth/tokens.hpp"
#include "wheelforge/crypto/digest.hpp"

namespace wf::handlers {
namespace {

using testing::basic;
using testing::body_of;
using testing::HandlerBed;
using testing::make_request;
using testing::wheel_name;
using Json = nlohmann::json;

class UploadHandlers : public ::testing::Test {
 protected:
  UploadHandlers() : h("upload-handlers"), demo(h.wheel("demo-pkg", "1.0")) {}

  /// The fields twine sends with a wheel (of demo-pkg 1.0 by default).
  static testing::Headers twine_fields(std::string_view bytes, std::string project = "demo-pkg") {
    return {{":action", "file_upload"},   {"protocol_version", "1"},
            {"name", std::move(project)}, {"version", "1.0"},
            {"filetype", "bdist_wheel"},  {"sha256_digest", crypto::sha256_hex(bytes)}};
  }

  HandlerBed h;
  std::string demo;
};

TEST_F(UploadHandlers, PutStoresThenAnswersIdenticalAndConflict) {
  auto r = h.put(wheel_name("demo-pkg", "1.0"), demo, h.upload);
  ASSERT_EQ(r.status, 201) << body_of(r);
  const Json stored = Json::parse(body_of(r));
  EXPECT_EQ(stored["filename"], "demo_pkg-1.0-py3-none-any.whl");
  EXPECT_EQ(stored["project"], "demo-pkg");
  EXPECT_EQ(stored["sha256"], crypto::sha256_hex(demo));
  EXPECT_EQ(stored["size"], demo.size());
  EXPECT_EQ(h.last.upload_outcome, "stored");
  EXPECT_EQ(h.last.changed, Changed::project);
  EXPECT_EQ(h.last.changed_project, "demo-pkg");
  EXPECT_NE(h.last.note.find("upload stored demo_pkg-1.0-py3-none-any.whl sha256="),
            std::string::npos)
      << h.last.note;
  EXPECT_EQ(h.snapshot()->files_of("demo-pkg").size(), 1U);

  r = h.put(wheel_name("demo-pkg", "1.0"), demo, h.upload);
  EXPECT_EQ(r.status, 200) << body_of(r);
  EXPECT_EQ(h.last.upload_outcome, "identical");
  EXPECT_EQ(h.last.changed, Changed::nothing);

  // Another spelling of the name with other bytes: files are immutable.
  r = h.put("Demo.Pkg-1.0.0-py3-none-any.whl", h.wheel("Demo.Pkg", "1.0.0"), h.upload);
  EXPECT_EQ(r.status, 409) << body_of(r);
  EXPECT_EQ(body_of(r).rfind("File already exists", 0), 0U) << body_of(r);
  EXPECT_EQ(h.last.upload_outcome, "rejected");
  EXPECT_EQ(h.last.changed, Changed::nothing);
  EXPECT_NE(h.last.note.find("rejected: File already exists"), std::string::npos);
}

TEST_F(UploadHandlers, PutRefusalsFromTheHead) {
  const std::string name = wheel_name("demo-pkg", "1.0");
  auto r = h.respond(make_request(Method::put, "/upload/" + name));
  EXPECT_EQ(r.status, 401);
  EXPECT_FALSE(r.header("WWW-Authenticate").empty());
  EXPECT_EQ(h.put(name, demo, h.read).status, 403);
  EXPECT_EQ(h.put(name, demo, "wf_not_a_known_token").status, 401);
  // A token limited to another project.
  EXPECT_EQ(h.put(wheel_name("other", "1.0"), h.wheel("other", "1.0"), h.limited).status, 403);
  // Names: missing, with a slash, not a distribution.
  r = h.respond(make_request(Method::put, "/upload/", {{"authorization", basic(h.upload)}}));
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(body_of(r).find("missing file name"), std::string::npos);
  EXPECT_EQ(h.put("a/b-1.0-py3-none-any.whl", demo, h.upload).status, 400);
  r = h.put("demo.whl", demo, h.upload);
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(body_of(r).find("invalid file name"), std::string::npos);
  // A declared size above the limit, before any byte is read.
  const auto plan = plan_upload(
      make_request(Method::put, "/upload/" + name, {{"authorization", basic(h.upload)}}), 101, 100,
      *h.snapshot());
  ASSERT_FALSE(plan);
  EXPECT_EQ(plan.error().code, Errc::too_large);
  EXPECT_EQ(plan.error().message, "upload of 101 bytes exceeds the limit of 100 bytes");
  EXPECT_TRUE(h.snapshot()->files_of("demo-pkg").empty());
}

TEST_F(UploadHandlers, PutOfABrokenFileIsRejectedAndLeavesNothing) {
  auto r = h.put(wheel_name("demo-pkg", "1.0"), "not a zip", h.upload);
  EXPECT_EQ(r.status, 400) << body_of(r);
  EXPECT_EQ(h.last.upload_outcome, "rejected");
  EXPECT_TRUE(h.snapshot()->files_of("demo-pkg").empty());
}

TEST_F(UploadHandlers, ClaimedProjectsRefuseOtherUploaders) {
  ASSERT_EQ(h.put(wheel_name("demo-pkg", "1.0"), demo, h.upload).status, 201);
  // The limited token is made for demo-pkg by an admin: it may add to it.
  EXPECT_EQ(h.put(wheel_name("demo-pkg", "2.0"), h.wheel("demo-pkg", "2.0"), h.limited).status,
            201);
  catalog::TokenRecord other;
  const std::string token = "wf_other-uploader-token-for-the-claims-test-0000";
  other.hash = auth::hash_token(token);
  other.scope = catalog::Scope::upload;
  ASSERT_TRUE(h.bed.catalog->insert_token(other, wf::catalog::Actor{}));
  const auto r = h.put(wheel_name("demo-pkg", "3.0"), h.wheel("demo-pkg", "3.0"), token);
  EXPECT_EQ(r.status, 403);
  EXPECT_NE(body_of(r).find("claimed by another uploader"), std::string::npos) << body_of(r);
}

TEST_F(UploadHandlers, FormStoresAndARepeatIsAConflict) {
  auto r = h.post_form(twine_fields(demo), wheel_name("demo-pkg", "1.0"), demo, h.upload);
  ASSERT_EQ(r.status, 201) << body_of(r);
  EXPECT_EQ(Json::parse(body_of(r))["filename"], "demo_pkg-1.0-py3-none-any.whl");
  EXPECT_EQ(h.last.upload_outcome, "stored");
  EXPECT_EQ(h.last.changed, Changed::project);
  // twine, poetry and pdm expect a repeated upload to fail (--skip-existing reads the 409).
  r = h.post_form(twine_fields(demo), wheel_name("demo-pkg", "1.0"), demo, h.upload);
  EXPECT_EQ(r.status, 409);
  EXPECT_NE(body_of(r).find("File already exists: demo_pkg-1.0-py3-none-any.whl was uploaded "
                            "before (identical content)"),
            std::string::npos)
      << body_of(r);
  EXPECT_EQ(h.last.upload_outcome, "rejected");
}

TEST_F(UploadHandlers, FormRefusals) {
  const std::string name = wheel_name("demo-pkg", "1.0");
  // Credentials from the head.
  auto fields = twine_fields(demo);
  EXPECT_EQ(h.post_form(fields, name, demo, h.read).status, 403);
  EXPECT_EQ(h.post_form(fields, name, demo, "wf_nobody").status, 401);
  // A limited token learns the project only from the form: checked once it is read.
  auto r = h.post_form(twine_fields(h.wheel("other", "1.0"), "other"), wheel_name("other", "1.0"),
                       h.wheel("other", "1.0"), h.limited);
  EXPECT_EQ(r.status, 403) << body_of(r);
  // Every problem of the form together.
  fields = {{":action", "file_upload"}, {"sha256_digest", std::string(64, '0')}};
  r = h.post_form(fields, name, demo, h.upload);
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(body_of(r).find("missing filetype"), std::string::npos) << body_of(r);
  EXPECT_NE(body_of(r).find("sha256_digest"), std::string::npos) << body_of(r);
  EXPECT_EQ(h.last.upload_outcome, "rejected");
  // Registration is gone.
  fields = {{":action", "submit"}};
  EXPECT_EQ(h.post_form(fields, name, demo, h.upload).status, 410);
  // Not a form at all, from the head.
  r = h.respond(make_request(Method::post, "/legacy/",
                             {{"authorization", basic(h.upload)}, {"content-type", "text/plain"}}));
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(body_of(r).find("multipart/form-data"), std::string::npos) << body_of(r);
  EXPECT_TRUE(h.snapshot()->files_of("demo-pkg").empty());
}

TEST(PlanForm, TheFormMayCarryItsOverheadAboveTheFileLimit) {
  const Request req = make_request(Method::post, "/legacy/",
                                   {{"content-type", "multipart/form-data; boundary=xyz"}});
  auto plan = plan_form(req, 100 + kFormOverhead, 100);
  ASSERT_TRUE(plan);
  EXPECT_EQ(*plan, "xyz");
  plan = plan_form(req, 101 + kFormOverhead, 100);
  ASSERT_FALSE(plan);
  EXPECT_EQ(plan.error().code, Errc::too_large);
  EXPECT_EQ(plan.error().message, "upload of " + std::to_string(101 + kFormOverhead) +
                                      " bytes exceeds the limit of 100 bytes");
  EXPECT_TRUE(plan_form(req, std::nullopt, UINT64_MAX));  // chunked; no overflow
}

}  // namespace
}  // namespace wf::handlers
