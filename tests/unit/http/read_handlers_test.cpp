#include "http/read_handlers.hpp"

#include <gtest/gtest.h>

#include "http/upload_handler.hpp"
#include "wheelforge/auth/tokens.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::http {
namespace {

Request get(std::string target, std::vector<std::pair<std::string, std::string>> headers = {}) {
  Request r;
  r.target = target;
  auto parsed = parse_target(target);
  EXPECT_TRUE(parsed);
  r.segments = parsed->first;
  r.query = parsed->second;
  r.headers = std::move(headers);
  return r;
}

std::string body_of(const Response& r) {
  if (const auto* s = std::get_if<std::string>(&r.body)) return *s;
  if (const auto* p = std::get_if<std::shared_ptr<const std::string>>(&r.body)) return **p;
  return "<file>";
}

class ReadHandlers : public ::testing::Test {
 protected:
  void SetUp() override {
    catalog::Contents c;
    c.generation = 7;
    c.projects.push_back(core::ProjectRecord{"flash-attn", "flash_attn", 1, {}});
    core::FileRecord f;
    f.filename = "flash_attn-2.8.3+cu128torch2.8-cp312-cp312-linux_x86_64.whl";
    f.project = "flash-attn";
    f.version = "2.8.3+cu128torch2.8";
    f.sha256 = std::string(64, 'a');
    f.size = 1000;
    f.metadata_sha256 = std::string(64, 'b');
    f.metadata_size = 50;
    f.tags = core::WheelTags{std::nullopt, "cp312", "cp312", "linux_x86_64"};
    c.files.push_back(f);
    catalog::TokenRecord t;
    t.hash = auth::hash_token("up");
    t.scope = catalog::Scope::upload;
    c.tokens.push_back(t);
    t.hash = auth::hash_token("rd");
    t.scope = catalog::Scope::read;
    c.tokens.push_back(t);
    snap_ = snapshot::Snapshot::build(std::move(c));
    auto store = store::BlobStore::open(::testing::TempDir() + "/wf-http-test-store");
    ASSERT_TRUE(store);
    store_ = std::move(*store);
  }
  Response read(const Request& r) { return handle_read(r, *snap_, *store_); }

  std::shared_ptr<const snapshot::Snapshot> snap_;
  std::unique_ptr<store::BlobStore> store_;
};

TEST_F(ReadHandlers, RedirectsToNormalizedNames) {
  EXPECT_EQ(read(get("/simple")).header("Location"), "/simple/");
  auto r = read(get("/simple/Flash_Attn/"));
  EXPECT_EQ(r.status, 301);
  EXPECT_EQ(r.header("Location"), "/simple/flash-attn/");
  r = read(get("/simple/flash-attn"));
  EXPECT_EQ(r.status, 301);
  EXPECT_EQ(r.header("Location"), "/simple/flash-attn/");
}

TEST_F(ReadHandlers, UnknownProjectIs404NeverARedirect) {
  const auto r = read(get("/simple/no-such-thing/"));
  EXPECT_EQ(r.status, 404);
  EXPECT_TRUE(r.header("Location").empty());
}

TEST_F(ReadHandlers, NegotiatesJsonAndHtml) {
  auto json = read(get("/simple/flash-attn/", {{"accept", "application/vnd.pypi.simple.v1+json"}}));
  EXPECT_EQ(json.status, 200);
  EXPECT_EQ(json.header("Content-Type"), "application/vnd.pypi.simple.v1+json");
  EXPECT_EQ(json.header("Vary"), "Accept, Accept-Encoding");
  EXPECT_NE(body_of(json).find("\"api-version\":\"1.1\""), std::string::npos);
  auto html = read(get("/simple/flash-attn/"));
  EXPECT_EQ(html.header("Content-Type"), "text/html; charset=utf-8");
  EXPECT_NE(body_of(html).find("%2Bcu128torch2.8"), std::string::npos);
  auto by_query = read(get("/simple/flash-attn/?format=application/vnd.pypi.simple.v1+json"));
  EXPECT_EQ(by_query.header("Content-Type"), "application/vnd.pypi.simple.v1+json");
  EXPECT_EQ(read(get("/simple/", {{"accept", "application/json"}})).status, 406);
}

TEST_F(ReadHandlers, EtagAnd304) {
  auto first = read(get("/simple/"));
  const std::string etag(first.header("ETag"));
  ASSERT_FALSE(etag.empty());
  auto second = read(get("/simple/", {{"if-none-match", etag}}));
  EXPECT_EQ(second.status, 304);
  auto gz = read(get("/simple/", {{"accept-encoding", "gzip, br"}}));
  EXPECT_EQ(gz.header("Content-Encoding"), "gzip");
  EXPECT_NE(gz.header("ETag"), etag);
}

TEST_F(ReadHandlers, FilesAndMetadata) {
  const std::string url = "/files/" + std::string(64, 'a') +
                          "/flash_attn-2.8.3%2Bcu128torch2.8-cp312-cp312-linux_x86_64.whl";
  auto r = read(get(url, {{"range", "bytes=10-19"}, {"accept-encoding", "gzip"}}));
  EXPECT_EQ(r.status, 206);
  EXPECT_EQ(r.header("Content-Range"), "bytes 10-19/1000");
  EXPECT_TRUE(r.header("Content-Encoding").empty());
  EXPECT_NE(r.header("Cache-Control").find("immutable"), std::string_view::npos);
  const auto& range = std::get<FileRange>(r.body);
  EXPECT_EQ(range.offset, 10U);
  EXPECT_EQ(range.length, 10U);
  EXPECT_EQ(range.path, store_->blob_path(std::string(64, 'a')));

  auto meta = read(get(url + ".metadata"));
  EXPECT_EQ(meta.status, 200);
  EXPECT_EQ(std::get<FileRange>(meta.body).path, store_->blob_path(std::string(64, 'b')));
  EXPECT_EQ(std::get<FileRange>(meta.body).length, 50U);

  EXPECT_EQ(read(get(url, {{"range", "bytes=1000-"}})).status, 416);
  EXPECT_EQ(read(get("/files/" + std::string(64, 'c') +
                     "/flash_attn-2.8.3%2Bcu128torch2.8-cp312-cp312-linux_x86_64.whl"))
                .status,
            404);
}

TEST(Ranges, Parse) {
  auto r = parse_range("bytes=0-9", 100);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->offset, 0U);
  EXPECT_EQ(r->length, 10U);
  r = parse_range("bytes=-10", 100);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->offset, 90U);
  r = parse_range("bytes=95-200", 100);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->length, 5U);
  r = parse_range("bytes=100-", 100);
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->satisfiable);
  EXPECT_FALSE(parse_range("bytes=0-1,5-6", 100));
  EXPECT_FALSE(parse_range("items=0-1", 100));
  EXPECT_FALSE(parse_range("bytes=5-1", 100));
  EXPECT_FALSE(parse_range("bytes=x-1", 100));
}

