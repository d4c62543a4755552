#include "wheelforge/util/strings.hpp"

#include <gtest/gtest.h>

namespace wf {
namespace {

TEST(Strings, PercentDecode) {
  EXPECT_EQ(percent_decode("a%2Bb"), "a+b");
  EXPECT_EQ(percent_decode("a+b"), "a+b");
  EXPECT_EQ(percent_decode("%41%62"), "Ab");
  EXPECT_FALSE(percent_decode("%4"));
  EXPECT_FALSE(percent_decode("%"));
  EXPECT_FALSE(percent_decode("%zz"));
  EXPECT_FALSE(percent_decode("%00"));
}

TEST(Strings, PercentEncodeKeepsSlashAndUnreserved) {
  EXPECT_EQ(percent_encode_path("/files/a+b c.whl"), "/files/a%2Bb%20c.whl");
}

TEST(Strings, AppendDecimal) {
  std::string out = "x=";
  append_decimal(out, 0);
  EXPECT_EQ(out, "x=0");
  out.clear();
  append_decimal(out, 345, 6);
  EXPECT_EQ(out, "000345");
  out.clear();
  append_decimal(out, 1234567, 3);
  EXPECT_EQ(out, "1234567");
  out.clear();
  append_decimal(out, 18446744073709551615ULL);
  EXPECT_EQ(out, "18446744073709551615");
}

TEST(Strings, HexRoundTrip) {
  EXPECT_EQ(hex_encode(std::string("\x00\xff\x10", 3)), "00ff10");
  EXPECT_EQ(hex_decode("00FF10"), std::string("\x00\xff\x10", 3));
  EXPECT_FALSE(hex_decode("abc"));
  EXPECT_FALSE(hex_decode("zz"));
}

TEST(Strings, Sha256Hex) {
  EXPECT_TRUE(is_sha256_hex(std::string(64, 'a')));
  EXPECT_FALSE(is_sha256_hex(std::string(64, 'A')));
  EXPECT_FALSE(is_sha256_hex(std::string(63, 'a')));
}

TEST(Strings, HtmlEscape) {
  EXPECT_EQ(html_escape("<a href=\"x\">&'"), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;");
}

TEST(Strings, SanitizeForLog) {
  EXPECT_EQ(sanitize_for_log("a\nb\x01\xc3"), "a?b??");
  EXPECT_EQ(sanitize_for_log("abcdef", 3), "abc...");
}

TEST(Strings, ParseU64) {
  EXPECT_EQ(parse_u64("0"), 0U);
  EXPECT_EQ(parse_u64("18446744073709551615"), 18446744073709551615ULL);
  EXPECT_FALSE(parse_u64("18446744073709551616"));
  EXPECT_FALSE(parse_u64("-1"));
  EXPECT_FALSE(parse_u64(" 1"));
  EXPECT_FALSE(parse_u64(""));
}

TEST(Strings, Base64) {
  EXPECT_EQ(base64_encode("__token__:abc"), "X190b2tlbl9fOmFiYw==");
  EXPECT_EQ(base64_decode("X190b2tlbl9fOmFiYw=="), "__token__:abc");
  EXPECT_EQ(base64_decode("Zm9v"), "foo");
  EXPECT_FALSE(base64_decode("Zm9v!"));
  EXPECT_EQ(base64url_nopad_encode("\xfb\xff"), "-_8");
}

TEST(Strings, SplitAndTrim) {
  const auto parts = split("a,,b", ',');
  ASSERT_EQ(parts.size(), 3U);
  EXPECT_EQ(parts[1], "");
  EXPECT_EQ(trim("  x \r\n"), "x");
  EXPECT_TRUE(iequals("Accept", "ACCEPT"));
}

}  // namespace
}  // namespace wf
