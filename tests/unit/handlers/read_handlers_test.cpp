#include <gtest/gtest.h>

#include "handlers/handler_bed.hpp"
#include "handlers/read.hpp"
#include "wheelforge/auth/tokens.hpp"
#include "wheelforge/handlers/routes.hpp"
#include "wheelforge/handlers/upload.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::handlers {
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

/// The answer to a read, through the route table, over a snapshot and a blob store.
Response handle_read(const Request& req, const snapshot::Snapshot& snap, store::BlobStore& store) {
  Environment env;
  env.services.store = &store;
  Context ctx(snap, env);
  return respond(req, ctx);
}

using testing::body_of;

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
    f.tags = core::WheelTags{std::nullopt, "cp312", "cp312", "linux_x86_64", std::nullopt};
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

TEST_F(ReadHandlers, VariantsJsonBesideTheProjectPage) {
  // The fixture's release has no variant wheel.
  auto none = read(get("/simple/flash-attn/flash_attn-2.8.3+cu128torch2.8-variants.json"));
  EXPECT_EQ(none.status, 404);
  EXPECT_NE(body_of(none).find("no release of that name has a variant wheel"), std::string::npos);

  catalog::Contents c;
  c.generation = 8;
  c.projects.push_back(core::ProjectRecord{"demo", "demo", 1, {}});
  core::FileRecord f;
  f.filename = "demo-1.0-cp312-cp312-linux_x86_64-cu128.whl";
  f.project = "demo";
  f.version = "1.0";
  f.sha256 = std::string(64, 'c');
  f.tags = core::WheelTags{std::nullopt, "cp312", "cp312", "linux_x86_64", "cu128"};
  core::WheelVariant v;
  v.label = "cu128";
  v.schema = "https://variants-schema.wheelnext.dev/v0.0.3.json";
  v.priorities = R"({"namespace":["nvidia"]})";
  v.properties["nvidia"]["cuda_version_lower_bound"] = {"12.8"};
  f.variant = v;
  c.files.push_back(f);
  snap_ = snapshot::Snapshot::build(std::move(c));

  for (const char* target :
       {"/simple/demo/demo-1.0-variants.json", "/simple/Demo/demo-1.0-variants.json",
        "/cu128/torch2.8/simple/demo/demo-1.0-variants.json"}) {
    auto r = read(get(target, {{"accept-encoding", "gzip"}}));
    EXPECT_EQ(r.status, 200) << target;
    EXPECT_EQ(r.header("Content-Type"), "application/json") << target;
    EXPECT_EQ(r.header("Content-Encoding"), "") << target;  // the hashed bytes, as they are
    EXPECT_NE(body_of(r).find("\"cuda_version_lower_bound\""), std::string::npos) << target;
    auto again = read(get(target, {{"if-none-match", std::string(r.header("ETag"))}}));
    EXPECT_EQ(again.status, 304) << target;
  }
  EXPECT_EQ(read(get("/simple/demo/demo-2.0-variants.json")).status, 404);
  EXPECT_EQ(read(get("/simple/nope/nope-1.0-variants.json")).status, 404);
  EXPECT_EQ(read(get("/cu999x/simple/demo/demo-1.0-variants.json")).status, 404);
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

TEST_F(ReadHandlers, DamagedFilesAnswer503NamingTheFile) {
  catalog::Contents c;
  c.generation = 8;
  c.projects.push_back(core::ProjectRecord{"demo", "demo", 1, {}});
  core::FileRecord f;
  f.filename = "demo-1.0-py3-none-any.whl";
  f.project = "demo";
  f.version = "1.0";
  f.sha256 = std::string(64, 'a');
  f.size = 10;
  f.metadata_sha256 = std::string(64, 'b');
  f.metadata_size = 5;
  f.tags = core::WheelTags{std::nullopt, "py3", "none", "any", std::nullopt};
  f.damaged = true;
  c.files.push_back(f);
  auto snap = snapshot::Snapshot::build(std::move(c));
  const std::string url = "/files/" + std::string(64, 'a') + "/demo-1.0-py3-none-any.whl";
  for (const auto& target : {url, url + ".metadata"}) {
    auto r = handle_read(get(target), *snap, *store_);
    EXPECT_EQ(r.status, 503) << target;
    const std::string body = body_of(r);
    EXPECT_NE(body.find("demo-1.0-py3-none-any.whl is damaged"), std::string::npos) << body;
    EXPECT_NE(body.find("restore it from a backup"), std::string::npos) << body;
    EXPECT_TRUE(r.header("Retry-After").empty());
  }
  // Another sha256 under the same name is no such file.
  EXPECT_EQ(handle_read(get("/files/" + std::string(64, 'c') + "/demo-1.0-py3-none-any.whl"), *snap,
                        *store_)
                .status,
            404);
  auto listing = handle_read(
      get("/simple/demo/", {{"accept", "application/vnd.pypi.simple.v1+json"}}), *snap, *store_);
  EXPECT_EQ(listing.status, 200);
  EXPECT_EQ(body_of(listing).find("demo-1.0"), std::string::npos);
}

TEST(ErrorResponse, StorageFaultsAreTheServersAndSaySo) {
  auto io = error_response(make_error(Errc::io, "fsync /d/tmp/x: Input/output error"));
  EXPECT_EQ(io.status, 500);
  EXPECT_EQ(body_of(io),
            "server storage error (not a problem with the request): fsync /d/tmp/x: Input/output "
            "error; try again later or tell the index's administrator\n");
  EXPECT_EQ(io.reason.substr(0, 20), "server storage error");

  auto ro = error_response(make_error(Errc::unavailable, "the data directory /d is not writable"));
  EXPECT_EQ(ro.status, 503);
  EXPECT_EQ(body_of(ro), "the data directory /d is not writable\n");
  EXPECT_TRUE(ro.header("Retry-After").empty());

  auto full = error_response(make_error(Errc::storage_full, "write: No space left on device"));
  EXPECT_EQ(full.status, 507);
  EXPECT_EQ(body_of(full), "write: No space left on device\n");

  // A bug tells the client nothing about the server.
  auto bug = error_response(make_error(Errc::internal, "secret detail"));
  EXPECT_EQ(bug.status, 500);
  EXPECT_EQ(body_of(bug), "internal server error\n");
}

TEST(ErrorResponse, EveryStatusComesFromTheErrorCode) {
  const std::pair<Errc, int> expected[] = {
      {Errc::invalid, 400},
      {Errc::unauthorized, 401},
      {Errc::forbidden, 403},
      {Errc::not_found, 404},
      {Errc::method_not_allowed, 405},
      {Errc::not_acceptable, 406},
      {Errc::too_slow, 408},
      {Errc::conflict, 409},
      {Errc::gone, 410},
      {Errc::too_large, 413},
      {Errc::uri_too_long, 414},
      {Errc::range_not_satisfiable, 416},
      {Errc::header_too_large, 431},
      {Errc::io, 500},
      {Errc::internal, 500},
      {Errc::unavailable, 503},
      {Errc::storage_full, 507},
  };
  for (const auto& [code, status] : expected) {
    EXPECT_EQ(status_for(code), status);
    const auto r = error_response(make_error(code, "why"));
    EXPECT_EQ(r.status, status);
  }
}

TEST(ErrorResponse, MethodNotAllowedNamesTheMethods) {
  const auto r = method_not_allowed("GET, HEAD");
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.header("Allow"), "GET, HEAD");
  EXPECT_EQ(body_of(r), "method not allowed: this address answers GET, HEAD\n");
}

