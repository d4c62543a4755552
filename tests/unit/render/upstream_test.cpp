#include "wheelforge/render/upstream.hpp"

#include <gtest/gtest.h>

#include <string>

namespace wf::render {
namespace {

const std::string kUpstreamSha(64, 'a');
const std::string kUpstreamMetaSha(64, 'b');
constexpr std::string_view kPage = "http://127.0.0.1:9000/simple/demo/";

TEST(UpstreamJson, ReadsEveryField) {
  const std::string body = R"({"meta":{"api-version":"1.1"},"name":"demo","versions":["1.0"],
    "files":[
      {"filename":"demo-1.0-py3-none-any.whl","url":"/files/)" +
                           kUpstreamSha + R"(/demo-1.0-py3-none-any.whl","hashes":{"sha256":")" +
                           kUpstreamSha +
                           R"("},"requires-python":">=3.8","core-metadata":{"sha256":")" +
                           kUpstreamMetaSha + R"("},"yanked":false,"size":1234,
       "upload-time":"2023-11-14T22:13:20.123456Z"},
      {"filename":"demo-1.1.tar.gz","url":"demo-1.1.tar.gz","hashes":{"sha256":")" +
                           std::string(64, 'D') +
                           R"("},"dist-info-metadata":true,"yanked":"broken"},
      {"filename":"demo-1.2.tar.gz","url":"demo-1.2.tar.gz","hashes":{"md5":"00"}},
      {"filename":"other.tar.gz","url":"demo-1.3.tar.gz","hashes":{"sha256":")" +
                           kUpstreamSha + R"("}},
      {"filename":"demo-1.4.tar.gz","url":"file:///etc/demo-1.4.tar.gz","hashes":{"sha256":")" +
                           kUpstreamSha + R"("}},
      {"filename":"demo-1.5.tar.gz","url":"demo-1.5.tar.gz","hashes":{"sha256":")" +
                           kUpstreamSha +
                           R"("},"yanked":true}
    ]})";
  const auto page = parse_upstream_json(body, kPage);
  ASSERT_TRUE(page.ok()) << page.error().message;
  EXPECT_EQ(page->name, "demo");
  EXPECT_EQ(page->dropped_without_hash, 1U);
  ASSERT_EQ(page->files.size(), 3U);
  const auto& a = page->files[0];
  EXPECT_EQ(a.url, "http://127.0.0.1:9000/files/" + kUpstreamSha + "/demo-1.0-py3-none-any.whl");
  EXPECT_EQ(a.filename, "demo-1.0-py3-none-any.whl");
  EXPECT_EQ(a.requires_python, ">=3.8");
  EXPECT_EQ(a.metadata_sha256, kUpstreamMetaSha);
  EXPECT_FALSE(a.yanked);
  EXPECT_EQ(a.size, 1234U);
  EXPECT_EQ(a.upload_time, 1'700'000'000'123'456);
  const auto& b = page->files[1];
  EXPECT_EQ(b.url, "http://127.0.0.1:9000/simple/demo/demo-1.1.tar.gz");
  EXPECT_EQ(b.sha256, std::string(64, 'd'));
  EXPECT_EQ(b.metadata_sha256, "");
  EXPECT_EQ(b.yanked, "broken");
  EXPECT_FALSE(b.upload_time);
  EXPECT_EQ(page->files[2].yanked, "");
}

TEST(UpstreamJson, RefusesWhatIsNotAPage) {
  for (const std::string_view body : {"", "[]", "{", "{\"files\":{}}", "{\"name\":\"x\"}",
                                      R"({"meta":{"api-version":"2.0"},"files":[]})"}) {
    const auto page = parse_upstream_json(body, kPage);
    ASSERT_FALSE(page.ok()) << body;
    EXPECT_EQ(page.error().code, Errc::invalid);
  }
  const auto odd = parse_upstream_json(R"({"files":[1,"x",null,{"url":5}]})", kPage);
  ASSERT_TRUE(odd.ok());
  EXPECT_TRUE(odd->files.empty());
}

}  // namespace
}  // namespace wf::render
