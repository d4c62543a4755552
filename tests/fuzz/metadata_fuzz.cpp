// parse_core_metadata and parse_wheel_file on arbitrary bytes. Besides not crashing: accepted
// metadata has its required fields; line endings do not matter (CRLF, a lone CR and LF all end a
// line, as in Python's email parser, which pip uses); and the header block ends at the first
// empty line (appending a body that looks like more headers changes nothing).

#include <cstdint>
#include <string>

#include "fuzz_check.hpp"
#include "wheelforge/core/metadata.hpp"

namespace {

// CRLF and lone CRs as LF.
std::string to_lf(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\r') {
      out.push_back(s[i]);
    } else if (i + 1 == s.size() || s[i + 1] != '\n') {
      out.push_back('\n');
    }
  }
  return out;
}

std::string to_crlf(std::string_view s) {
  std::string out;
  out.reserve(s.size() * 2);
  for (const char c : s) {
    if (c == '\n') out.push_back('\r');
    out.push_back(c);
  }
  return out;
}

bool same(const wf::core::CoreMetadata& a, const wf::core::CoreMetadata& b) {
  return a.metadata_version == b.metadata_version && a.name == b.name && a.version == b.version &&
         a.requires_python == b.requires_python && a.summary == b.summary &&
         a.requires_dist == b.requires_dist;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input = wf::fuzz::as_text(data, size);
  const std::string lf = to_lf(input);
  const std::string crlf = to_crlf(lf);
  const std::string with_body = std::string(input) + "\n\nName: other\nVersion: 9\nTag: x\n";

  const auto meta = wf::core::parse_core_metadata(input);
  if (meta) {
    WF_FUZZ_CHECK(!meta->metadata_version.empty());
    WF_FUZZ_CHECK(!meta->name.empty());
    WF_FUZZ_CHECK(!meta->version.empty());
  } else {
    WF_FUZZ_CHECK(meta.error().code == wf::Errc::invalid);
  }
  for (const std::string& variant : {lf, crlf, with_body}) {
    const auto other = wf::core::parse_core_metadata(variant);
    WF_FUZZ_CHECK(meta.ok() == other.ok());
    if (meta) WF_FUZZ_CHECK(same(*meta, *other));
  }

  const auto tags = wf::core::parse_wheel_file(input);
  if (!tags) WF_FUZZ_CHECK(tags.error().code == wf::Errc::invalid);
  for (const std::string& variant : {lf, crlf, with_body}) {
    const auto other = wf::core::parse_wheel_file(variant);
    WF_FUZZ_CHECK(tags.ok() == other.ok());
    if (tags) WF_FUZZ_CHECK(*tags == *other);
  }
  return 0;
}
