#pragma once
// Checks shared by the wheel and sdist readers: member names and a bounded problem list.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "wheelforge/archive/reader.hpp"
#include "wheelforge/util/result.hpp"

namespace wf::archive {

/// An `invalid` error: the archive is not what it claims to be.
inline Error invalid(std::string message) {
  return make_error(Errc::invalid, std::move(message));
}

/// A wf::Problems that keeps at most `cap` messages and counts the rest, so that an archive
/// with a hundred thousand bad members yields a readable error.
class CappedProblems {
 public:
  explicit CappedProblems(std::size_t cap = 20) : cap_(cap) {}
  void add(std::string problem);
  [[nodiscard]] bool empty() const { return problems_.empty(); }
  /// Every kept problem joined with "; ", plus "and N more problems" when some were dropped.
  [[nodiscard]] Error to_error() const;

 private:
  std::size_t cap_;
  std::size_t dropped_ = 0;
  Problems problems_;
};

/// Quotes an archive-supplied name for an error message (control characters replaced).
[[nodiscard]] std::string quote_name(std::string_view name);

/// Adds a problem for each rule `name` breaks: empty, absolute (leading '/' or a drive
/// letter), a backslash, a control character, a '.', '..' or empty path component (a single
/// trailing '/' marks a directory and is allowed). Returns true when the name is clean.
bool check_member_name(std::string_view name, CappedProblems& problems);

/// Whether a total of member sizes is final (a wheel's central directory) or the part seen so
/// far while streaming (an sdist).
enum class Total { complete, running };

/// Why an archive of `archive_size` bytes whose members declare `inflated` bytes in all breaks
/// limits.max_inflated_bytes or limits.max_compression_ratio, or nullopt. `what` names the
/// archive ("the wheel"); the message names the limit and its setting.
[[nodiscard]] std::optional<std::string> inflated_size_problem(std::string_view what,
                                                               std::uint64_t inflated,
                                                               std::uint64_t archive_size,
                                                               const Limits& limits, Total total);

/// The message for an archive with more members than limits.max_members; `count` when known.
[[nodiscard]] std::string too_many_members(std::optional<std::uint64_t> count,
                                           const Limits& limits);

/// The first path component of a clean member name ("a/b/c" -> "a", "a/" -> "a").
[[nodiscard]] std::string_view top_component(std::string_view name);

}  // namespace wf::archive
