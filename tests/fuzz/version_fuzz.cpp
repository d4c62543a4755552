// Version::parse on arbitrary bytes. The input holds up to three versions separated by '\n'.
// Every accepted version must round-trip through its normalized form, and the ordering must be
// reflexive, antisymmetric and transitive over the versions of one input.

#include <compare>
#include <cstdint>
#include <optional>
#include <vector>

#include "fuzz_check.hpp"
#include "wheelforge/core/version.hpp"

namespace {

using wf::core::Version;

std::strong_ordering reverse(std::strong_ordering o) {
  return 0 <=> o;
}

void check_one(const Version& v) {
  const std::string s = v.str();
  const auto again = Version::parse(s);
  WF_FUZZ_CHECK(again.ok());
  WF_FUZZ_CHECK(again->str() == s);
  WF_FUZZ_CHECK((*again <=> v) == std::strong_ordering::equal);
  WF_FUZZ_CHECK((v <=> v) == std::strong_ordering::equal);
  WF_FUZZ_CHECK(v.has_local() == !v.local_str().empty());
  WF_FUZZ_CHECK(s == (v.has_local() ? v.public_str() + "+" + v.local_str() : v.public_str()));
  const auto pub = Version::parse(v.public_str());
  WF_FUZZ_CHECK(pub.ok());
  WF_FUZZ_CHECK(!pub->has_local());
  WF_FUZZ_CHECK(pub->is_prerelease() == v.is_prerelease());
  // A local label only ever sorts after the same public version.
  WF_FUZZ_CHECK((*pub <=> v) ==
                (v.has_local() ? std::strong_ordering::less : std::strong_ordering::equal));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view input = wf::fuzz::as_text(data, size);
  std::vector<Version> versions;
  for (int i = 0; i < 3; ++i) {
    const auto nl = input.find('\n');
    const auto text = input.substr(0, nl);
    auto parsed = Version::parse(text);
    if (parsed) {
      check_one(*parsed);
      versions.push_back(std::move(parsed).value());
    } else {
      WF_FUZZ_CHECK(!parsed.error().message.empty());
    }
    if (nl == std::string_view::npos) break;
    input.remove_prefix(nl + 1);
  }
  for (const auto& a : versions) {
    for (const auto& b : versions) {
      WF_FUZZ_CHECK((a <=> b) == reverse(b <=> a));
      WF_FUZZ_CHECK((a == b) == ((a <=> b) == 0));
      for (const auto& c : versions) {
        if (a <= b && b <= c) WF_FUZZ_CHECK(a <= c);
        if (a < b && b < c) WF_FUZZ_CHECK(a < c);
      }
    }
  }
  return 0;
}
