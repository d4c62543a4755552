// GET /integrity/<project>/<version>/<filename>/provenance through the route table, over a
// snapshot and a blob store; and the URL the simple pages give for it.

#include <gtest/gtest.h>

#include "handlers/handler_bed.hpp"
#include "wheelforge/handlers/routes.hpp"

namespace wf::handlers {
namespace {

using testing::body_of;
using testing::Headers;

const std::string kWheel = "flash_attn-2.8.3+cu128torch2.8-cp312-cp312-linux_x86_64.whl";
const std::string kProvenanceSha(64, 'c');

core::FileRecord integrity_file(std::string filename, std::string version, char hash) {
  core::FileRecord f;
  f.id = hash;
  f.filename = std::move(filename);
  f.project = "flash-attn";
  f.version = std::move(version);
  f.sha256 = std::string(64, hash);
  f.size = 1000;
  f.metadata_sha256 = std::string(64, static_cast<char>(hash + 1));
  f.metadata_size = 50;
  f.tags = core::WheelTags{std::nullopt, "cp312", "cp312", "linux_x86_64", std::nullopt};
  if (const auto plus = f.version.find('+'); plus != std::string::npos) {
    f.hints = core::parse_local_label(std::string_view(f.version).substr(plus + 1));
  }
  return f;
}

class IntegrityHandlers : public ::testing::Test {
 protected:
  void SetUp() override {
    catalog::Contents c;
    c.generation = 4;
    c.projects.push_back(core::ProjectRecord{"flash-attn", "flash_attn", 1, {}});
    c.projects.push_back(core::ProjectRecord{"other", "other", 1, {}});
    core::FileRecord attested = integrity_file(kWheel, "2.8.3+cu128torch2.8", 'a');
    attested.provenance_sha256 = kProvenanceSha;
    attested.provenance_size = 700;
    c.files.push_back(attested);
    c.files.push_back(
        integrity_file("flash_attn-2.8.2-cp312-cp312-linux_x86_64.whl", "2.8.2", 'd'));
    core::FileRecord damaged = integrity_file("flash_attn-2.8.1-py3-none-any.whl", "2.8.1", 'f');
    damaged.provenance_sha256 = std::string(64, '1');
    damaged.provenance_size = 10;
    damaged.damaged = true;
    c.files.push_back(damaged);
    snap_ = snapshot::Snapshot::build(std::move(c));
    auto store = store::BlobStore::open(::testing::TempDir() + "/wf-integrity-test-store");
    ASSERT_TRUE(store);
    store_ = std::move(*store);
  }

  Response ask(std::string target, Headers headers = {}) {
    Environment env;
    env.services.store = store_.get();
    Context ctx(*snap_, env);
    return respond(testing::make_request(Method::get, std::move(target), std::move(headers)), ctx);
  }

