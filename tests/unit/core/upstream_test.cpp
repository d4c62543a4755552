#include "wheelforge/core/upstream.hpp"

#include <gtest/gtest.h>

#include <string>

namespace wf::core {
namespace {

const std::string kSha(64, 'a');
const std::string kMetaSha(64, 'b');
constexpr std::string_view kPage = "https://pypi.example/simple/demo/";

TEST(UpstreamOwnership, LocalProjectsOnlyThroughTheirOverride) {
  UpstreamConfig all;
  all.name = "pypi";
  EXPECT_TRUE(may_serve(all, "numpy", /*local=*/false));
  EXPECT_FALSE(may_serve(all, "flash-attn", /*local=*/true));
  all.serve_local = {"setuptools"};
  EXPECT_TRUE(may_serve(all, "setuptools", /*local=*/true));
  EXPECT_FALSE(may_serve(all, "flash-attn", /*local=*/true));

  UpstreamConfig listed;
  listed.all_projects = false;
  listed.projects = {"torch", "triton"};
  EXPECT_TRUE(may_serve(listed, "torch", false));
  EXPECT_FALSE(may_serve(listed, "numpy", false));
  EXPECT_FALSE(may_serve(listed, "torch", true));  // local wins over the allow-list
}

TEST(UpstreamHtml, ReadsEveryAttributeAndResolvesRelativeUrls) {
  const std::string body =
      "<!DOCTYPE html><html><head><meta name=\"pypi:repository-version\" content=\"1.1\">"
      "</head><body><h1>Links for demo</h1>\n"
      "<a href=\"../../files/demo-1.0-py3-none-any.whl#sha256=" +
      kSha + "\" data-requires-python=\"&gt;=3.8\" data-core-metadata=\"sha256=" + kMetaSha +
      "\">demo-1.0-py3-none-any.whl</a><br/>\n"
      "<A HREF='/x/demo-1.1.tar.gz#SHA256=" +
      std::string(64, 'C') +
      "' data-yanked=\"bad &amp; broken\">demo-1.1.tar.gz</A>\n"
      "<!-- <a href=\"commented-1.0.tar.gz#sha256=" +
      kSha +
      "\"> -->\n"
      "<a href=\"https://cdn.example/p/demo-2.0%2Bcu128-py3-none-any.whl#sha256=" +
      kSha +
      "\" data-dist-info-metadata=\"true\" data-yanked=\"\">x</a>\n"
      "<a href=\"demo-0.9.tar.gz#md5=00112233445566778899aabbccddeeff\">demo-0.9.tar.gz</a>\n"
      "<a href=\"demo-0.8.tar.gz\">demo-0.8.tar.gz</a>\n"
      "</body></html>";
  const auto page = parse_upstream_html(body, kPage);
  ASSERT_TRUE(page.ok()) << page.error().message;
  ASSERT_EQ(page->files.size(), 3U);
  EXPECT_EQ(page->dropped_without_hash, 2U);

  const auto& a = page->files[0];
  EXPECT_EQ(a.url, "https://pypi.example/files/demo-1.0-py3-none-any.whl");
  EXPECT_EQ(a.filename, "demo-1.0-py3-none-any.whl");
  EXPECT_EQ(a.sha256, kSha);
  EXPECT_EQ(a.requires_python, ">=3.8");
  EXPECT_EQ(a.metadata_sha256, kMetaSha);
  EXPECT_FALSE(a.yanked);
  EXPECT_FALSE(a.upload_time);

  const auto& b = page->files[1];
  EXPECT_EQ(b.url, "https://pypi.example/x/demo-1.1.tar.gz");
  EXPECT_EQ(b.sha256, std::string(64, 'c'));
  EXPECT_EQ(b.yanked, "bad & broken");

  const auto& c = page->files[2];
  EXPECT_EQ(c.url, "https://cdn.example/p/demo-2.0%2Bcu128-py3-none-any.whl");
  EXPECT_EQ(c.filename, "demo-2.0+cu128-py3-none-any.whl");
  EXPECT_EQ(c.metadata_sha256, "");  // `true` without a hash cannot be verified
  EXPECT_EQ(c.yanked, "");           // data-yanked="" is yanked without a reason
}

TEST(UpstreamHtml, AbsoluteBaseHrefOnly) {
  const std::string anchor = "<a href=\"demo-1.0.tar.gz#sha256=" + kSha + "\">demo-1.0.tar.gz</a>";
  auto page = parse_upstream_html("<base href=\"https://mirror.example/pkgs/\">" + anchor, kPage);
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->files.size(), 1U);
  EXPECT_EQ(page->files[0].url, "https://mirror.example/pkgs/demo-1.0.tar.gz");
  page = parse_upstream_html("<base href=\"/elsewhere/\">" + anchor, kPage);
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->files[0].url, "https://pypi.example/simple/demo/demo-1.0.tar.gz");
}

