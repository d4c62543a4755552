#pragma once
// Versions: parsing of every permitted spelling, normalization and total ordering (including
// local version labels, compared segment by segment): docs/packaging.md, "Versions" and "Local
// version labels".

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "wheelforge/util/result.hpp"

namespace wf::core {

class Version {
 public:
  enum class PreKind { a, b, rc };
  /// A local segment is a number or a lower-case alphanumeric string.
  using LocalSegment = std::variant<std::uint64_t, std::string>;

  /// Parses any permitted spelling ("1.0RC1", "v2.8.3+CU128_torch2.8", "1.0-1", ...).
  /// Fails with Errc::invalid and a message quoting the input.
  [[nodiscard]] static Result<Version> parse(std::string_view text);

  /// Normalized form, e.g. "1.0rc1.post2.dev3+cu128.torch2.8".
  [[nodiscard]] std::string str() const;
  /// Normalized form without the local label.
  [[nodiscard]] std::string public_str() const;
  /// The canonical form, by which releases are grouped (docs/packaging.md, "Versions"): str()
  /// without the trailing zero segments of the release, so that equal versions have one
  /// spelling ("1.0", "1.0.0" and "v1" give "1", "1.0.0+CU128" gives "1+cu128").
  [[nodiscard]] std::string canonical_str() const;
  /// Normalized local label ("cu128torch2.8", separators as '.'), empty when none.
  [[nodiscard]] std::string local_str() const;

  [[nodiscard]] std::uint64_t epoch() const { return epoch_; }
  [[nodiscard]] const std::vector<std::uint64_t>& release() const { return release_; }
  [[nodiscard]] const std::optional<std::pair<PreKind, std::uint64_t>>& pre() const { return pre_; }
  [[nodiscard]] const std::optional<std::uint64_t>& post() const { return post_; }
  [[nodiscard]] const std::optional<std::uint64_t>& dev() const { return dev_; }
  [[nodiscard]] const std::vector<LocalSegment>& local() const { return local_; }
  [[nodiscard]] bool has_local() const { return !local_.empty(); }
  /// Pre-release or dev release.
  [[nodiscard]] bool is_prerelease() const { return pre_.has_value() || dev_.has_value(); }

  /// The versions' order (docs/packaging.md, "Versions"). Release segments compare with
  /// trailing zeros ignored; local labels order after the same public version, numeric
  /// segments above alphanumeric ones.
  friend std::strong_ordering operator<=>(const Version& a, const Version& b);
  friend bool operator==(const Version& a, const Version& b) {
    return (a <=> b) == std::strong_ordering::equal;
  }

 private:
  /// public_str() with only the first `release_segments` segments of the release.
  [[nodiscard]] std::string public_str(std::size_t release_segments) const;

  std::uint64_t epoch_ = 0;
  std::vector<std::uint64_t> release_;
  std::optional<std::pair<PreKind, std::uint64_t>> pre_;
  std::optional<std::uint64_t> post_;
  std::optional<std::uint64_t> dev_;
  std::vector<LocalSegment> local_;
};

}  // namespace wf::core
