#include "http/framing.hpp"

#include <gtest/gtest.h>

namespace wf::http {
namespace {

HeadFraming head(unsigned version, std::string_view te, std::size_t tes, std::string_view host,
                 std::size_t hosts) {
  return HeadFraming{version, tes, te, hosts, host};
}

HeadFraming http11(std::string_view te = {}, std::size_t tes = 0) {
  return head(11, te, tes, "index.example:8080", 1);
}

TEST(Framing, ChunkedAloneIsTheOnlyTransferEncoding) {
  for (const std::string_view ok :
       {"chunked", "Chunked", "CHUNKED", " chunked\t", "chunked,", ", chunked", "chunked , "}) {
    EXPECT_TRUE(is_chunked_alone(ok)) << ok;
  }
  for (const std::string_view bad :
       {"", " ", ",", "chunked, gzip", "gzip, chunked", "chunked, chunked", "identity", "gzip",
        "x-custom", "chunked;q=1", "chunkedx", "chunked gzip", "deflate,chunked"}) {
    EXPECT_FALSE(is_chunked_alone(bad)) << bad;
  }
}

TEST(Framing, RefusesEveryOtherTransferEncoding) {
  EXPECT_FALSE(check_head(http11()));
  EXPECT_FALSE(check_head(http11("chunked", 1)));
  for (const std::string_view te : {"chunked, gzip", "gzip, chunked", "identity", "x-custom"}) {
    const auto e = check_head(http11(te, 1));
    ASSERT_TRUE(e) << te;
    EXPECT_EQ(e->code, Errc::invalid);
    EXPECT_NE(e->message.find("Transfer-Encoding ('" + std::string(te) + "')"), std::string::npos)
        << e->message;
    EXPECT_NE(e->message.find("only 'chunked' alone"), std::string::npos) << e->message;
  }
  // Two field lines ("gzip" then "chunked") are one list whose last coding is chunked: not
  // chunked alone either.
  const auto two = check_head(http11("gzip", 2));
  ASSERT_TRUE(two);
  EXPECT_NE(two->message.find("several field lines"), std::string::npos) << two->message;
}

TEST(Framing, RefusesTransferEncodingInHttp10) {
  const auto e = check_head(head(10, "chunked", 1, "", 0));
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code, Errc::invalid);
  EXPECT_NE(e->message.find("HTTP/1.0"), std::string::npos) << e->message;
  EXPECT_FALSE(check_head(head(10, "", 0, "", 0)));
}

TEST(Framing, Http11NeedsExactlyOneValidHost) {
  const auto missing = check_head(head(11, "", 0, "", 0));
  ASSERT_TRUE(missing);
  EXPECT_NE(missing->message.find("needs a Host header"), std::string::npos);
  const auto twice = check_head(head(11, "", 0, "a", 2));
  ASSERT_TRUE(twice);
  EXPECT_NE(twice->message.find("more than one Host"), std::string::npos);
  const auto bad = check_head(head(11, "", 0, "a b", 1));
  ASSERT_TRUE(bad);
  EXPECT_NE(bad->message.find("invalid Host header 'a b'"), std::string::npos);
  // HTTP/1.0 may leave Host out, but not send two or an invalid one.
  EXPECT_FALSE(check_head(head(10, "", 0, "", 0)));
  EXPECT_TRUE(check_head(head(10, "", 0, "a", 2)));
  EXPECT_TRUE(check_head(head(10, "", 0, "a/b", 1)));
  // An empty Host is what a client sends for a URI without authority (RFC 9112 §3.2).
  EXPECT_FALSE(check_head(head(11, "", 0, "", 1)));
}

TEST(Framing, HostSyntax) {
  for (const std::string_view ok :
       {"", "localhost", "127.0.0.1", "127.0.0.1:8080", "index.example",
        "index.example:", "Index-1.Example_x~", "[::1]", "[::1]:8080", "[2001:db8::7]:443",
        "[v1.fe:x]", "my%20host", "a!$&'()*+,;=b"}) {
    EXPECT_TRUE(is_valid_host(ok)) << ok;
  }
  for (const std::string_view bad :
       {"a b",   "user@host", "host/path", "host?q",      "host#f", "a:b:c", "host:8o",
        "[::1",  "[]",        "[::1]x",    "[::1]:8a",    "[::1%]", "%zz",   "%2",
        "h\"st", "h<st>",     "\x7f",      "h\xc3\xa9st", "h\tst",  "a\\b"}) {
    EXPECT_FALSE(is_valid_host(bad)) << bad;
  }
}

}  // namespace
}  // namespace wf::http