TEST(UpstreamHtml, RefusesHostileOrBrokenInputWithoutCrashing) {
  for (const std::string& body :
       {std::string("<a"), std::string("<a href="), std::string("<a href=\"unterminated"),
        std::string("<a href='x#sha256=") + kSha, std::string("<!--"), std::string("<<<<>>>>"),
        std::string("<a href=\"javascript:alert(1)#sha256=") + kSha + "\">x</a>",
        std::string("<a href=\"..%2F..%2Fetc%2Fpasswd#sha256=") + kSha + "\">x</a>",
        std::string("<a href=\"%00#sha256=") + kSha + "\">x</a>"}) {
    const auto page = parse_upstream_html(body, kPage);
    ASSERT_TRUE(page.ok()) << body;
    EXPECT_TRUE(page->files.empty()) << body;
  }
}

TEST(UpstreamHtml, PageOverTheLimitIsRefused) {
  const std::string big(kMaxUpstreamPageBytes + 1, ' ');
  const auto page = parse_upstream_html(big, kPage);
  ASSERT_FALSE(page.ok());
  EXPECT_EQ(page.error().code, Errc::invalid);
}

TEST(UpstreamHtml, Entities) {
  EXPECT_EQ(decode_html_entities("a &lt;&gt; &amp;amp; &#60;&#x3c;&#X3E; &quot;&apos;"),
            "a <> &amp; <<> \"'");
  EXPECT_EQ(decode_html_entities("&unknown; & &#; &#xZZ; &#12345678901;"),
            "&unknown; & &#; &#xZZ; &#12345678901;");
  EXPECT_EQ(decode_html_entities("&#0;"), "\xEF\xBF\xBD");
  EXPECT_EQ(decode_html_entities("&#xe9;"), "\xC3\xA9");
}

TEST(UpstreamUrls, Resolve) {
  const std::optional<Url> base = *parse_url("https://h.example:8443/simple/demo/?x=1");
  EXPECT_EQ(resolve_link(base, " a.whl\n"), "https://h.example:8443/simple/demo/a.whl");
  EXPECT_EQ(resolve_link(base, "../../f/a.whl#sha256=1"), "https://h.example:8443/f/a.whl");
  EXPECT_EQ(resolve_link(base, "/f/./g/../a.whl?q"), "https://h.example:8443/f/a.whl?q");
  EXPECT_EQ(resolve_link(base, "//cdn.example/a.whl"), "https://cdn.example/a.whl");
  EXPECT_EQ(resolve_link(base, "HTTP://other/a.whl"), "http://other/a.whl");
  EXPECT_EQ(resolve_link(base, "../../../../a.whl"), "https://h.example:8443/a.whl");
  EXPECT_FALSE(resolve_link(base, "ftp://other/a.whl"));
  EXPECT_FALSE(resolve_link(base, "file:///etc/passwd"));
  EXPECT_FALSE(resolve_link(std::nullopt, "a.whl"));
  EXPECT_EQ(url_filename("https://h/x/demo-1.0%2Bcu128.tar.gz?y"), "demo-1.0+cu128.tar.gz");
  EXPECT_FALSE(url_filename("https://h/x/"));
  EXPECT_FALSE(url_filename("https://h/x/a%2Fb"));
}

TEST(UpstreamCooldown, HidesFreshAndUndatedFiles) {
  const Micros now = 1'700'000'000'000'000;
  const Micros day = 86'400'000'000;
  UpstreamFile f;
  EXPECT_FALSE(in_cooldown(f, std::nullopt, now));
  EXPECT_TRUE(in_cooldown(f, 3, now));  // no upload time: hidden
  f.upload_time = now - 2 * day;
  EXPECT_TRUE(in_cooldown(f, 3, now));
  EXPECT_FALSE(in_cooldown(f, 2, now));
  EXPECT_FALSE(in_cooldown(f, 0, now));
}

TEST(UpstreamTime, ParsesUploadTimes) {
  EXPECT_EQ(parse_upload_time("2023-11-14T22:13:20.123456Z"), 1'700'000'000'123'456);
  EXPECT_EQ(parse_upload_time("2023-11-14T22:13:20Z"), 1'700'000'000'000'000);
  EXPECT_EQ(parse_upload_time("2023-11-14T22:13:20.1Z"), 1'700'000'000'100'000);
  EXPECT_EQ(parse_upload_time("2023-11-14T22:13:20.1234567Z"), 1'700'000'000'123'456);
  EXPECT_EQ(parse_upload_time("2023-11-14T22:13:20+00:00"), 1'700'000'000'000'000);
  EXPECT_FALSE(parse_upload_time("2023-11-14T22:13:20"));
  EXPECT_FALSE(parse_upload_time("2023-11-14T22:13:20+02:00"));
  EXPECT_FALSE(parse_upload_time("2023-13-14T22:13:20Z"));
  EXPECT_FALSE(parse_upload_time("2023-11-14T22:13:20.Z"));
  EXPECT_FALSE(parse_upload_time(""));
}

}  // namespace
}  // namespace wf::core
