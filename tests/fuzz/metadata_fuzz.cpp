// parse_core_metadata and parse_wheel_file on arbitrary bytes. Besides not crashing: accepted
// metadata has its required fields, and line endings do not matter (an input without CR gives
// the same result with every LF turned into CRLF), and the header block ends at the first empty
// line (appending a body that looks like more headers changes nothing).

#include <cstdint>
#include <string>

#include "fuzz_check.hpp"
#include "wheelforge/core/metadata.hpp"

namespace {

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
  const bool has_cr = input.find('\r') != std::string_view::npos;
  const std::string crlf = has_cr ? std::string() : to_crlf(input);

  const auto meta = wf::core::parse_core_metadata(input);
  if (meta) {
    WF_FUZZ_CHECK(!meta->metadata_version.empty());
    WF_FUZZ_CHECK(!meta->name.empty());
    WF_FUZZ_CHECK(!meta->version.empty());
  } else {
    WF_FUZZ_CHECK(meta.error().code == wf::Errc::invalid);
  }
  if (!has_cr) {
    const auto meta2 = wf::core::parse_core_metadata(crlf);
    WF_FUZZ_CHECK(meta.ok() == meta2.ok());
    if (meta) WF_FUZZ_CHECK(same(*meta, *meta2));
  }

  const std::string with_body = std::string(input) + "\n\nName: other\nVersion: 9\nTag: x\n";
  const auto meta3 = wf::core::parse_core_metadata(with_body);
  WF_FUZZ_CHECK(meta.ok() == meta3.ok());
  if (meta) WF_FUZZ_CHECK(same(*meta, *meta3));

  const auto tags = wf::core::parse_wheel_file(input);
  if (!tags) WF_FUZZ_CHECK(tags.error().code == wf::Errc::invalid);
  if (!has_cr) {
    const auto tags2 = wf::core::parse_wheel_file(crlf);
    WF_FUZZ_CHECK(tags.ok() == tags2.ok());
    if (tags) WF_FUZZ_CHECK(*tags == *tags2);
  }
  const auto tags3 = wf::core::parse_wheel_file(with_body);
  WF_FUZZ_CHECK(tags.ok() == tags3.ok());
  if (tags) WF_FUZZ_CHECK(*tags == *tags3);
  return 0;
}
