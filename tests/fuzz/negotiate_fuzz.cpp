// negotiate(accept, format) on arbitrary bytes: the input is split at the first NUL or
// newline into the Accept value and the ?format= value. Checked: the only failure is
// not_acceptable, a non-empty format decides alone, an empty Accept means text/html, and (for
// Accept values without quoted strings) neither the order of the elements, nor ASCII case, nor
// an added malformed element changes the outcome.

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_check.hpp"
#include "wheelforge/core/negotiate.hpp"

namespace {

using Outcome = wf::Result<wf::core::PageFormat>;

bool same(const Outcome& a, const Outcome& b) {
  if (a.ok() != b.ok()) return false;
  return a.ok() ? *a == *b : a.error().code == b.error().code;
}

std::string reversed_elements(std::string_view accept) {
  std::vector<std::string_view> elements;
  while (true) {
    const auto comma = accept.find(',');
    elements.push_back(accept.substr(0, comma));
    if (comma == std::string_view::npos) break;
    accept.remove_prefix(comma + 1);
  }
  std::string out;
  for (auto it = elements.rbegin(); it != elements.rend(); ++it) {
    if (!out.empty()) out += ',';
    out += *it;
  }
  return out;
}

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input = wf::fuzz::as_text(data, size);
  const auto cut = input.find_first_of(std::string_view("\0\n", 2));
  const std::string_view accept = input.substr(0, cut);
  const std::string_view format =
      cut == std::string_view::npos ? std::string_view() : input.substr(cut + 1);

  const auto chosen = wf::core::negotiate(accept, format);
  if (!chosen) {
    WF_FUZZ_CHECK(chosen.error().code == wf::Errc::not_acceptable);
  } else {
    WF_FUZZ_CHECK(!wf::core::content_type(*chosen).empty());
  }
  if (!format.empty()) {
    const auto alone = wf::core::negotiate("", format);
    WF_FUZZ_CHECK(alone.ok() == chosen.ok());
    if (alone) WF_FUZZ_CHECK(*alone == *chosen);
  }
  const auto plain = wf::core::negotiate("", "");
  WF_FUZZ_CHECK(plain.ok() && *plain == wf::core::PageFormat::html_legacy);
  // Whitespace-only Accept headers behave as absent ones.
  if (format.empty() && accept.find_first_not_of(" \t") == std::string_view::npos) {
    WF_FUZZ_CHECK(chosen.ok() && *chosen == wf::core::PageFormat::html_legacy);
  }
  // Quotes and escapes make ',' part of a value; the rewrites below only hold without them.
  if (format.empty() && accept.find_first_of("\"\\") == std::string_view::npos) {
    WF_FUZZ_CHECK(same(chosen, wf::core::negotiate(reversed_elements(accept), "")));
    WF_FUZZ_CHECK(same(chosen, wf::core::negotiate(upper(accept), "")));
    WF_FUZZ_CHECK(same(chosen, wf::core::negotiate(std::string(accept) + ", nonsense", "")));
  }
  return 0;
}
