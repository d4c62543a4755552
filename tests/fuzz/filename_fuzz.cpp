// parse_dist_filename on arbitrary bytes: no crash, and an accepted name is consistent with
// the rules the contract states; its canonical key (canonical_file_key) is a fixed point.

#include <cstdint>

#include "fuzz_check.hpp"
#include "wheelforge/core/filename.hpp"
#include "wheelforge/core/name.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input = wf::fuzz::as_text(data, size);
  const auto parsed = wf::core::parse_dist_filename(input);
  if (!parsed) {
    WF_FUZZ_CHECK(!parsed.error().message.empty());
    return 0;
  }
  const auto& f = *parsed;
  WF_FUZZ_CHECK(f.filename == input);
  WF_FUZZ_CHECK(input.size() <= wf::core::kMaxFilenameLength);
  WF_FUZZ_CHECK(input.find('/') == std::string_view::npos);
  WF_FUZZ_CHECK(input.find('\\') == std::string_view::npos);
  WF_FUZZ_CHECK(input.find("..") == std::string_view::npos);
  for (const char c : input) {
    const auto u = static_cast<unsigned char>(c);
    WF_FUZZ_CHECK(u >= 0x20 && u < 0x7F);
  }
  WF_FUZZ_CHECK(wf::core::is_valid_project_name(f.name));
  WF_FUZZ_CHECK(f.normalized_name == wf::core::normalize_name(f.name));
  const auto version = wf::core::Version::parse(f.version_text);
  WF_FUZZ_CHECK(version && *version == f.version);
  if (f.kind == wf::core::DistKind::wheel) {
    WF_FUZZ_CHECK(input.ends_with(".whl"));
    WF_FUZZ_CHECK(!f.tags.python_tags().empty());
    WF_FUZZ_CHECK(!f.tags.abi_tags().empty());
    WF_FUZZ_CHECK(!f.tags.platform_tags().empty());
    for (const auto& tag : f.tags.platform_tags()) WF_FUZZ_CHECK(!tag.empty());
  } else {
    WF_FUZZ_CHECK(input.ends_with(".tar.gz"));
  }
  // A key that is itself a valid file name (canonical versions can be longer than the
  // spelling, "1-1" -> "1.post1", and pass the length limit) keys to itself.
  const std::string key = wf::core::canonical_file_key(f);
  WF_FUZZ_CHECK(wf::core::canonical_file_key(std::string_view(input)) == key);
  if (const auto again = wf::core::parse_dist_filename(key)) {
    WF_FUZZ_CHECK(again->kind == f.kind);
    WF_FUZZ_CHECK(again->version == f.version);
    WF_FUZZ_CHECK(wf::core::canonical_file_key(*again) == key);
  }
  return 0;
}
