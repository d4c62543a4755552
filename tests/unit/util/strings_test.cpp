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

TEST(Strings, ShellQuoteSurvivesAQuoteInside) {
  EXPECT_EQ(shell_quote("plain"), "'plain'");
  EXPECT_EQ(shell_quote(""), "''");
  EXPECT_EQ(shell_quote("it's $HOME"), "'it'\\''s $HOME'");
}

TEST(Strings, HtmlEscape) {
  EXPECT_EQ(html_escape("<a href=\"x\">&'"), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;");
}

TEST(Strings, SanitizeForLog) {
  EXPECT_EQ(sanitize_for_log("a\nb\x01\xc3"), "a?b??");
  EXPECT_EQ(sanitize_for_log("abcdef", 3), "abc...");
}

TEST(Strings, FreeTextRefusesControlCharactersNamingTheField) {
  EXPECT_TRUE(check_free_text("reason", ""));
  EXPECT_TRUE(check_free_text("reason", "ABI break in 2.0; use 2.1 (see #12)"));
  EXPECT_TRUE(check_free_text("description", "caf\xc3\xa9 \xe2\x80\x94 \xf0\x9f\x94\x91"));
  const auto lf = check_free_text("reason", "x\n2027-01-01T00:00:00Z delete cli");
  ASSERT_FALSE(lf);
  EXPECT_EQ(lf.error().code, Errc::invalid);
  EXPECT_EQ(lf.error().message,
            "reason must not contain control characters (a line feed at byte 2)");
  EXPECT_EQ(check_free_text("reason", "a\rb").error().message,
            "reason must not contain control characters (a carriage return at byte 2)");
  EXPECT_EQ(check_free_text("description", "\tx").error().message,
            "description must not contain control characters (a tab at byte 1)");
  EXPECT_EQ(check_free_text("reason", "\x1b[2J").error().message,
            "reason must not contain control characters (the control character U+001b at "
            "byte 1)");
  EXPECT_FALSE(check_free_text("reason", std::string("a\0b", 3)));
  EXPECT_FALSE(check_free_text("reason", "a\x7f"));
  // C1 controls as UTF-8 (U+0085 is NEL, a line break to some readers), and bytes that are
  // not UTF-8 at all.
  EXPECT_EQ(check_free_text("reason", "ab\xc2\x85").error().message,
            "reason must not contain control characters (the control character U+0085 at "
            "byte 3)");
  EXPECT_FALSE(check_free_text("reason", "\xc2\x9b"));
  EXPECT_EQ(check_free_text("reason", "a\x85").error().message,
            "reason is not UTF-8 text (byte 2)");
  EXPECT_FALSE(check_free_text("reason", "\xc0\x8a"));          // overlong LF
  EXPECT_FALSE(check_free_text("reason", "\xed\xa0\x80"));      // a surrogate
  EXPECT_FALSE(check_free_text("reason", "\xe2\x80"));          // cut short
  EXPECT_FALSE(check_free_text("reason", "\xf4\x90\x80\x80"));  // above U+10FFFF
}

TEST(Strings, EscapeControlKeepsOneLine) {
  EXPECT_EQ(escape_control("plain caf\xc3\xa9"), "plain caf\xc3\xa9");
  EXPECT_EQ(escape_control("a\r\nb\tc"), "a\\r\\nb\\tc");
  EXPECT_EQ(escape_control("\x1b[31m\x7f"), "\\x1b[31m\\x7f");
  EXPECT_EQ(escape_control(std::string("\0", 1)), "\\x00");
  EXPECT_EQ(escape_control("x\xc2\x85y"), "x\\u0085y");
  EXPECT_EQ(escape_control("bad\xff\xc3"), "bad\\xff\\xc3");
}

// A token as auth::generate_token() makes them: "wf_" and 43 URL-safe base64 characters.
constexpr std::string_view kToken = "wf_Xk3-9aQ_vB7LmZp2Rt8YwE4uN6sDcHfJ1gKo5iTqVe0";

TEST(Strings, SanitizeForLogRedactsTokens) {
  const std::string token(kToken);
  EXPECT_EQ(sanitize_for_log("/simple/" + token + "/"), "/simple/wf_[redacted]/");
  EXPECT_EQ(sanitize_for_log("/x?a=1&tok=" + token + "&b=2"), "/x?a=1&tok=wf_[redacted]&b=2");
  EXPECT_EQ(sanitize_for_log("Bearer" + token), "Bearerwf_[redacted]");
  // Cut short or run on, a token is still taken for one.
  EXPECT_EQ(sanitize_for_log(token.substr(0, 35) + "/rest"), "wf_[redacted]/rest");
  EXPECT_EQ(sanitize_for_log(token + "abc_-x.whl"), "wf_[redacted].whl");
  // Twice in one line.
  EXPECT_EQ(sanitize_for_log(token + " " + token), "wf_[redacted] wf_[redacted]");
}

TEST(Strings, SanitizeForLogKeepsWhatIsNoToken) {
  EXPECT_EQ(sanitize_for_log("/simple/wf_utils/"), "/simple/wf_utils/");
  EXPECT_EQ(sanitize_for_log("wf_tools-1.0-py3-none-any.whl"), "wf_tools-1.0-py3-none-any.whl");
  EXPECT_EQ(sanitize_for_log("wf_"), "wf_");
  EXPECT_EQ(sanitize_for_log("?token="), "?token=");
  EXPECT_EQ(sanitize_for_log("/tokens/"), "/tokens/");
  EXPECT_EQ(sanitize_for_log("Wf_" + std::string(40, 'a')), "Wf_" + std::string(40, 'a'));
}

TEST(Strings, SanitizeForLogRedactsTokenValues) {
  EXPECT_EQ(sanitize_for_log("/api/resolve?project=x&token=hunter2&torch=2.8"),
            "/api/resolve?project=x&token=[redacted]&torch=2.8");
  EXPECT_EQ(sanitize_for_log("/a?TOKEN=s3cr3t"), "/a?TOKEN=[redacted]");
  EXPECT_EQ(sanitize_for_log("/a?access_token=s3cr3t;x=1"), "/a?access_token=[redacted];x=1");
  EXPECT_EQ(sanitize_for_log("/a?token=s3cr3t#frag"), "/a?token=[redacted]#frag");
  EXPECT_EQ(sanitize_for_log("token=a\nb c"), "token=[redacted] c");
}

TEST(Strings, SanitizeForLogCutsAfterRedacting) {
  const std::string token(kToken);
  // The cap counts what is written; a token across it leaves none of its characters.
  EXPECT_EQ(sanitize_for_log("/simple/" + token, 12), "/simple/wf_[...");
  EXPECT_EQ(sanitize_for_log("/simple/" + token, 21), "/simple/wf_[redacted]");
  EXPECT_EQ(sanitize_for_log("/simple/" + token + "/", 21), "/simple/wf_[redacted]...");
  EXPECT_EQ(sanitize_for_log("/a?token=" + std::string(500, 'z'), 30), "/a?token=[redacted]");
  std::string out = "x=";
  append_for_log(out, "/" + token + "\x01", 100);
  EXPECT_EQ(out, "x=/wf_[redacted]?");
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
