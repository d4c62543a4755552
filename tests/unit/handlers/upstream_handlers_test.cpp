// Merged /simple/<name>/ pages over upstream indexes (docs/upstreams.md), through the route
// table with a fake Fetcher: the ownership guard, the cooldown, the cache's TTL, revalidation,
// disk copy and stale answers, and the refusals.

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "handler_bed.hpp"
#include "handlers/handlers.hpp"
#include "wheelforge/crypto/digest.hpp"
#include "wheelforge/handlers/upstreams.hpp"

namespace wf::handlers {
namespace {

using testing::body_of;
using testing::HandlerBed;
using testing::make_request;
using Json = nlohmann::json;

const std::string kSha(64, 'a');
const std::string kSha2(64, 'b');
const std::string kMetaSha(64, 'c');
constexpr Micros kDay = 86'400'000'000;

/// An upstream on a table: URL -> answer; counts and records what is asked.
class FakeFetcher : public Fetcher {
 public:
  struct Answer {
    int status = 200;
    std::string content_type = "text/html";
    std::string body;
    std::vector<std::pair<std::string, std::string>> headers;
  };
  std::map<std::string, Answer> answers;
  bool down = false;
  std::vector<FetchRequest> asked;

  Result<FetchResponse> fetch(const FetchRequest& req) override {
    asked.push_back(req);
    if (down) return make_error(Errc::unavailable, "upstream.example: connection refused");
    const auto it = answers.find(req.url);
    FetchResponse r;
    r.url = req.url;
    if (it == answers.end()) {
      r.status = 404;
      return r;
    }
    const Answer& a = it->second;
    // A conditional request for the same validator gets 304.
    for (const auto& [name, value] : req.headers) {
      for (const auto& [hn, hv] : a.headers) {
        if (name == "If-None-Match" && hn == "etag" && hv == value) {
          r.status = 304;
          return r;
        }
      }
    }
    r.status = a.status;
    r.headers = a.headers;
    r.headers.emplace_back("content-type", a.content_type);
    r.body_bytes = a.body.size();
    if (req.on_head) {
      if (auto st = req.on_head(r.status, r.headers); !st) return st.error();
    }
    if (req.sink) {
      // In two pieces, as a network would.
      const std::string_view body = a.body;
      for (const auto piece : {body.substr(0, body.size() / 2), body.substr(body.size() / 2)}) {
        if (auto st = req.sink(piece); !st) return st.error();
      }
    } else {
      r.body = a.body;
    }
    return r;
  }

  [[nodiscard]] std::string header_of(std::size_t i, std::string_view name) const {
    for (const auto& [k, v] : asked.at(i).headers) {
      if (k == name) return v;
    }
    return {};
  }
};

std::string html_page(const std::string& anchors) {
  return "<!DOCTYPE html><html><body>" + anchors + "</body></html>";
}

class UpstreamPages : public ::testing::Test {
 protected:
  explicit UpstreamPages() : hb("upstream-pages") {}

  void configure(std::vector<core::UpstreamConfig> configs) {
    upstreams = std::make_unique<Upstreams>(std::move(configs), fetcher,
                                            hb.bed.data_dir / "upstream" / "pages", 1U << 20U);
    hb.env.upstreams = upstreams.get();
  }

  static core::UpstreamConfig pypi() {
    core::UpstreamConfig u;
    u.name = "pypi";
    u.url = "https://upstream.example/simple/";
    return u;
  }

  /// demo-pkg 1.0 uploaded here, and a demo-pkg 9.0 sdist on the upstream's page.
  void local_project_also_upstream() {
    ASSERT_EQ(hb.put(testing::wheel_name("demo-pkg", "1.0"), hb.wheel("demo-pkg", "1.0"), hb.upload)
                  .status,
              201);
    fetcher.answers["https://upstream.example/simple/demo-pkg/"] = {
        200,
        "text/html",
        html_page("<a href=\"demo_pkg-9.0.tar.gz#sha256=" + kSha + "\">demo_pkg-9.0.tar.gz</a>"),
        {}};
  }

  /// The upstream's numpy page links numpy-1.0.tar.gz on another host (files.example); returns
  /// the answer to downloading it through /upstream/pypi/.
  Response download_off_host_file() {
    const std::string bytes = "numpy sdist bytes";
    const std::string sha = crypto::sha256_hex(bytes);
    fetcher.answers["https://upstream.example/simple/numpy/"] = {
        200,
        "text/html",
        html_page("<a href=\"https://files.example/numpy-1.0.tar.gz#sha256=" + sha +
                  "\">numpy-1.0.tar.gz</a>"),
        {}};
    fetcher.answers["https://files.example/numpy-1.0.tar.gz"] = {
        200, "application/gzip", bytes, {}};
    return hb.respond(Method::get, "/upstream/pypi/" + sha + "/numpy-1.0.tar.gz");
  }

  Response get(const std::string& target, const std::string& accept = "text/html") {
    return hb.respond(Method::get, target, {{"Accept", accept}});
  }