TEST(Etags, Match) {
  EXPECT_TRUE(etag_matches("\"a\", \"b\"", "\"b\""));
  EXPECT_TRUE(etag_matches("W/\"b\"", "\"b\""));
  EXPECT_TRUE(etag_matches("*", "\"b\""));
  EXPECT_FALSE(etag_matches("\"c\"", "\"b\""));
  EXPECT_FALSE(etag_matches("", "\"b\""));
}

TEST(Targets, Parse) {
  auto t = parse_target("/files/x/a%2Bb.whl?format=json");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->first.back(), "a+b.whl");
  EXPECT_EQ(t->second, "format=json");
  EXPECT_FALSE(parse_target("/bad%zz"));
  EXPECT_FALSE(parse_target("/nul%00"));
  EXPECT_FALSE(parse_target("http://host/"));
}

TEST_F(ReadHandlers, UploadPlanChecksCredentialsNameAndSize) {
  auto req = [](std::string target, std::string auth) {
    Request r = get(std::move(target));
    if (!auth.empty()) r.headers.emplace_back("authorization", std::move(auth));
    return r;
  };
  const std::string up = "Basic " + base64_encode("__token__:up");
  const std::string rd = "Basic " + base64_encode("__token__:rd");
  EXPECT_TRUE(plan_upload(req("/upload/demo-1.0-py3-none-any.whl", up), 10, 100, *snap_));
  EXPECT_EQ(plan_upload(req("/upload/demo-1.0-py3-none-any.whl", ""), 10, 100, *snap_).error().code,
            Errc::unauthorized);
  EXPECT_EQ(plan_upload(req("/upload/demo-1.0-py3-none-any.whl", rd), 10, 100, *snap_).error().code,
            Errc::forbidden);
  EXPECT_EQ(
      plan_upload(req("/upload/demo-1.0-py3-none-any.whl", up), 101, 100, *snap_).error().code,
      Errc::too_large);
  EXPECT_EQ(plan_upload(req("/upload/demo.whl", up), 10, 100, *snap_).error().code, Errc::invalid);
  EXPECT_EQ(plan_upload(req("/upload/", up), 10, 100, *snap_).error().code, Errc::invalid);
  EXPECT_EQ(
      plan_upload(req("/upload/a%2Fb-1.0-py3-none-any.whl", up), 10, 100, *snap_).error().code,
      Errc::invalid);
}

}  // namespace
}  // namespace wf::http
