// Upstream project pages on arbitrary bytes, through both parsers (PEP 503 HTML in core, PEP 691
// JSON in render). Checked for every file offered: a lower-case sha256, an absolute http(s) URL
// without fragment whose last segment is the file name, a name without '/', '\\' or control
// characters, a metadata hash that is empty or a sha256; the only failure is invalid; and the
// HTML parser gives the same answer for the page read twice in a row (no hidden state).

#include <cstdint>
#include <string>

#include "fuzz_check.hpp"
#include "wheelforge/core/upstream.hpp"
#include "wheelforge/render/upstream.hpp"
#include "wheelforge/util/strings.hpp"

namespace {

constexpr std::string_view kPageUrl = "https://upstream.example/simple/demo/";

void check_page(const wf::Result<wf::core::UpstreamPage>& page) {
  if (!page) {
    WF_FUZZ_CHECK(page.error().code == wf::Errc::invalid);
    return;
  }
  WF_FUZZ_CHECK(page->files.size() <= wf::core::kMaxUpstreamFiles);
  for (const auto& f : page->files) {
    WF_FUZZ_CHECK(wf::is_sha256_hex(f.sha256) && wf::to_lower(f.sha256) == f.sha256);
    WF_FUZZ_CHECK(f.metadata_sha256.empty() || wf::is_sha256_hex(f.metadata_sha256));
    WF_FUZZ_CHECK(f.url.starts_with("http://") || f.url.starts_with("https://"));
    WF_FUZZ_CHECK(f.url.find('#') == std::string::npos);
    WF_FUZZ_CHECK(!f.filename.empty());
    for (const char c : f.filename) {
      const auto u = static_cast<unsigned char>(c);
      WF_FUZZ_CHECK(c != '/' && c != '\\' && u >= 0x20 && u != 0x7f);
    }
    const auto name = wf::core::url_filename(f.url);
    WF_FUZZ_CHECK(name && *name == f.filename);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input = wf::fuzz::as_text(data, size);
  const auto html = wf::core::parse_upstream_html(input, kPageUrl);
  check_page(html);
  const auto again = wf::core::parse_upstream_html(input, kPageUrl);
  WF_FUZZ_CHECK(again.ok() == html.ok());
  if (html) {
    WF_FUZZ_CHECK(again->files.size() == html->files.size());
    WF_FUZZ_CHECK(again->dropped_without_hash == html->dropped_without_hash);
  }
  check_page(wf::render::parse_upstream_json(input, kPageUrl));
  // Entity decoding never grows text by more than the replacement character allows.
  const std::string decoded = wf::core::decode_html_entities(input);
  WF_FUZZ_CHECK(decoded.size() <= input.size() * 3);
  return 0;
}