  std::shared_ptr<const snapshot::Snapshot> snap_;
  std::unique_ptr<store::BlobStore> store_;
};

const std::string kUrl =
    "/integrity/flash-attn/2.8.3%2Bcu128torch2.8/"
    "flash_attn-2.8.3%2Bcu128torch2.8-cp312-cp312-linux_x86_64.whl/provenance";

TEST_F(IntegrityHandlers, ServesTheProvenanceBlobLikeMetadata) {
  const Response r = ask(kUrl);
  EXPECT_EQ(r.status, 200) << body_of(r);
  EXPECT_EQ(r.header("Content-Type"), "application/vnd.pypi.integrity.v1+json");
  EXPECT_EQ(r.header("ETag"), "\"" + kProvenanceSha + "\"");
  EXPECT_NE(r.header("Cache-Control").find("immutable"), std::string_view::npos);
  const auto* range = std::get_if<FileRange>(&r.body);
  ASSERT_NE(range, nullptr);
  EXPECT_EQ(range->path, store_->blob_path(kProvenanceSha));
  EXPECT_EQ(range->offset, 0U);
  EXPECT_EQ(range->length, 700U);

  const Response again = ask(kUrl, {{"if-none-match", "\"" + kProvenanceSha + "\""}});
  EXPECT_EQ(again.status, 304);
  EXPECT_EQ(body_of(again), "");
}

TEST_F(IntegrityHandlers, AnyNameSpellingAndEqualVersionFindTheFile) {
  for (const std::string& target :
       {"/integrity/Flash_Attn/2.8.3+cu128torch2.8/" + kWheel + "/provenance",
        "/integrity/flash.attn/2.8.3.0+CU128TORCH2.8/" + kWheel + "/provenance"}) {
    EXPECT_EQ(ask(target).status, 200) << target << ": " << body_of(ask(target));
  }
}

TEST_F(IntegrityHandlers, EachMissingPartIs404NamingIt) {
  const Response none = ask("/integrity/flash-attn/2.8.3/nope-1.0-py3-none-any.whl/provenance");
  EXPECT_EQ(none.status, 404);
  EXPECT_NE(body_of(none).find("no such file"), std::string::npos) << body_of(none);

  const Response project = ask("/integrity/other/2.8.3+cu128torch2.8/" + kWheel + "/provenance");
  EXPECT_EQ(project.status, 404);
  EXPECT_NE(
      body_of(project).find("the file belongs to project flash-attn version 2.8.3+cu128torch2.8"),
      std::string::npos)
      << body_of(project);

  const Response version = ask("/integrity/flash-attn/2.8.2/" + kWheel + "/provenance");
  EXPECT_EQ(version.status, 404);
  EXPECT_NE(
      body_of(version).find("the file belongs to project flash-attn version 2.8.3+cu128torch2.8"),
      std::string::npos)
      << body_of(version);
  EXPECT_EQ(ask("/integrity/..bad/2.8.3+cu128torch2.8/" + kWheel + "/provenance").status, 404);

  const Response unattested =
      ask("/integrity/flash-attn/2.8.2/flash_attn-2.8.2-cp312-cp312-linux_x86_64.whl/provenance");
  EXPECT_EQ(unattested.status, 404);
  EXPECT_NE(body_of(unattested)
                .find("flash_attn-2.8.2-cp312-cp312-linux_x86_64.whl has no provenance: it was "
                      "uploaded without attestations"),
            std::string::npos)
      << body_of(unattested);
}

TEST_F(IntegrityHandlers, DamagedFileAnswers503LikeItsOtherUrls) {
  const Response r =
      ask("/integrity/flash-attn/2.8.1/flash_attn-2.8.1-py3-none-any.whl/provenance");
  EXPECT_EQ(r.status, 503);
  EXPECT_NE(body_of(r).find("flash_attn-2.8.1-py3-none-any.whl is damaged"), std::string::npos)
      << body_of(r);
  EXPECT_TRUE(r.header("Retry-After").empty());
}

TEST_F(IntegrityHandlers, PrivateReadsNeedAReadToken) {
  Environment env;
  env.services.store = store_.get();
  env.private_reads = true;
  Context ctx(*snap_, env);
  EXPECT_EQ(respond(testing::make_request(Method::get, kUrl), ctx).status, 401);
}

// The URL in data-provenance (HTML) and "provenance" (JSON) leads here from /simple/ and from
// the view that lists the file.
TEST_F(IntegrityHandlers, PagesLinkTheRoute) {
  const std::string attribute = " data-provenance=\"" + kUrl + "\"";
  for (const std::string page : {"/simple/flash-attn/", "/cu128/torch2.8/simple/flash-attn/"}) {
    const std::string html = body_of(ask(page));
    EXPECT_NE(html.find(attribute), std::string::npos) << page << ": " << html;
    // Only the attested file has the attribute.
    EXPECT_EQ(html.find("data-provenance"), html.rfind("data-provenance")) << html;
    const std::string json =
        body_of(ask(page, {{"accept", "application/vnd.pypi.simple.v1+json"}}));
    EXPECT_NE(json.find(",\"provenance\":\"" + kUrl + "\""), std::string::npos) << json;
  }
  EXPECT_EQ(ask(kUrl).status, 200);
}

}  // namespace
}  // namespace wf::handlers
