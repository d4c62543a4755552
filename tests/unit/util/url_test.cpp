#include "wheelforge/util/url.hpp"

#include <gtest/gtest.h>

namespace wf {
namespace {

Url parsed(std::string_view text) {
  auto url = parse_url(text);
  EXPECT_TRUE(url.ok()) << text << ": " << (url.ok() ? "" : url.error().message);
  return url.ok() ? *url : Url{};
}

std::string resolved(std::string_view base, std::string_view ref) {
  auto url = resolve_url(parsed(base), ref);
  EXPECT_TRUE(url.ok()) << ref << ": " << (url.ok() ? "" : url.error().message);
  return url.ok() ? url->str() : "";
}

TEST(Url, ParsesTheParts) {
  const auto url = parsed("HTTPS://user:p%40ss@Pypi.Example.COM:8443/simple/a/?x=1#frag");
  EXPECT_EQ(url.scheme, "https");
  EXPECT_EQ(url.userinfo, "user:p%40ss");
  EXPECT_EQ(url.host, "pypi.example.com");
  EXPECT_EQ(url.port, 8443);
  EXPECT_EQ(url.path, "/simple/a/");
  EXPECT_EQ(url.query, "x=1");
  EXPECT_EQ(url.authority(), "pypi.example.com:8443");
  EXPECT_EQ(url.target(), "/simple/a/?x=1");
  EXPECT_EQ(url.str(), "https://pypi.example.com:8443/simple/a/?x=1");
  EXPECT_EQ(url.redacted(), "https://pypi.example.com:8443/simple/a/");
  EXPECT_EQ(url.with_userinfo(), "https://user:p%40ss@pypi.example.com:8443/simple/a/?x=1");
  EXPECT_EQ(parse_url(url.with_userinfo())->userinfo, url.userinfo);
  const auto creds = url.credentials();
  ASSERT_TRUE(creds);
  EXPECT_EQ(creds->first, "user");
  EXPECT_EQ(creds->second, "p@ss");
}

TEST(Url, DefaultsAndLiterals) {
  const auto plain = parsed("http://example.com");
  EXPECT_EQ(plain.port, 80);
  EXPECT_EQ(plain.path, "/");
  EXPECT_FALSE(plain.query);
  EXPECT_FALSE(plain.credentials());
  EXPECT_FALSE(plain.host_is_ip());
  EXPECT_EQ(parsed("https://example.com:443/x").authority(), "example.com");
  const auto v6 = parsed("http://[::1]:8080/simple/");
  EXPECT_EQ(v6.host, "::1");
  EXPECT_TRUE(v6.host_is_ip());
  EXPECT_EQ(v6.authority(), "[::1]:8080");
  EXPECT_TRUE(parsed("http://127.0.0.1:1/").host_is_ip());
  EXPECT_EQ(parsed("http://tok@h/").credentials()->second, "");
}

TEST(Url, RefusesWhatIsNotAnHttpUrl) {
  for (const auto* bad :
       {"", "example.com/simple/", "ftp://example.com/", "file:///etc/passwd", "http://",
        "http:///path", "http://host:0/", "http://host:65536/", "http://host:12x/", "http://ho st/",
        "http://host/a b", "http://[::1/", "http://[::1]x/", "http://ho<st/", "http://h/\n"}) {
    const auto url = parse_url(bad);
    EXPECT_FALSE(url.ok()) << bad;
    if (!url.ok()) {
      EXPECT_EQ(url.error().code, Errc::invalid);
    }
  }
}

TEST(Url, MessagesNeverRepeatTheUserinfo) {
  const auto url = parse_url("http://user:secret@bad host/");
  ASSERT_FALSE(url.ok());
  EXPECT_EQ(url.error().message.find("secret"), std::string::npos);
}

TEST(Url, ResolvesReferencesAsRfc3986Says) {
  // RFC 3986 section 5.4.1, with an http base.
  const std::string base = "http://a/b/c/d;p?q";
  EXPECT_EQ(resolved(base, "g"), "http://a/b/c/g");
  EXPECT_EQ(resolved(base, "./g"), "http://a/b/c/g");
  EXPECT_EQ(resolved(base, "g/"), "http://a/b/c/g/");
  EXPECT_EQ(resolved(base, "/g"), "http://a/g");
  EXPECT_EQ(resolved(base, "//g"), "http://g/");
  EXPECT_EQ(resolved(base, "?y"), "http://a/b/c/d;p?y");
  EXPECT_EQ(resolved(base, "g?y"), "http://a/b/c/g?y");
  EXPECT_EQ(resolved(base, "#s"), "http://a/b/c/d;p?q");
  EXPECT_EQ(resolved(base, ""), "http://a/b/c/d;p?q");
  EXPECT_EQ(resolved(base, "."), "http://a/b/c/");
  EXPECT_EQ(resolved(base, ".."), "http://a/b/");
  EXPECT_EQ(resolved(base, "../g"), "http://a/b/g");
  EXPECT_EQ(resolved(base, "../.."), "http://a/");
  EXPECT_EQ(resolved(base, "../../../g"), "http://a/g");
  EXPECT_EQ(resolved(base, "/./g"), "http://a/g");
  EXPECT_EQ(resolved(base, "g/../h"), "http://a/b/c/h");
  EXPECT_EQ(resolved(base, "https://other:8443/x"), "https://other:8443/x");
  // A static index's links to its files.
  EXPECT_EQ(resolved("https://h/simple/demo/", "../../files/demo-1.0.whl#sha256=ab"),
            "https://h/files/demo-1.0.whl");
}

TEST(Url, ResolvingKeepsTheUserinfoOnlyWithinTheAuthority) {
  const auto base = parsed("https://u:p@h/simple/a/");
  EXPECT_EQ(resolve_url(base, "/files/x")->userinfo, "u:p");
  EXPECT_EQ(resolve_url(base, "//other/files/x")->userinfo, "");
  EXPECT_EQ(resolve_url(base, "https://h/x")->userinfo, "");
  EXPECT_FALSE(resolve_url(base, "ftp://h/x").ok());
  EXPECT_FALSE(resolve_url(base, "/a b").ok());
}

TEST(Url, SameOrigin) {
  EXPECT_TRUE(parsed("https://h/a").same_origin(parsed("https://h:443/b")));
  EXPECT_FALSE(parsed("https://h/a").same_origin(parsed("http://h/a")));
  EXPECT_FALSE(parsed("https://h/a").same_origin(parsed("https://h:8443/a")));
  EXPECT_FALSE(parsed("https://h/a").same_origin(parsed("https://g/a")));
}

}  // namespace
}  // namespace wf
