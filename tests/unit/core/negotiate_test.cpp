#include "wheelforge/core/negotiate.hpp"

#include <gtest/gtest.h>

#include <string>

namespace wf::core {
namespace {

constexpr auto kLegacy = PageFormat::html_legacy;
constexpr auto kHtml = PageFormat::html_v1;
constexpr auto kJson = PageFormat::json_v1;

struct AcceptCase {
  std::string_view accept;
  PageFormat expected;
};

const AcceptCase kAccepted[] = {
    // Clients.
    {"application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html; q=0.1, "
     "text/html; q=0.01",
     kJson},
    {"text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8",
     kLegacy},
    {"text/html, */*", kLegacy},
    {"", kLegacy},
    {"   ", kLegacy},
    {" , ,", kLegacy},
    // Single types and their aliases.
    {"text/html", kLegacy},
    {"application/vnd.pypi.simple.v1+json", kJson},
    {"application/vnd.pypi.simple.v1+html", kHtml},
    {"application/vnd.pypi.simple.latest+json", kJson},
    {"application/vnd.pypi.simple.latest+html", kHtml},
    {"Application/VND.PyPI.Simple.V1+JSON", kJson},
    {"TEXT/HTML", kLegacy},
    // Wildcards.
    {"*/*", kLegacy},
    {"text/*", kLegacy},
    {"application/*", kJson},
    {"*/*;q=0.5", kLegacy},
    // q-values decide first.
    {"text/html;q=0.9, application/vnd.pypi.simple.v1+json;q=0.8", kLegacy},
    {"text/html;q=0.8, application/vnd.pypi.simple.v1+html;q=0.9", kHtml},
    {"application/vnd.pypi.simple.v1+json;q=0.001, text/html;q=0", kJson},
    {"application/vnd.pypi.simple.v1+json;q=0.5, */*;q=0.6", kLegacy},
    {"application/vnd.pypi.simple.v1+json;q=0.5, application/*;q=0.6", kHtml},
    {"text/html;q=1.000, application/vnd.pypi.simple.v1+json;q=0.999", kLegacy},
    // Equal q: explicit beats wildcard; among explicit JSON > v1 HTML > text/html.
    {"text/html, application/vnd.pypi.simple.v1+html, application/vnd.pypi.simple.v1+json", kJson},
    {"text/html, application/vnd.pypi.simple.v1+html", kHtml},
    {"application/vnd.pypi.simple.v1+html, */*", kHtml},
    {"application/vnd.pypi.simple.v1+json;q=0.5, text/*;q=0.5", kJson},
    {"text/html;q=0.5, application/*;q=0.5", kLegacy},
    // q=0 excludes a type, even when a wildcard would accept it.
    {"*/*, text/html;q=0", kJson},
    {"*/*, text/html;q=0, application/vnd.pypi.simple.v1+json;q=0", kHtml},
    {"application/*, application/vnd.pypi.simple.v1+json;q=0", kHtml},
    {"text/html;q=0, application/vnd.pypi.simple.v1+html", kHtml},
    // The most specific range decides, whatever the order.
    {"application/vnd.pypi.simple.v1+json;q=0.1, application/*;q=0.9", kHtml},
    {"*/*;q=0.9, text/*;q=0.1, application/vnd.pypi.simple.v1+html;q=0.2", kJson},
    // Repeats and aliases: the highest q among equally specific ranges.
    {"application/vnd.pypi.simple.latest+json;q=0, application/vnd.pypi.simple.v1+json", kJson},
    {"text/html;q=0.2, text/html;q=0.9, application/vnd.pypi.simple.v1+json;q=0.5", kLegacy},
    // Whitespace and parameters.
    {"  application/vnd.pypi.simple.v1+json  ;  q=0.5 ,text/html;q=0.4", kJson},
    {"application/vnd.pypi.simple.v1+json;Q=0.5, text/html;q=0.4", kJson},
    {"text/html;charset=utf-8", kLegacy},
    {"text/html;level=\"a,b;c\";q=0.9, application/vnd.pypi.simple.v1+json;q=0.8", kLegacy},
    {"application/vnd.pypi.simple.v1+json;q=0.5;ext=1, text/html;q=0.4", kJson},
    // A range with parameters is more specific than the same range without.
    {"text/html;q=0, text/html;charset=utf-8;q=0.5, application/vnd.pypi.simple.v1+html;q=0.1",
     kLegacy},
    // Malformed elements are ignored, the rest still counts.
    {"application/vnd.pypi.simple.v1+json;q=2, text/html;q=0.5", kLegacy},
    {"application/vnd.pypi.simple.v1+json;q=abc, application/vnd.pypi.simple.v1+html;q=0.1", kHtml},
    {"application/vnd.pypi.simple.v1+json;q=0.0001, text/html;q=0.5", kLegacy},
    {"application/vnd.pypi.simple.v1+json;q=-1, text/html;q=0.5", kLegacy},
    {"application/vnd.pypi.simple.v1+json;q=1.001, text/html;q=0.5", kLegacy},
    {"application/vnd.pypi.simple.v1+json;q, text/html;q=0.5", kLegacy},
    {"garbage, application/vnd.pypi.simple.v1+json", kJson},
    {"*/json, text/html;q=0.1", kLegacy},
    {"text/ html, application/vnd.pypi.simple.v1+html", kHtml},
    // Nothing usable at all: as if the header were absent.
    {"garbage", kLegacy},
    {"text/html;q=5", kLegacy},
};

TEST(Negotiate, ChoosesFromAccept) {
  for (const auto& row : kAccepted) {
    const auto chosen = negotiate(row.accept, "");
    ASSERT_TRUE(chosen.ok()) << "Accept: " << row.accept << ": " << chosen.error().message;
    EXPECT_EQ(*chosen, row.expected) << "Accept: " << row.accept;
  }
}

const std::string_view kNotAcceptable[] = {
    "application/json",
    "image/png, application/xml;q=0.9",
    "text/plain",
    "text/html;q=0",
    "*/*;q=0",
    "application/vnd.pypi.simple.v2+json",
    "application/vnd.pypi.simple.v1+json;q=0, application/vnd.pypi.simple.v1+html;q=0, "
    "text/*;q=0",
    "application/*;q=0, text/html;q=0.000",
};

TEST(Negotiate, NotAcceptable) {
  for (const auto accept : kNotAcceptable) {
    const auto chosen = negotiate(accept, "");
    ASSERT_FALSE(chosen.ok()) << "Accept: " << accept;
    EXPECT_EQ(chosen.error().code, Errc::not_acceptable);
    EXPECT_NE(chosen.error().message.find("application/vnd.pypi.simple.v1+json"),
              std::string::npos);
  }
}

TEST(Negotiate, NotAcceptableMessageQuotesTheHeaderSafely) {
  const auto chosen = negotiate("application/json, x/y\r\nX-Evil: 1", "");
  ASSERT_FALSE(chosen.ok());
  EXPECT_NE(chosen.error().message.find("\"application/json, x/y??X-Evil: 1\""), std::string::npos)
      << chosen.error().message;
}

struct FormatCase {
  std::string_view format;
  PageFormat expected;
};

const FormatCase kFormats[] = {
    {"text/html", kLegacy},
    {"application/vnd.pypi.simple.v1+html", kHtml},
    {"application/vnd.pypi.simple.v1+json", kJson},
    {"application/vnd.pypi.simple.latest+html", kHtml},
    {"application/vnd.pypi.simple.latest+json", kJson},
    {"Application/Vnd.PyPI.Simple.V1+JSON", kJson},
};

TEST(Negotiate, FormatQueryWinsOverAccept) {
  for (const auto& row : kFormats) {
    for (const auto accept : {"", "text/html", "application/json", "*/*;q=0"}) {
      const auto chosen = negotiate(accept, row.format);
      ASSERT_TRUE(chosen.ok()) << row.format << ": " << chosen.error().message;
      EXPECT_EQ(*chosen, row.expected) << row.format;
    }
  }
}

TEST(Negotiate, UnknownFormatQueryListsValidValues) {
  for (const auto format : {"json", "html", "application/json", "text/html; charset=utf-8",
                            " text/html", "*/*", "application/vnd.pypi.simple.v2+json"}) {
    const auto chosen = negotiate("text/html", format);
    ASSERT_FALSE(chosen.ok()) << format;
    EXPECT_EQ(chosen.error().code, Errc::not_acceptable);
    const std::string& message = chosen.error().message;
    for (const auto valid :
         {"text/html", "application/vnd.pypi.simple.v1+html", "application/vnd.pypi.simple.v1+json",
          "application/vnd.pypi.simple.latest+html", "application/vnd.pypi.simple.latest+json"}) {
      EXPECT_NE(message.find(valid), std::string::npos) << message;
    }
  }
  const auto evil = negotiate("", "json\n<script>");
  ASSERT_FALSE(evil.ok());
  EXPECT_NE(evil.error().message.find("\"json?<script>\""), std::string::npos);
}

TEST(Negotiate, ContentTypes) {
  EXPECT_EQ(content_type(kLegacy), "text/html; charset=utf-8");
  EXPECT_EQ(content_type(kHtml), "application/vnd.pypi.simple.v1+html");
  EXPECT_EQ(content_type(kJson), "application/vnd.pypi.simple.v1+json");
}

}  // namespace
}  // namespace wf::core