  HandlerBed hb;
  FakeFetcher fetcher;
  std::unique_ptr<Upstreams> upstreams;
};

TEST_F(UpstreamPages, UnknownNameListsTheUpstreamsFilesThroughThisServer) {
  configure({pypi()});
  fetcher.answers["https://upstream.example/simple/numpy/"] = {
      200,
      "text/html",
      html_page("<a href=\"../../files/numpy-1.0-py3-none-any.whl#sha256=" + kSha +
                "\" data-requires-python=\"&gt;=3.8\" data-core-metadata=\"sha256=" + kMetaSha +
                "\">numpy-1.0-py3-none-any.whl</a>"
                "<a href=\"numpy-1.1.tar.gz#sha256=" +
                kSha2 +
                "\" data-yanked=\"broken\">numpy-1.1.tar.gz</a>"
                "<a href=\"numpy-1.2.tar.gz\">no hash</a>"
                "<a href=\"scipy-1.0.tar.gz#sha256=" +
                kSha + "\">another project</a>"),
      {}};
  const Response r = get("/simple/numpy/");
  ASSERT_EQ(r.status, 200) << body_of(r);
  const std::string body = body_of(r);
  EXPECT_NE(
      body.find("<a href=\"/upstream/pypi/" + kSha + "/numpy-1.0-py3-none-any.whl#sha256=" + kSha +
                "\" data-requires-python=\"&gt;=3.8\" data-core-metadata=\"sha256=" + kMetaSha +
                "\""),
      std::string::npos)
      << body;
  EXPECT_NE(body.find("/upstream/pypi/" + kSha2 + "/numpy-1.1.tar.gz#sha256=" + kSha2 +
                      "\" data-yanked=\"broken\">"),
            std::string::npos)
      << body;
  EXPECT_EQ(body.find("numpy-1.2.tar.gz"), std::string::npos) << body;  // no hash: not offered
  EXPECT_EQ(body.find("scipy"), std::string::npos) << body;
  EXPECT_EQ(body.find("upstream.example"), std::string::npos) << body;  // never linked directly
  ASSERT_EQ(fetcher.asked.size(), 1U);
  EXPECT_EQ(fetcher.header_of(0, "Accept"), std::string(kUpstreamAccept));
  EXPECT_EQ(fetcher.header_of(0, "Authorization"), "");
  EXPECT_FALSE(fetcher.asked[0].credentials);

  const Response j = get("/simple/numpy/", "application/vnd.pypi.simple.v1+json");
  ASSERT_EQ(j.status, 200);
  const Json doc = Json::parse(body_of(j));
  ASSERT_EQ(doc["files"].size(), 2U);
  EXPECT_EQ(doc["files"][0]["url"], "/upstream/pypi/" + kSha + "/numpy-1.0-py3-none-any.whl");
  EXPECT_EQ(doc["files"][0]["core-metadata"]["sha256"], kMetaSha);
  EXPECT_FALSE(doc["files"][0].contains("upload-time"));  // the HTML page gave none
  EXPECT_EQ(doc["files"][1]["yanked"], "broken");
  EXPECT_EQ(doc["versions"], Json::array({"1.0", "1.1"}));
  EXPECT_EQ(fetcher.asked.size(), 1U);  // within the TTL: from memory

  const std::string metrics = body_of(get("/metrics"));
  EXPECT_NE(metrics.find("wheelforge_upstream_hits_total{upstream=\"pypi\"} 1\n"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("wheelforge_upstream_misses_total{upstream=\"pypi\"} 1\n"),
            std::string::npos);
  EXPECT_NE(metrics.find("wheelforge_upstream_errors_total{upstream=\"pypi\"} 0\n"),
            std::string::npos);
  EXPECT_NE(metrics.find("wheelforge_upstream_bytes_total{upstream=\"pypi\"} " +
                         std::to_string(fetcher.answers.begin()->second.body.size()) + "\n"),
            std::string::npos);
}

TEST_F(UpstreamPages, CredentialsAndUnknownNames) {
  auto u = pypi();
  u.username = "__token__";
  u.password = "pw";
  configure({u});
  const Response r = get("/simple/nothing-here/");
  EXPECT_EQ(r.status, 404);
  EXPECT_NE(body_of(r).find("no such project: nothing-here"), std::string::npos);
  ASSERT_EQ(fetcher.asked.size(), 1U);
  // The fetcher alone adds them, and only on the upstream's own origin (http/fetcher_test).
  EXPECT_EQ(fetcher.header_of(0, "Authorization"), "");
  ASSERT_TRUE(fetcher.asked[0].credentials);
  EXPECT_EQ(fetcher.asked[0].credentials->origin, "https://upstream.example/simple/");
  EXPECT_EQ(fetcher.asked[0].credentials->username, "__token__");
  EXPECT_EQ(fetcher.asked[0].credentials->password, "pw");
  // The 404 is cached for the TTL too.
  EXPECT_EQ(get("/simple/nothing-here/").status, 404);
  EXPECT_EQ(fetcher.asked.size(), 1U);
}

TEST_F(UpstreamPages, FileDownloadsCarryTheCredentialsOfTheUpstreamsOrigin) {
  auto u = pypi();
  u.username = "__token__";
  u.password = "pw";
  configure({u});
  const Response r = download_off_host_file();
  ASSERT_EQ(r.status, 200) << body_of(r);
  ASSERT_EQ(fetcher.asked.size(), 2U);
  // The file is on another host: its request names the upstream's origin as the only place
  // the credentials may go, and carries no Authorization header of its own.
  EXPECT_EQ(fetcher.asked[1].url, "https://files.example/numpy-1.0.tar.gz");
  EXPECT_EQ(fetcher.header_of(1, "Authorization"), "");
  ASSERT_TRUE(fetcher.asked[1].credentials);
  EXPECT_EQ(fetcher.asked[1].credentials->origin, "https://upstream.example/simple/");
}

TEST_F(UpstreamPages, PagesAreFetchedWithinThePageTimeoutFilesWithoutADeadline) {
  auto u = pypi();
  u.page_timeout = std::chrono::seconds{7};
  configure({u});
  const Response r = download_off_host_file();
  ASSERT_EQ(r.status, 200) << body_of(r);
  ASSERT_EQ(fetcher.asked.size(), 2U);
  EXPECT_EQ(fetcher.asked[0].url, "https://upstream.example/simple/numpy/");
  EXPECT_EQ(fetcher.asked[0].deadline, std::chrono::seconds{7});
  EXPECT_EQ(fetcher.asked[1].url, "https://files.example/numpy-1.0.tar.gz");
  EXPECT_EQ(fetcher.asked[1].deadline.count(), 0);
}

TEST_F(UpstreamPages, LocalProjectsNeverShowUpstreamFilesUnlessAllowed) {
  local_project_also_upstream();
  configure({pypi()});
  Response r = get("/simple/demo-pkg/");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(body_of(r).find("9.0"), std::string::npos) << body_of(r);
  EXPECT_TRUE(fetcher.asked.empty());  // the upstream is not even asked

  // On the network thread, a local page is answered there.
  {
    const auto snap = hb.snapshot();
    Context ctx(*snap, hb.env);
    const Response direct = handle_simple(make_request(Method::get, "/simple/demo-pkg/"), ctx);
    EXPECT_EQ(direct.status, 200);
    EXPECT_FALSE(ctx.needs_worker);
    Context other(*snap, hb.env);
    (void)handle_simple(make_request(Method::get, "/simple/numpy/"), other);
    EXPECT_TRUE(other.needs_worker);
    EXPECT_TRUE(fetcher.asked.empty());
  }

  auto allowed = pypi();
  allowed.serve_local = {"demo-pkg"};
  configure({allowed});
  r = get("/simple/demo-pkg/");
  ASSERT_EQ(r.status, 200);
  EXPECT_NE(body_of(r).find("/upstream/pypi/" + kSha + "/demo_pkg-9.0.tar.gz"), std::string::npos);
  EXPECT_NE(body_of(r).find("/files/"), std::string::npos);  // the local wheel stays
}

TEST_F(UpstreamPages, AllowListAndCooldown) {
  const Micros now = now_micros();
  const auto file = [](const std::string& name, const std::string& sha,
                       std::optional<Micros> when) {
    Json f = {{"filename", name}, {"url", name}, {"hashes", {{"sha256", sha}}}};
    if (when) f["upload-time"] = iso8601_micros(*when);
    return f;
  };
  Json page = {{"meta", {{"api-version", "1.1"}}}, {"name", "torch"}, {"files", Json::array()}};
  page["files"].push_back(file("torch-2.8.0-py3-none-any.whl", kSha, now - 10 * kDay));
  page["files"].push_back(file("torch-2.9.0-py3-none-any.whl", kSha2, now - kDay));
  page["files"].push_back(file("torch-2.9.1-py3-none-any.whl", kMetaSha, std::nullopt));
  fetcher.answers["https://download.example/whl/cu128/torch/"] = {
      200, "application/vnd.pypi.simple.v1+json", page.dump(), {}};
  core::UpstreamConfig u;
  u.name = "pytorch";
  u.url = "https://download.example/whl/cu128/";
  u.all_projects = false;
  u.projects = {"torch"};
  u.cooldown_days = 3;
  configure({u});
  EXPECT_EQ(get("/simple/numpy/").status, 404);  // not on the allow-list: never asked
  EXPECT_TRUE(fetcher.asked.empty());
  const Response r = get("/simple/torch/", "application/vnd.pypi.simple.v1+json");
  ASSERT_EQ(r.status, 200) << body_of(r);
  const Json doc = Json::parse(body_of(r));
  ASSERT_EQ(doc["files"].size(), 1U) << doc.dump();  // the fresh and the undated one hidden
  EXPECT_EQ(doc["files"][0]["filename"], "torch-2.8.0-py3-none-any.whl");
  EXPECT_EQ(doc["files"][0]["upload-time"], iso8601_micros(now - 10 * kDay));
}

TEST_F(UpstreamPages, RevalidatesAfterTheTtlAndServesStaleCopiesWithTheirAge) {
  auto u = pypi();
  u.metadata_ttl = std::chrono::seconds{0};
  configure({u});
  fetcher.answers["https://upstream.example/simple/numpy/"] = {
      200,
      "text/html",
      html_page("<a href=\"numpy-1.0.tar.gz#sha256=" + kSha + "\">numpy-1.0.tar.gz</a>"),
      {{"etag", "\"v1\""}, {"last-modified", "Tue, 24 Nov 2026 04:00:00 GMT"}}};
  ASSERT_EQ(get("/simple/numpy/").status, 200);
  const Response again = get("/simple/numpy/");
  ASSERT_EQ(again.status, 200);
  ASSERT_EQ(fetcher.asked.size(), 2U);
  EXPECT_EQ(fetcher.header_of(1, "If-None-Match"), "\"v1\"");
  EXPECT_EQ(fetcher.header_of(1, "If-Modified-Since"), "Tue, 24 Nov 2026 04:00:00 GMT");
  EXPECT_NE(body_of(again).find("numpy-1.0.tar.gz"), std::string::npos);  // from the 304
  EXPECT_EQ(again.header("wheelforge-upstream-stale"), "");

  fetcher.down = true;
  const Response stale = get("/simple/numpy/");
  ASSERT_EQ(stale.status, 200) << body_of(stale);
  EXPECT_NE(body_of(stale).find("numpy-1.0.tar.gz"), std::string::npos);
  EXPECT_NE(body_of(stale).find("<!-- upstream pypi: its files are listed from a cached page "),
            std::string::npos)
      << body_of(stale);
  EXPECT_TRUE(stale.header("wheelforge-upstream-stale").starts_with("pypi; age="));
  const Response json = get("/simple/numpy/", "application/vnd.pypi.simple.v1+json");
  const Json doc = Json::parse(body_of(json));
  EXPECT_EQ(doc["meta"]["_stale-upstreams"][0]["name"], "pypi");
  EXPECT_GE(doc["meta"]["_stale-upstreams"][0]["age-seconds"].get<std::int64_t>(), 0);
  EXPECT_EQ(upstreams->counters(0).errors.load(), 2U);

  // Nothing cached and the upstream down: 502, not a 404 nobody knows to be true.
  const Response none = get("/simple/scipy/");
  EXPECT_EQ(none.status, 502);
  EXPECT_NE(body_of(none).find("connection refused"), std::string::npos) << body_of(none);
}

TEST_F(UpstreamPages, TheDiskCopyOutlivesTheProcess) {
  configure({pypi()});
  fetcher.answers["https://upstream.example/simple/numpy/"] = {
      200,
      "text/html",
      html_page("<a href=\"numpy-1.0.tar.gz#sha256=" + kSha + "\">numpy-1.0.tar.gz</a>"),
      {}};
  ASSERT_EQ(get("/simple/numpy/").status, 200);
  // A new process: empty memory, the upstream down, the copy within its TTL.
  fetcher.down = true;
  configure({pypi()});
  const Response r = get("/simple/numpy/");
  ASSERT_EQ(r.status, 200) << body_of(r);
  EXPECT_NE(body_of(r).find("/upstream/pypi/" + kSha + "/numpy-1.0.tar.gz"), std::string::npos);
  EXPECT_EQ(fetcher.asked.size(), 1U);
  EXPECT_EQ(upstreams->counters(0).hits.load(), 1U);
}

TEST_F(UpstreamPages, BrokenUpstreamPagesAreNotServed) {
  configure({pypi()});
  fetcher.answers["https://upstream.example/simple/numpy/"] = {
      200, "application/vnd.pypi.simple.v1+json", "{not json", {}};
  fetcher.answers["https://upstream.example/simple/scipy/"] = {500, "text/plain", "oops", {}};
  Response r = get("/simple/numpy/");
  EXPECT_EQ(r.status, 502);
  EXPECT_NE(body_of(r).find("cannot be read"), std::string::npos) << body_of(r);
  r = get("/simple/scipy/");
  EXPECT_EQ(r.status, 502);
  EXPECT_NE(body_of(r).find("pypi answered 500 for scipy"), std::string::npos) << body_of(r);
}

TEST_F(UpstreamPages, FilesAreFetchedOnceVerifiedAndServedFromTheStore) {
  configure({pypi()});
  const std::string bytes = "numpy sdist bytes";
  const std::string metadata = "Metadata-Version: 2.1\nName: numpy\nVersion: 1.0\n";
  const std::string sha = crypto::sha256_hex(bytes);
  const std::string meta_sha = crypto::sha256_hex(metadata);
  const std::string bad = "other bytes";
  const std::string listed_sha = crypto::sha256_hex("what the page promised");
  fetcher.answers["https://upstream.example/simple/numpy/"] = {
      200,
      "text/html",
      html_page("<a href=\"https://files.example/numpy-1.0.tar.gz#sha256=" + sha +
                "\" data-core-metadata=\"sha256=" + meta_sha + "\">numpy-1.0.tar.gz</a>" +
                "<a href=\"https://files.example/numpy-1.1.tar.gz#sha256=" + listed_sha +
                "\">numpy-1.1.tar.gz</a>"),
      {}};
  fetcher.answers["https://files.example/numpy-1.0.tar.gz"] = {200, "application/gzip", bytes, {}};
  fetcher.answers["https://files.example/numpy-1.0.tar.gz.metadata"] = {
      200, "text/plain", metadata, {}};
  fetcher.answers["https://files.example/numpy-1.1.tar.gz"] = {200, "application/gzip", bad, {}};

  const std::string url = "/upstream/pypi/" + sha + "/numpy-1.0.tar.gz";
  Response r = hb.respond(Method::get, url);
  ASSERT_EQ(r.status, 200) << body_of(r);
  ASSERT_TRUE(std::holds_alternative<FileRange>(r.body));
  EXPECT_EQ(std::get<FileRange>(r.body).path, hb.bed.store->blob_file(sha));
  EXPECT_EQ(std::get<FileRange>(r.body).length, bytes.size());
  EXPECT_EQ(r.header("etag"), "\"" + sha + "\"");
  r = hb.respond(Method::get, url + ".metadata");
  ASSERT_EQ(r.status, 200) << body_of(r);
  EXPECT_EQ(std::get<FileRange>(r.body).path, hb.bed.store->blob_file(meta_sha));
  // Recorded, so that gc keeps them and backup copies them.
  const auto recorded = hb.bed.catalog->upstream_blobs();
  ASSERT_TRUE(recorded);
  ASSERT_EQ(recorded->size(), 2U);
  std::set<std::string> names;
  for (const auto& b : *recorded) {
    EXPECT_EQ(b.upstream, "pypi");
    names.insert(b.filename + " " + b.sha256);
  }
  EXPECT_EQ(names, (std::set<std::string>{"numpy-1.0.tar.gz " + sha,
                                          "numpy-1.0.tar.gz.metadata " + meta_sha}));
  const auto refs = hb.bed.catalog->referenced_blobs();
  ASSERT_TRUE(refs);
  EXPECT_TRUE(std::any_of(refs->begin(), refs->end(), [&](const catalog::BlobRef& b) {
    return b.sha256 == sha && b.filename == "upstream:pypi/numpy-1.0.tar.gz";
  }));

  // Stored: served with the upstream down (the page from its cache, the bytes from the store).
  const std::size_t asked = fetcher.asked.size();
  fetcher.down = true;
  r = hb.respond(Method::get, url, {{"Range", "bytes=0-4"}});
  ASSERT_EQ(r.status, 206) << body_of(r);
  EXPECT_EQ(fetcher.asked.size(), asked);
  fetcher.down = false;

  // Bytes that are not the ones the page lists: refused, nothing stored.
  r = hb.respond(Method::get, "/upstream/pypi/" + listed_sha + "/numpy-1.1.tar.gz");
  EXPECT_EQ(r.status, 502);
  EXPECT_NE(
      body_of(r).find("sent numpy-1.1.tar.gz with sha256 " + crypto::sha256_hex(bad) +
                      ", but its page lists sha256 " + listed_sha + ": refused, nothing stored"),
      std::string::npos)
      << body_of(r);
  EXPECT_FALSE(std::filesystem::exists(hb.bed.store->blob_file(listed_sha)));
  EXPECT_FALSE(std::filesystem::exists(hb.bed.store->blob_file(crypto::sha256_hex(bad))));

  // Only what the page lists, under its hash, from an upstream that exists.
  EXPECT_EQ(hb.respond(Method::get, "/upstream/pypi/" + listed_sha + "/numpy-1.0.tar.gz").status,
            404);
  EXPECT_EQ(hb.respond(Method::get, "/upstream/nope/" + sha + "/numpy-1.0.tar.gz").status, 404);
  EXPECT_EQ(hb.respond(Method::get, "/upstream/pypi/" + sha + "/not-a-dist").status, 404);
  EXPECT_EQ(hb.respond(Method::get, "/upstream/pypi/" + sha + "/numpy-1.1.tar.gz.metadata").status,
            404);
}

TEST_F(UpstreamPages, TheFileRouteKeepsTheOwnershipGuard) {
  ASSERT_EQ(
      hb.put(testing::wheel_name("demo-pkg", "1.0"), hb.wheel("demo-pkg", "1.0"), hb.upload).status,
      201);
  configure({pypi()});
  const std::string bytes = "public demo";
  const std::string sha = crypto::sha256_hex(bytes);
  fetcher.answers["https://upstream.example/simple/demo-pkg/"] = {
      200,
      "text/html",
      html_page("<a href=\"demo_pkg-9.0.tar.gz#sha256=" + sha + "\">demo_pkg-9.0.tar.gz</a>"),
      {}};
  fetcher.answers["https://upstream.example/simple/demo-pkg/demo_pkg-9.0.tar.gz"] = {
      200, "application/gzip", bytes, {}};
  EXPECT_EQ(hb.respond(Method::get, "/upstream/pypi/" + sha + "/demo_pkg-9.0.tar.gz").status, 404);
  EXPECT_TRUE(fetcher.asked.empty());
}

TEST_F(UpstreamPages, VariantViewsSelectUpstreamBuildsByTheSameRules) {
  core::UpstreamConfig u;
  u.name = "pytorch-cu128";
  u.url = "https://download.example/whl/";
  configure({u});
  std::string anchors;
  const std::vector<std::string> names = {"torch-2.8.0+cu126-cp312-cp312-manylinux_2_28_x86_64.whl",
                                          "torch-2.8.0+cu128-cp312-cp312-manylinux_2_28_x86_64.whl",
                                          "torch-2.9.0+cu128-cp312-cp312-manylinux_2_28_x86_64.whl",
                                          "torch-2.8.0+cpu-cp312-cp312-manylinux_2_28_x86_64.whl"};
  for (std::size_t i = 0; i < names.size(); ++i) {
    std::string href = names[i];
    href.replace(href.find('+'), 1, "%2B");
    anchors += "<a href=\"" + href + "#sha256=" + std::string(64, static_cast<char>('a' + i)) +
               "\">" + names[i] + "</a>";
  }
  fetcher.answers["https://download.example/whl/torch/"] = {
      200, "text/html", html_page(anchors), {}};
  const auto listed = [&](const std::string& view) {
    const Response r = get("/" + view + "/simple/torch/", "application/vnd.pypi.simple.v1+json");
    EXPECT_EQ(r.status, 200) << body_of(r);
    std::vector<std::string> out;
    const Json doc = Json::parse(body_of(r));
    for (const auto& f : doc["files"]) out.push_back(f["filename"].get<std::string>());
    return out;
  };
  EXPECT_EQ(listed("cu128/torch2.8"), std::vector<std::string>{names[1]});
  EXPECT_EQ(listed("cu126/torch2.8"), std::vector<std::string>{names[0]});
  EXPECT_EQ(listed("cu130/torch2.9"), std::vector<std::string>{});  // never another CUDA major
  EXPECT_EQ(listed("cpu/torch2.8"), std::vector<std::string>{names[3]});
  EXPECT_EQ(listed("cu128/torch2.9"), std::vector<std::string>{names[2]});
  // The flat index lists them all.
  const Response all = get("/simple/torch/", "application/vnd.pypi.simple.v1+json");
  EXPECT_EQ(Json::parse(body_of(all))["files"].size(), names.size());
}

TEST(UpstreamCache, MemoryStaysWithinItsBound) {
  FakeFetcher fetcher;
  core::UpstreamConfig u;
  u.name = "pypi";
  u.url = "https://upstream.example/simple/";
  const auto dir =
      std::filesystem::temp_directory_path() / ("wf-upstream-cache-" + std::to_string(::getpid()));
  Upstreams ups({u}, fetcher, dir, 64 * 1024);
  for (int i = 0; i < 200; ++i) {
    const std::string name = "p" + std::to_string(i);
    std::string anchors;
    for (int k = 0; k < 5; ++k) {
      anchors +=
          "<a href=\"" + name + "-1." + std::to_string(k) + ".tar.gz#sha256=" + kSha + "\">x</a>";
    }
    fetcher.answers[u.url + name + "/"] = {200, "text/html", html_page(anchors), {}};
    const auto pages = ups.pages(name, false, now_micros());
    ASSERT_EQ(pages.size(), 1U);
    ASSERT_TRUE(pages[0].entry);
    EXPECT_EQ(pages[0].entry->page.files.size(), 5U);
    EXPECT_LE(ups.memory_bytes(), 64U * 1024U);
  }
  EXPECT_GT(ups.memory_bytes(), 32U * 1024U);
  std::filesystem::remove_all(dir);
}

/// The bytes of the files under `dir`, each in whole 4 KiB blocks (as the disk bound counts).
std::uint64_t bytes_under(const std::filesystem::path& dir, std::size_t* count = nullptr) {
  std::uint64_t n = 0;
  std::size_t files = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) {
      n += (e.file_size() + 4095) / 4096 * 4096;
      ++files;
    }
  }
  if (count != nullptr) *count = files;
  return n;
}

TEST(UpstreamCache, DiskCopiesStayWithinTheirBoundLeastRecentlyUsedOut) {
  FakeFetcher fetcher;
  core::UpstreamConfig u;
  u.name = "pypi";
  u.url = "https://upstream.example/simple/";
  const auto dir =
      std::filesystem::temp_directory_path() / ("wf-upstream-disk-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  constexpr std::uint64_t kBound = 64 * 1024;  // 16 copies
  const auto ask = [&](Upstreams& ups, const std::string& name) {
    const auto pages = ups.pages(name, false, now_micros());
    ASSERT_EQ(pages.size(), 1U);
    ASSERT_TRUE(pages[0].entry);
    EXPECT_EQ(pages[0].entry->page.files.size(), 5U);
  };
  {
    Upstreams ups({u}, fetcher, dir, 1U << 20U);
    ups.set_page_disk_limit(kBound);
    for (int i = 0; i < 100; ++i) {
      const std::string name = "p" + std::to_string(i);
      std::string anchors;
      for (int k = 0; k < 5; ++k) {
        anchors +=
            "<a href=\"" + name + "-1." + std::to_string(k) + ".tar.gz#sha256=" + kSha + "\">x</a>";
      }
      fetcher.answers[u.url + name + "/"] = {200, "text/html", html_page(anchors), {}};
      ask(ups, name);
      // p0 stays in use: the least recently used others go first.
      if (i % 10 == 0) ask(ups, "p0");
      ASSERT_LE(bytes_under(dir), kBound);
      EXPECT_EQ(ups.page_disk_bytes(), bytes_under(dir));
    }
    std::size_t kept = 0;
    EXPECT_GT(bytes_under(dir, &kept), kBound / 2);
    EXPECT_LT(kept, 100U);
    EXPECT_TRUE(std::filesystem::exists(dir / "pypi" / "p0"));
    EXPECT_TRUE(std::filesystem::exists(dir / "pypi" / "p99"));
    EXPECT_FALSE(std::filesystem::exists(dir / "pypi" / "p1"));
  }
  // A new process: the copies present are counted; an evicted page is fetched again, a kept
  // one read from its copy.
  fetcher.asked.clear();
  {
    Upstreams ups({u}, fetcher, dir, 1U << 20U);
    ups.set_page_disk_limit(kBound);
    EXPECT_EQ(ups.page_disk_bytes(), bytes_under(dir));
    ask(ups, "p99");
    EXPECT_TRUE(fetcher.asked.empty());
    ask(ups, "p1");
    ASSERT_EQ(fetcher.asked.size(), 1U);
    EXPECT_EQ(fetcher.asked[0].url, u.url + "p1/");
    EXPECT_TRUE(std::filesystem::exists(dir / "pypi" / "p1"));
    EXPECT_LE(bytes_under(dir), kBound);
    // A lower bound at start trims at once.
    ups.set_page_disk_limit(kBound / 4);
    EXPECT_LE(bytes_under(dir), kBound / 4);
    EXPECT_EQ(ups.page_disk_bytes(), bytes_under(dir));
    EXPECT_TRUE(std::filesystem::exists(dir / "pypi" / "p1"));  // the newest stays
  }
  std::filesystem::remove_all(dir);
}

TEST_F(UpstreamPages, MergedPagesAreKeptAsRenderedUntilALocalUploadOrAnUpstreamChange) {
  local_project_also_upstream();
  auto u = pypi();
  u.serve_local = {"demo-pkg"};
  u.metadata_ttl = std::chrono::seconds{1};
  configure({u});
  const Response first = get("/simple/demo-pkg/");
  ASSERT_EQ(first.status, 200) << body_of(first);
  EXPECT_NE(body_of(first).find("demo_pkg-9.0.tar.gz"), std::string::npos);
  ASSERT_EQ(fetcher.asked.size(), 1U);

  // Answered on the network thread now, the same bytes and validator; 304 and gzip as before.
  {
    const auto snap = hb.snapshot();
    Context ctx(*snap, hb.env);
    const Response direct = handle_simple(
        make_request(Method::get, "/simple/demo-pkg/", {{"Accept", "text/html"}}), ctx);
    EXPECT_FALSE(ctx.needs_worker);
    ASSERT_EQ(direct.status, 200);
    EXPECT_EQ(body_of(direct), body_of(first));
    EXPECT_EQ(direct.header("etag"), first.header("etag"));
    EXPECT_EQ(direct.header("content-type"), first.header("content-type"));
    Context again(*snap, hb.env);
    const Response not_modified = handle_simple(
        make_request(
            Method::get, "/simple/demo-pkg/",
            {{"Accept", "text/html"}, {"If-None-Match", std::string(first.header("etag"))}}),
        again);
    EXPECT_FALSE(again.needs_worker);
    EXPECT_EQ(not_modified.status, 304);
    Context zipped(*snap, hb.env);
    const Response gz =
        handle_simple(make_request(Method::get, "/simple/demo-pkg/",
                                   {{"Accept", "text/html"}, {"Accept-Encoding", "gzip"}}),
                      zipped);
    EXPECT_FALSE(zipped.needs_worker);
    EXPECT_EQ(gz.header("content-encoding"), "gzip");
    EXPECT_NE(gz.header("etag"), first.header("etag"));
    // Another format is another page: made on a worker.
    Context json(*snap, hb.env);
    (void)handle_simple(make_request(Method::get, "/simple/demo-pkg/",
                                     {{"Accept", "application/vnd.pypi.simple.v1+json"}}),
                        json);
    EXPECT_TRUE(json.needs_worker);
  }
  EXPECT_EQ(fetcher.asked.size(), 1U);

  // A local upload is listed at once (a new snapshot), the upstream not asked again.
  ASSERT_EQ(
      hb.put(testing::wheel_name("demo-pkg", "1.1"), hb.wheel("demo-pkg", "1.1"), hb.upload).status,
      201);
  const Response uploaded = get("/simple/demo-pkg/");
  ASSERT_EQ(uploaded.status, 200);
  EXPECT_NE(body_of(uploaded).find(testing::wheel_name("demo-pkg", "1.1")), std::string::npos)
      << body_of(uploaded);
  EXPECT_NE(body_of(uploaded).find("demo_pkg-9.0.tar.gz"), std::string::npos);
  EXPECT_NE(uploaded.header("etag"), first.header("etag"));
  EXPECT_EQ(fetcher.asked.size(), 1U);

  // A new upstream file is listed once the listing's TTL is over.
  fetcher.answers["https://upstream.example/simple/demo-pkg/"].body =
      html_page("<a href=\"demo_pkg-9.0.tar.gz#sha256=" + kSha + "\">demo_pkg-9.0.tar.gz</a>" +
                "<a href=\"demo_pkg-9.1.tar.gz#sha256=" + kSha2 + "\">demo_pkg-9.1.tar.gz</a>");
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  const Response refreshed = get("/simple/demo-pkg/");
  ASSERT_EQ(refreshed.status, 200);
  EXPECT_NE(body_of(refreshed).find("demo_pkg-9.1.tar.gz"), std::string::npos)
      << body_of(refreshed);
  EXPECT_EQ(fetcher.asked.size(), 2U);
  EXPECT_GT(upstreams->memory_bytes(), 0U);
}

TEST_F(UpstreamPages, AKeptMergedPageShowsAFileWhenItsCooldownEnds) {
  // Uploaded upstream 1.5 s short of its cooldown: hidden, then offered, within the TTL.
  const Micros now = now_micros();
  Json page = {{"meta", {{"api-version", "1.1"}}}, {"name", "torch"}, {"files", Json::array()}};
  for (const auto& [name, when] :
       {std::pair{std::string("torch-2.8.0-py3-none-any.whl"), now - 10 * kDay},
        std::pair{std::string("torch-2.9.0-py3-none-any.whl"), now - 3 * kDay + 1'500'000}}) {
    page["files"].push_back(
        {{"filename", name},
         {"url", name},
         {"hashes", {{"sha256", name.find("2.8") != std::string::npos ? kSha : kSha2}}},
         {"upload-time", iso8601_micros(when)}});
  }
  fetcher.answers["https://upstream.example/simple/torch/"] = {
      200, "application/vnd.pypi.simple.v1+json", page.dump(), {}};
  auto u = pypi();
  u.cooldown_days = 3;
  configure({u});
  const std::string json = "application/vnd.pypi.simple.v1+json";
  Response r = get("/simple/torch/", json);
  ASSERT_EQ(r.status, 200) << body_of(r);
  EXPECT_EQ(Json::parse(body_of(r))["files"].size(), 1U);
  std::this_thread::sleep_for(std::chrono::milliseconds(1600));
  r = get("/simple/torch/", json);
  ASSERT_EQ(r.status, 200) << body_of(r);
  EXPECT_EQ(Json::parse(body_of(r))["files"].size(), 2U) << body_of(r);
  EXPECT_EQ(fetcher.asked.size(), 1U);  // the same listing, within its TTL
}

TEST_F(UpstreamPages, TheFileCacheEvictsTheLeastRecentlyUsedUpstreamFilesNeverLocalOnes) {
  configure({pypi()});
  const std::string one(100, '1');
  const std::string two(100, '2');
  const std::string sha1 = crypto::sha256_hex(one);
  const std::string sha2 = crypto::sha256_hex(two);
  fetcher.answers["https://upstream.example/simple/numpy/"] = {
      200,
      "text/html",
      html_page("<a href=\"https://files.example/numpy-1.0.tar.gz#sha256=" + sha1 +
                "\">numpy-1.0.tar.gz</a><a href=\"https://files.example/numpy-1.1.tar.gz#sha256=" +
                sha2 + "\">numpy-1.1.tar.gz</a>"),
      {}};
  fetcher.answers["https://files.example/numpy-1.0.tar.gz"] = {200, "application/gzip", one, {}};
  fetcher.answers["https://files.example/numpy-1.1.tar.gz"] = {200, "application/gzip", two, {}};
  upstreams->set_file_cache_limit(150);  // room for one of the two
  const auto file_fetches = [&] {
    return std::count_if(fetcher.asked.begin(), fetcher.asked.end(),
                         [](const FetchRequest& r) { return r.url.starts_with("https://files."); });
  };
  const auto stored = [&] {
    std::set<std::string> out;
    const auto blobs = hb.bed.catalog->upstream_blobs();
    EXPECT_TRUE(blobs);
    for (const auto& b : *blobs) out.insert(b.filename);
    return out;
  };
  const std::string url1 = "/upstream/pypi/" + sha1 + "/numpy-1.0.tar.gz";
  const std::string url2 = "/upstream/pypi/" + sha2 + "/numpy-1.1.tar.gz";

  ASSERT_EQ(hb.respond(Method::get, url1).status, 200);
  EXPECT_TRUE(hb.bed.store->contains(sha1));
  // The second download evicts the first: its row and its blob go.
  ASSERT_EQ(hb.respond(Method::get, url2).status, 200);
  EXPECT_EQ(stored(), (std::set<std::string>{"numpy-1.1.tar.gz"}));
  EXPECT_FALSE(hb.bed.store->contains(sha1));
  EXPECT_TRUE(hb.bed.store->contains(sha2));
  EXPECT_EQ(file_fetches(), 2);
  // Asked again, the first is fetched again (and the second evicted in turn).
  const Response again = hb.respond(Method::get, url1);
  ASSERT_EQ(again.status, 200) << body_of(again);
  EXPECT_EQ(file_fetches(), 3);
  EXPECT_EQ(stored(), (std::set<std::string>{"numpy-1.0.tar.gz"}));
  EXPECT_TRUE(hb.bed.store->contains(sha1));
  EXPECT_FALSE(hb.bed.store->contains(sha2));
  // Served from the store now: no fetch, its use recorded.
  ASSERT_EQ(hb.respond(Method::get, url1).status, 200);
  EXPECT_EQ(file_fetches(), 3);
  const auto blobs = hb.bed.catalog->upstream_blobs();
  ASSERT_TRUE(blobs);
  ASSERT_EQ(blobs->size(), 1U);
  EXPECT_GE(blobs->front().last_used_at, blobs->front().stored_at);

  // A local file's blob is never evicted, even when an upstream row names the same digest.
  ASSERT_EQ(
      hb.put(testing::wheel_name("demo-pkg", "1.0"), hb.wheel("demo-pkg", "1.0"), hb.upload).status,
      201);
  const auto snap = hb.snapshot();
  const auto local = snap->files_of("demo-pkg");
  ASSERT_FALSE(local.empty());
  const std::string local_sha = local.front()->sha256;
  ASSERT_TRUE(hb.bed.catalog->record_upstream_blob(
      catalog::UpstreamBlob{local_sha, "pypi", local.front()->filename, 1000, 1, 1}));
  const auto evicted = evict_upstream_files(*hb.bed.catalog, *hb.bed.store, 0);
  ASSERT_TRUE(evicted) << evicted.error().message;
  EXPECT_EQ(evicted->evicted.size(), 2U);
  EXPECT_EQ(evicted->kept_bytes, 0U);
  EXPECT_TRUE(stored().empty());
  EXPECT_TRUE(hb.bed.store->contains(local_sha));
  EXPECT_FALSE(hb.bed.store->contains(sha1));
  EXPECT_EQ(hb.respond(Method::get, "/files/" + local_sha + "/" + local.front()->filename).status,
            200);
}

TEST_F(UpstreamPages, LocalNamesKnownUpstreamAreCountedAndNoticedNeverFetched) {
  local_project_also_upstream();
  configure({pypi()});
  const std::string metric = "wheelforge_upstream_shadowed_projects{upstream=\"pypi\"} ";
  const auto metrics = [&] { return body_of(hb.respond(Method::get, "/metrics")); };
  const auto project_page = [&] {
    const Response r = hb.respond(Method::get, "/project/demo-pkg/");
    EXPECT_EQ(r.status, 200);
    return body_of(r);
  };
  // Not known yet: nothing is fetched to find out.
  EXPECT_NE(metrics().find(metric + "0\n"), std::string::npos) << metrics();
  EXPECT_EQ(project_page().find("also exists on the upstream index"), std::string::npos);
  EXPECT_TRUE(fetcher.asked.empty());

  // Once its page is known (as `project list` asks), counted and noticed.
  ASSERT_EQ(upstreams->pages("demo-pkg", /*local=*/false, now_micros()).size(), 1U);
  EXPECT_NE(metrics().find(metric + "1\n"), std::string::npos) << metrics();
  EXPECT_NE(project_page().find("also exists on the upstream index pypi"), std::string::npos)
      << project_page();
  // A new process knows it from the disk copy, without asking the upstream.
  const std::size_t asked = fetcher.asked.size();
  configure({pypi()});
  EXPECT_NE(metrics().find(metric + "1\n"), std::string::npos) << metrics();
  EXPECT_NE(project_page().find("also exists on the upstream index pypi"), std::string::npos);
  EXPECT_EQ(fetcher.asked.size(), asked);
  // An upstream allowed to serve the name is no conflict for the page.
  auto allowed = pypi();
  allowed.serve_local = {"demo-pkg"};
  configure({allowed});
  EXPECT_EQ(project_page().find("also exists on the upstream index"), std::string::npos);
}

TEST_F(UpstreamPages, MetadataAnUpstreamDoesNotOfferIsReadFromTheStoredWheel) {
  configure({pypi()});
  const std::string name = testing::wheel_name("up-dep", "1.0");
  const std::string bytes = hb.wheel("up-dep", "1.0");
  const std::string sha = crypto::sha256_hex(bytes);
  fetcher.answers["https://upstream.example/simple/up-dep/"] = {
      200,
      "text/html",
      html_page("<a href=\"https://files.example/" + name + "#sha256=" + sha + "\">" + name +
                "</a>"),
      {}};
  fetcher.answers["https://files.example/" + name] = {200, "application/zip", bytes, {}};
  const std::string url = "/upstream/pypi/" + sha + "/" + name;
  // Before the wheel is stored: 404, and nothing is fetched for it.
  Response r = hb.respond(Method::get, url + ".metadata");
  EXPECT_EQ(r.status, 404) << body_of(r);
  EXPECT_TRUE(std::none_of(fetcher.asked.begin(), fetcher.asked.end(),
                           [](const FetchRequest& q) { return q.url.ends_with(".metadata"); }));
  ASSERT_EQ(hb.respond(Method::get, url).status, 200);
  // Stored: read from the wheel, even with the upstream down.
  fetcher.down = true;
  r = hb.respond(Method::get, url + ".metadata");
  ASSERT_EQ(r.status, 200) << body_of(r);
  const std::string metadata = body_of(r);
  EXPECT_TRUE(metadata.starts_with("Metadata-Version:")) << metadata;
  EXPECT_NE(metadata.find("\nVersion: 1.0\n"), std::string::npos) << metadata;
  EXPECT_EQ(r.header("etag"), "\"" + crypto::sha256_hex(metadata) + "\"");
  EXPECT_TRUE(std::none_of(fetcher.asked.begin(), fetcher.asked.end(),
                           [](const FetchRequest& q) { return q.url.ends_with(".metadata"); }));
}

/// A latch the fake upstreams below hold their answers at until the test releases it.
class Gate {
 public:
  void release() {
    {
      std::lock_guard lock(mu_);
      released_ = true;
    }
    cv_.notify_all();
  }

 protected:
  void wait_for_release() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return released_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool released_ = false;
};

/// An upstream whose page fetches wait until released; counts them.
class GatedFetcher : public Fetcher, public Gate {
 public:
  Result<FetchResponse> fetch(const FetchRequest& req) override {
    calls.fetch_add(1);
    wait_for_release();
    FetchResponse r;
    r.url = req.url;
    r.status = 200;
    r.headers.emplace_back("content-type", "text/html");
    r.body = html_page("<a href=\"numpy-1.0.tar.gz#sha256=" + kSha + "\">numpy-1.0.tar.gz</a>");
    r.body_bytes = r.body.size();
    return r;
  }
  std::atomic<int> calls{0};
};

TEST(UpstreamPageFetches, ConcurrentMissesOfOnePageShareOneFetch) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("wf-upstream-flight-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  core::UpstreamConfig u;
  u.name = "pypi";
  u.url = "https://upstream.example/simple/";
  GatedFetcher fetcher;
  Upstreams upstreams({u}, fetcher, dir, 1U << 20U);
  std::vector<Upstreams::Listing> got(3);
  std::vector<std::thread> workers;
  workers.emplace_back([&] { got[0] = upstreams.pages("numpy", false, now_micros()).at(0); });
  // The others start once the first is fetching; each either waits for that fetch or (on a
  // second fetch) shows in `calls`.
  while (fetcher.calls.load() == 0) std::this_thread::yield();
  workers.emplace_back([&] { got[1] = upstreams.pages("numpy", false, now_micros()).at(0); });
  workers.emplace_back([&] { got[2] = upstreams.pages("numpy", false, now_micros()).at(0); });
  while (upstreams.waiting_for_fetches() + static_cast<std::size_t>(fetcher.calls.load()) < 3) {
    std::this_thread::yield();
  }
  fetcher.release();
  for (auto& w : workers) w.join();
  EXPECT_EQ(fetcher.calls.load(), 1);
  for (const auto& l : got) {
    ASSERT_TRUE(l.entry);
    ASSERT_EQ(l.entry->page.files.size(), 1U);
    EXPECT_EQ(l.entry->page.files[0].filename, "numpy-1.0.tar.gz");
  }
  EXPECT_EQ(upstreams.counters(0).misses.load(), 1U);
  EXPECT_EQ(upstreams.counters(0).hits.load(), 2U);
  // Within the TTL a later request is a plain hit.
  (void)upstreams.pages("numpy", false, now_micros());
  EXPECT_EQ(fetcher.calls.load(), 1);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace wf::handlers

namespace wf::handlers {
namespace {

/// An upstream whose file answers come in two halves, the second once released.
class HalvesFetcher : public Fetcher, public Gate {
 public:
  std::string body;
  int status = 200;
  Result<FetchResponse> fetch(const FetchRequest& req) override {
    calls.fetch_add(1);
    FetchResponse r;
    r.url = req.url;
    r.status = status;
    r.headers.emplace_back("content-length", std::to_string(body.size()));
    if (auto st = req.on_head(r.status, r.headers); !st) return st.error();
    const std::string_view b = body;
    if (auto st = req.sink(b.substr(0, b.size() / 2)); !st) return st.error();
    wait_for_release();
    if (auto st = req.sink(b.substr(b.size() / 2)); !st) return st.error();
    r.body_bytes = b.size();
    return r;
  }
  std::atomic<int> calls{0};
};

/// Waits (through FileDownload::wait) until `done(progress)` holds.
template <class Pred>
FileDownload::Progress wait_until(FileDownload& d, Pred done) {
  for (;;) {
    const auto p = d.progress();
    if (done(p)) return p;
    std::mutex mu;
    std::condition_variable cv;
    bool woken = false;
    const auto ticket = d.wait(p.version, [&] {
      std::lock_guard lock(mu);
      woken = true;
      cv.notify_all();
    });
    if (ticket == 0) continue;
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return woken; });
  }
}

class UpstreamDownloads : public ::testing::Test {
 protected:
  UpstreamDownloads() : hb("upstream-downloads") {
    core::UpstreamConfig u;
    u.name = "pypi";
    u.url = "https://upstream.example/simple/";
    upstreams = std::make_unique<Upstreams>(std::vector<core::UpstreamConfig>{u}, fetcher,
                                            hb.bed.data_dir / "upstream" / "pages", 1U << 20U);
  }
  FileFetch fetch_of(const std::string& sha) {
    FileFetch f;
    f.upstream = &upstreams->configs().front();
    f.url = "https://files.example/numpy-1.0.tar.gz";
    f.sha256 = sha;
    f.shown = "numpy-1.0.tar.gz";
    f.max_bytes = 1U << 20U;
    f.request_id = 7;
    return f;
  }
  std::string read_all(const FileDownload& d, std::uint64_t n) {
    std::string out(n, '\0');
    EXPECT_EQ(::pread(d.reader()->get(), out.data(), n, 0), static_cast<ssize_t>(n));
    return out;
  }

  HandlerBed hb;
  HalvesFetcher fetcher;
  std::unique_ptr<Upstreams> upstreams;
};

TEST_F(UpstreamDownloads, OneDownloadIsSharedReadableWhileWrittenThenStored) {
  fetcher.body = std::string(1000, 'x') + std::string(1000, 'y');
  const std::string sha = crypto::sha256_hex(fetcher.body);
  auto started = upstreams->download_file(fetch_of(sha), *hb.bed.store, hb.bed.catalog.get());
  ASSERT_TRUE(started) << started.error().message;
  ASSERT_TRUE(started->download);
  ASSERT_TRUE(started->run);
  std::thread worker(started->run);
  FileDownload& d = *started->download;
  // The first half is readable while the upstream holds back the rest.
  const auto half = wait_until(d, [](const auto& p) { return p.written == 1000; });
  EXPECT_TRUE(half.answered);
  EXPECT_EQ(half.state, FileDownload::State::running);
  EXPECT_EQ(half.length, std::optional<std::uint64_t>(2000));
  EXPECT_EQ(read_all(d, 1000), fetcher.body.substr(0, 1000));
  EXPECT_FALSE(hb.bed.store->contains(sha));
  // A second request joins it: the same download, nothing more to run, no second fetch.
  auto joined = upstreams->download_file(fetch_of(sha), *hb.bed.store, hb.bed.catalog.get());
  ASSERT_TRUE(joined);
  EXPECT_EQ(joined->download, started->download);
  EXPECT_FALSE(joined->run);
  EXPECT_EQ(upstreams->downloads_running(), 1U);
  fetcher.release();
  worker.join();
  EXPECT_EQ(d.progress().state, FileDownload::State::committed);
  EXPECT_EQ(read_all(d, 2000), fetcher.body);
  EXPECT_TRUE(hb.bed.store->contains(sha));
  const auto rows = hb.bed.catalog->upstream_blobs();
  ASSERT_TRUE(rows);
  ASSERT_EQ(rows->size(), 1U);
  EXPECT_EQ(rows->front().filename, "numpy-1.0.tar.gz");
  EXPECT_EQ(upstreams->downloads_running(), 0U);
  EXPECT_EQ(fetcher.calls.load(), 1);
  // Stored: nothing to download.
  auto later = upstreams->download_file(fetch_of(sha), *hb.bed.store, hb.bed.catalog.get());
  ASSERT_TRUE(later);
  EXPECT_FALSE(later->download);
}

TEST_F(UpstreamDownloads, AMismatchOrAnErrorStatusFailsAndStoresNothing) {
  fetcher.body = std::string(2000, 'z');
  const std::string listed = crypto::sha256_hex("what the page promised");
  fetcher.release();
  auto started = upstreams->download_file(fetch_of(listed), *hb.bed.store, hb.bed.catalog.get());
  ASSERT_TRUE(started && started->run);
  started->run();
  const FileDownload& d = *started->download;
  EXPECT_EQ(d.progress().state, FileDownload::State::failed);
  EXPECT_EQ(d.progress().written, 2000U);
  EXPECT_EQ(d.error().code, Errc::upstream);
  EXPECT_NE(d.error().message.find("refused, nothing stored"), std::string::npos)
      << d.error().message;
  EXPECT_FALSE(hb.bed.store->contains(listed));
  EXPECT_FALSE(hb.bed.store->contains(crypto::sha256_hex(fetcher.body)));
  ASSERT_TRUE(hb.bed.catalog->upstream_blobs());
  EXPECT_TRUE(hb.bed.catalog->upstream_blobs()->empty());
  std::size_t temps = 0;
  for (const auto& e : std::filesystem::directory_iterator(hb.bed.store->tmp_dir())) {
    temps += e.is_regular_file() && e.path().filename() != ".lock" ? 1U : 0U;
  }
  EXPECT_EQ(temps, 0U);
  EXPECT_EQ(upstreams->downloads_running(), 0U);

  // A failed download is not reused: the next request fetches again. An error status fails
  // before any byte, naming it.
  fetcher.status = 404;
  auto again = upstreams->download_file(fetch_of(listed), *hb.bed.store, hb.bed.catalog.get());
  ASSERT_TRUE(again && again->run);
  EXPECT_NE(again->download, started->download);
  again->run();
  EXPECT_EQ(again->download->progress().state, FileDownload::State::failed);
  EXPECT_EQ(again->download->progress().written, 0U);
  EXPECT_EQ(again->download->error().message, "upstream pypi answered 404 for numpy-1.0.tar.gz");
  EXPECT_EQ(fetcher.calls.load(), 2);
}

}  // namespace
}  // namespace wf::handlers