TEST(ErrorResponse, OneWordingForBodiesOverTheirLimit) {
  EXPECT_EQ(body_too_large("upload", 2000, 1000).message,
            "upload of 2000 bytes exceeds the limit of 1000 bytes");
  EXPECT_EQ(body_too_large("request body", std::nullopt, 65536).message,
            "request body exceeds the limit of 65536 bytes");
  EXPECT_EQ(body_too_large("upload", 1, 0).code, Errc::too_large);
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

// /api/resolve over a project with builds for a few torch/CUDA cells.
class Resolve : public ::testing::Test {
 protected:
  static core::FileRecord wheel(std::int64_t id, const std::string& version,
                                const std::string& python, bool yanked = false) {
    core::FileRecord f;
    f.id = id;
    f.project = "flash-attn";
    f.version = version;
    f.filename = "flash_attn-" + version + "-" + python + "-" + python + "-linux_x86_64.whl";
    f.sha256 = std::string(63, 'a') + static_cast<char>('0' + id);
    f.size = 100;
    f.tags = core::WheelTags{std::nullopt, python, python, "linux_x86_64", std::nullopt};
    if (const auto plus = version.find('+'); plus != std::string::npos) {
      f.hints = core::parse_local_label(version.substr(plus + 1));
    }
    if (yanked) f.yanked = "broken";
    return f;
  }
  void SetUp() override {
    catalog::Contents c;
    c.generation = 3;
    c.projects.push_back(core::ProjectRecord{"flash-attn", "flash_attn", 1, {}});
    c.projects.push_back(core::ProjectRecord{"sdist-only", "sdist-only", 1, {}});
    c.files.push_back(wheel(1, "2.8.2+cu128torch2.9", "cp312"));
    c.files.push_back(wheel(2, "2.8.3+cu128torch2.9", "cp312"));
    c.files.push_back(wheel(3, "2.8.3+cu130torch2.9", "cp312"));
    c.files.push_back(wheel(4, "2.8.3+cu126torch2.8", "cp311"));
    c.files.push_back(wheel(5, "2.8.4+cu128torch2.9", "cp312", true));
    core::FileRecord sdist;
    sdist.id = 6;
    sdist.project = "sdist-only";
    sdist.version = "1.0";
    sdist.kind = core::DistKind::sdist;
    sdist.filename = "sdist_only-1.0.tar.gz";
    sdist.sha256 = std::string(64, 'e');
    c.files.push_back(sdist);
    snap_ = snapshot::Snapshot::build(std::move(c));
    auto store = store::BlobStore::open(::testing::TempDir() + "/wf-http-resolve-store");
    ASSERT_TRUE(store);
    store_ = std::move(*store);
  }
  Response resolve(const std::string& query) {
    return handle_read(get("/api/resolve?" + query, {{"host", "idx:8080"}}), *snap_, *store_);
  }
  static bool has(const Response& r, std::string_view text) {
    return body_of(r).find(text) != std::string::npos;
  }

  std::shared_ptr<const snapshot::Snapshot> snap_;
  std::unique_ptr<store::BlobStore> store_;
};

TEST_F(Resolve, CudaValueSelectsTheViewAndThePipLineIsPinned) {
  const auto r = resolve("torch=2.9.0&cuda=12.8&project=Flash_Attn");
  EXPECT_EQ(r.status, 200) << body_of(r);
  EXPECT_EQ(r.header("Content-Type"), "application/json");
  EXPECT_TRUE(has(r, R"("view":"/cu128/torch2.9/simple/")")) << body_of(r);
  EXPECT_TRUE(has(r, R"("backend_source":"cuda")"));
  // 2.8.4 is yanked: the newest usable version is pinned.
  EXPECT_TRUE(has(r, R"("version":"2.8.3")")) << body_of(r);
  EXPECT_TRUE(has(
      r,
      R"("pip":"pip install --extra-index-url http://idx:8080/cu128/torch2.9/simple/ --only-binary flash-attn flash-attn==2.8.3")"))
      << body_of(r);
  // Without cuda= the same PyPI torch would have been served the series-only view before.
  const auto table = resolve("torch=2.9.0&project=flash-attn");
  EXPECT_EQ(table.status, 200);
  EXPECT_TRUE(has(table, R"("view":"/cu128/torch2.9/simple/")")) << body_of(table);
  EXPECT_TRUE(has(table, R"("backend_source":"pypi-default")"));
  EXPECT_TRUE(has(table, "assumed CUDA 12.8"));
  const auto cu130 = resolve("torch=2.9.0&cuda=13.0&project=flash-attn");
  EXPECT_TRUE(has(cu130, R"("view":"/cu130/torch2.9/simple/")"));
  EXPECT_TRUE(has(cu130, "flash-attn==2.8.3"));
}

TEST_F(Resolve, LabelAndNoneValues) {
  EXPECT_TRUE(has(resolve("torch=2.8.0%2Bcu126&project=flash-attn"),
                  R"("view":"/cu126/torch2.8/simple/")"));
  EXPECT_TRUE(
      has(resolve("torch=2.8.0+cu126&cuda=12.6&hip=None"), R"("view":"/cu126/torch2.8/simple/")"));
  EXPECT_TRUE(has(resolve("torch=2.9.0&cuda=None&hip=None"), R"("view":"/cpu/torch2.9/simple/")"));
  EXPECT_TRUE(has(resolve("torch=2.9.0&cuda=&rocm="), R"("view":"/cpu/torch2.9/simple/")"));
  EXPECT_TRUE(has(resolve("torch=2.9.0&rocm=6.4.43482-0f2d60242"),
                  R"("view":"/rocm6.4/torch2.9/simple/")"));
  // Without a project the line has placeholders.
  EXPECT_TRUE(has(resolve("torch=2.9.0&cuda=12.8"), "--only-binary PROJECT PROJECT==VERSION"));
  // An empty abi= is "not chosen", as a form sends it.
  EXPECT_EQ(resolve("torch=2.9.0&cuda=12.8&abi=").status, 200);
}

TEST_F(Resolve, BadAndContradictingValuesAre400Json) {
  for (const std::string query :
       {"cuda=12.8", "torch=banana", "torch=2.9.0&cuda=twelve", "torch=2.9.0&abi=maybe",
        "torch=2.8.0%2Bcu128&cuda=12.6", "torch=2.9.0&cuda=12.8&hip=6.4",
        "torch=2.9.0&hip=6.4&rocm=6.3", "torch=2.9.0&project=..bad"}) {
    const auto r = resolve(query);
    EXPECT_EQ(r.status, 400) << query << ": " << body_of(r);
    EXPECT_EQ(r.header("Content-Type"), "application/json") << query;
    EXPECT_TRUE(has(r, R"({"error":")")) << query << ": " << body_of(r);
  }
  const auto both = resolve("torch=2.8.0%2Bcu128&cuda=12.6");
  EXPECT_TRUE(has(both, "cuda=12.6")) << body_of(both);
  EXPECT_TRUE(has(both, "2.8.0+cu128")) << body_of(both);
}

TEST_F(Resolve, UnknownProjectIs404) {
  const auto r = resolve("torch=2.9.0&cuda=12.8&project=no-such-thing");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.header("Content-Type"), "application/json");
  EXPECT_TRUE(has(r, "no such project: no-such-thing")) << body_of(r);
  EXPECT_TRUE(r.header("Location").empty());
}

TEST_F(Resolve, NoBuildIs404WithTheNearestBuilds) {
  const auto r = resolve("torch=2.9.0&cuda=12.6&project=flash-attn");
  EXPECT_EQ(r.status, 404) << body_of(r);
  EXPECT_EQ(r.header("Content-Type"), "application/json");
  const std::string body = body_of(r);
  EXPECT_TRUE(has(r, "no build of flash-attn for cu126/torch2.9")) << body;
  EXPECT_TRUE(has(r, R"("view":"/cu126/torch2.9/simple/")")) << body;
  // torch 2.9 builds for CUDA 12.8 first (same major), then 13.0, then the other series.
  const auto cu128 = body.find(R"("view":"/cu128/torch2.9/simple/")");
  const auto cu130 = body.find(R"("view":"/cu130/torch2.9/simple/")");
  const auto t28 = body.find(R"("view":"/cu126/torch2.8/simple/")");
  ASSERT_NE(cu128, std::string::npos) << body;
  ASSERT_NE(cu130, std::string::npos) << body;
  ASSERT_NE(t28, std::string::npos) << body;
  EXPECT_LT(cu128, cu130);
  EXPECT_LT(cu130, t28);
  // Yanked builds are not offered; versions newest first.
  EXPECT_TRUE(has(r, R"("versions":["2.8.3","2.8.2"])")) << body;
  EXPECT_FALSE(has(r, "2.8.4")) << body;
  EXPECT_FALSE(has(r, R"("pip")")) << body;
  // A project with no wheel at all says so.
  const auto sdist = resolve("torch=2.9.0&cuda=12.8&project=sdist-only");
  EXPECT_EQ(sdist.status, 404);
  EXPECT_TRUE(has(sdist, "sdist-only has no wheel")) << body_of(sdist);
  EXPECT_TRUE(has(sdist, R"("nearest":[])")) << body_of(sdist);
}

TEST(Query, PresentEmptyAndAbsentParameters) {
  Request r = get("/api/resolve?cuda=&hip&torch=2.9.0%2Bcu128");
  EXPECT_EQ(r.find_query_param("cuda"), std::optional<std::string>(""));
  EXPECT_EQ(r.find_query_param("hip"), std::optional<std::string>(""));
  EXPECT_EQ(r.find_query_param("torch"), std::optional<std::string>("2.9.0+cu128"));
  EXPECT_FALSE(r.find_query_param("abi"));
  EXPECT_EQ(r.query_param("abi"), "");
}

}  // namespace
}  // namespace wf::handlers
