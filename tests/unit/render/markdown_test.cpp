// Descriptions as HTML: Markdown through libcmark in safe mode, reStructuredText and plain text
// escaped, and a corpus of script injections of which nothing executable may come out.

#include "wheelforge/render/markdown.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

namespace wf::render {
namespace {

using core::DescriptionFormat;

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

/// What would run in a browser: a script element, an event handler attribute, a javascript:,
/// vbscript: or data:text/html URL in an attribute, or any element that embeds or styles.
void expect_nothing_executable(const std::string& html, const std::string& input) {
  const std::string l = lower(html);
  for (const char* bad : {"<script", "<iframe", "<object", "<embed", "<style", "<svg", "<math",
                          "<img src=\"javascript", "<form", "<input", "<meta", "<link", "<base",
                          "href=\"javascript:", "href=\"vbscript:", "href=\"data:",
                          "src=\"javascript:", "src=\"data:text", "href=\" javascript"}) {
    EXPECT_EQ(l.find(bad), std::string::npos) << bad << " in " << html << " from " << input;
  }
  // No attribute outside those cmark writes itself (href, src, alt, title, class, start).
  for (std::size_t at = l.find('<'); at != std::string::npos; at = l.find('<', at + 1)) {
    const std::size_t end = l.find('>', at);
    ASSERT_NE(end, std::string::npos) << html;
    const std::string tag = l.substr(at, end - at);
    for (std::size_t eq = tag.find('='); eq != std::string::npos; eq = tag.find('=', eq + 1)) {
      std::size_t name_end = eq;
      std::size_t name_start = name_end;
      while (name_start > 0 && (std::isalnum(static_cast<unsigned char>(tag[name_start - 1])) ||
                                tag[name_start - 1] == '-')) {
        --name_start;
      }
      const std::string name = tag.substr(name_start, name_end - name_start);
      // '=' inside a quoted value (a URL's query) has no attribute name before it.
      if (name_start == 0 || tag[name_start - 1] != ' ') continue;
      EXPECT_TRUE(name == "href" || name == "src" || name == "alt" || name == "title" ||
                  name == "class" || name == "start")
          << "attribute " << name << " in " << html << " from " << input;
    }
  }
}

TEST(Markdown, RendersCommonMarkWithHeadingsMovedDown) {
  const std::string html = markdown_to_html(
      "# Flash attention\n\nFast **exact** attention.\n\n## Install\n\n```sh\npip install x\n"
      "```\n\n- one\n- [two](https://example.com/two)\n\n###### deep\n");
  EXPECT_NE(html.find("<h3>Flash attention</h3>"), std::string::npos) << html;
  EXPECT_NE(html.find("<h4>Install</h4>"), std::string::npos) << html;
  EXPECT_NE(html.find("<h6>deep</h6>"), std::string::npos) << html;
  EXPECT_EQ(html.find("<h1"), std::string::npos) << html;
  EXPECT_NE(html.find("<strong>exact</strong>"), std::string::npos);
  EXPECT_NE(html.find("<pre><code class=\"language-sh\">pip install x\n</code></pre>"),
            std::string::npos)
      << html;
  EXPECT_NE(html.find("<a href=\"https://example.com/two\">two</a>"), std::string::npos);
}

TEST(Markdown, RawHtmlIsOmittedAndDangerousUrlsEmptied) {
  const std::string html = markdown_to_html(
      "<div onclick=\"x()\">block</div>\n\ntext <b onmouseover=alert(1)>inline</b>\n\n"
      "[a](javascript:alert(1)) [b](JaVaScRiPt:alert(1)) [c](vbscript:x) "
      "[d](data:text/html;base64,PHNjcmlwdD4=) ![e](javascript:alert(1))\n");
  EXPECT_NE(html.find("<!-- raw HTML omitted -->"), std::string::npos) << html;
  EXPECT_EQ(html.find("onclick"), std::string::npos) << html;
  EXPECT_EQ(html.find("onmouseover"), std::string::npos) << html;
  EXPECT_EQ(lower(html).find("javascript:"), std::string::npos) << html;
  EXPECT_NE(html.find("<a href=\"\">a</a>"), std::string::npos) << html;
}

// Injections through a Markdown description, from the usual XSS cheat sheets.
TEST(Markdown, XssCorpusGivesNothingExecutable) {
  const std::vector<std::string> corpus = {
      "<script>alert(1)</script>",
      "<SCRIPT SRC=//evil/x.js></SCRIPT>",
      "text\n\n<script>\nalert(1)\n</script>\n",
      "<img src=x onerror=alert(1)>",
      "<svg/onload=alert(1)>",
      "<iframe src=\"javascript:alert(1)\"></iframe>",
      "<a href=\"javascript:alert(1)\">x</a>",
      "[x](javascript:alert(1))",
      "[x](  javascript:alert(1)  )",
      "[x](<javascript:alert(1)>)",
      "[x](java&#x73;cript:alert(1))",
      "[x](&#106;avascript:alert(1))",
      "[x](jav\tascript:alert(1))",
      "[x](data:text/html,<script>alert(1)</script>)",
      "[x][r]\n\n[r]: javascript:alert(1)\n",
      "![x](javascript:alert(1))",
      "![x](data:image/svg+xml;base64,PHN2Zz4=)",
      "<javascript:alert(1)>",
      "[x](https://ok.example/\"onmouseover=\"alert(1))",
      "[x](https://ok.example/ \"title\" onmouseover=alert(1))",
      "<details open ontoggle=alert(1)>",
      "<style>*{background:url(javascript:alert(1))}</style>",
      "<form action=javascript:alert(1)><input type=submit>",
      "<meta http-equiv=refresh content=\"0;url=javascript:alert(1)\">",
      "<!-- --><script>alert(1)</script>",
      "<div>\n\n<script>alert(1)</script>\n\n</div>",
      "```\n<script>alert(1)</script>\n```",
      "`<script>alert(1)</script>`",
      "<<script>script>alert(1)<</script>/script>",
      "<math><mi xlink:href=\"javascript:alert(1)\">x</mi></math>",
      "<base href=\"javascript:alert(1)//\">",
  };
  for (const auto& input : corpus) {
    expect_nothing_executable(markdown_to_html(input), input);
    expect_nothing_executable(description_html(input, DescriptionFormat::markdown), input);
  }
}

TEST(Description, RestructuredTextAndPlainTextAreEscapedAndPreformatted) {
  const std::string rst =
      "Title\n=====\n\n.. raw:: html\n\n   <script>alert(1)</script>\n\n`x "
      "<javascript:alert(1)>`_\n"
      "<img src=x onerror=alert(1)>\n";
  for (const auto format : {DescriptionFormat::rst, DescriptionFormat::plain}) {
    const std::string html = description_html(rst, format);
    EXPECT_TRUE(html.starts_with("<pre class=\"description-text\">")) << html;
    EXPECT_NE(html.find("&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos) << html;
    EXPECT_NE(html.find("Title\n=====\n"), std::string::npos) << html;
    EXPECT_EQ(html.find("<script"), std::string::npos) << html;
    EXPECT_EQ(html.find("<img"), std::string::npos) << html;
  }
}

TEST(Description, FormatFollowsTheContentType) {
  EXPECT_EQ(core::description_format("text/markdown"), DescriptionFormat::markdown);
  EXPECT_EQ(core::description_format("Text/Markdown; charset=UTF-8; variant=GFM"),
            DescriptionFormat::markdown);
  EXPECT_EQ(core::description_format("text/x-rst"), DescriptionFormat::rst);
  EXPECT_EQ(core::description_format(""), DescriptionFormat::rst);
  EXPECT_EQ(core::description_format("text/plain"), DescriptionFormat::plain);
  EXPECT_EQ(core::description_format("text/html"), DescriptionFormat::plain);
}

TEST(Markdown, InvalidUtf8IsReplaced) {
  const std::string html = markdown_to_html(std::string("bad \xff\xfe byte"));
  EXPECT_NE(html.find("bad "), std::string::npos);
  EXPECT_EQ(html.find('\xff'), std::string::npos);
}

}  // namespace
}  // namespace wf::render
