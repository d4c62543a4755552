#include "wheelforge/core/version.hpp"

#include <algorithm>
#include <array>

#include "core/label_scan.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::core {
namespace {

using label_scan::is_digit;
bool is_alpha(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
bool is_separator(char c) {
  return c == '-' || c == '_' || c == '.';
}
// Python's \s over ASCII: surrounding whitespace is tolerated (docs/packaging.md, "Versions").
bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}
char lower(char c) {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

struct PreLabel {
  std::string_view spelling;
  Version::PreKind kind;
};

// Longer spellings come first: a shorter one that shares a prefix ("a" of "alpha") could
// only leave letters behind that nothing after a pre-release label accepts.
constexpr std::array<PreLabel, 8> kPreLabels{{
    {"alpha", Version::PreKind::a},
    {"a", Version::PreKind::a},
    {"beta", Version::PreKind::b},
    {"b", Version::PreKind::b},
    {"preview", Version::PreKind::rc},
    {"pre", Version::PreKind::rc},
    {"rc", Version::PreKind::rc},
    {"c", Version::PreKind::rc},
}};
constexpr std::array<std::string_view, 3> kPostLabels{"post", "rev", "r"};

// A cursor over the version text. Every optional part of the grammar is tried at a saved
// position and the cursor rewinds when the part does not match, which gives the same result as
// the specification's backtracking regular expression (docs/packaging.md, "Versions").
class Parser {
 public:
  explicit Parser(std::string_view text) : s_(text) {}

  [[nodiscard]] bool at_end() const { return pos_ == s_.size(); }
  [[nodiscard]] std::size_t pos() const { return pos_; }
  void rewind(std::size_t pos) { pos_ = pos; }
  [[nodiscard]] bool overflowed() const { return overflow_; }

  [[nodiscard]] bool peek_is(bool (*pred)(char), std::size_t ahead = 0) const {
    return pos_ + ahead < s_.size() && pred(s_[pos_ + ahead]);
  }

  bool consume(char c) {
    if (pos_ < s_.size() && lower(s_[pos_]) == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  void skip_optional_separator() {
    if (peek_is(is_separator)) ++pos_;
  }

  bool consume_word(std::string_view word) {
    if (s_.size() - pos_ < word.size()) return false;
    for (std::size_t i = 0; i < word.size(); ++i) {
      if (lower(s_[pos_ + i]) != word[i]) return false;
    }
    pos_ += word.size();
    return true;
  }

  /// A run of digits as a number; nullopt when there are no digits here. Leading zeros are
  /// allowed (they carry no meaning); a value beyond uint64 marks the parse as failed.
  std::optional<std::uint64_t> number() {
    if (!peek_is(is_digit)) return std::nullopt;
    std::uint64_t value = 0;
    while (peek_is(is_digit)) {
      const auto digit = static_cast<std::uint64_t>(s_[pos_] - '0');
      if (value > (UINT64_MAX - digit) / 10) overflow_ = true;
      value = value * 10 + digit;
      ++pos_;
    }
    return value;
  }

  /// An implicit number: a label without digits means 0.
  std::uint64_t number_or_zero() { return number().value_or(0); }

  [[nodiscard]] std::string_view rest() const { return s_.substr(pos_); }
  void skip_rest() { pos_ = s_.size(); }

 private:
  std::string_view s_;
  std::size_t pos_ = 0;
  bool overflow_ = false;
};

std::optional<Version::PreKind> parse_pre_label(Parser& p) {
  for (const auto& label : kPreLabels) {
    if (p.consume_word(label.spelling)) return label.kind;
  }
  return std::nullopt;
}

bool parse_post_label(Parser& p) {
  return std::any_of(kPostLabels.begin(), kPostLabels.end(),
                     [&](std::string_view label) { return p.consume_word(label); });
}

std::string_view pre_spelling(Version::PreKind kind) {
  switch (kind) {
    case Version::PreKind::a:
      return "a";
    case Version::PreKind::b:
      return "b";
    case Version::PreKind::rc:
      return "rc";
  }
  return "rc";
}

std::strong_ordering compare_local(const std::vector<Version::LocalSegment>& a,
                                   const std::vector<Version::LocalSegment>& b) {
  const std::size_t n = std::min(a.size(), b.size());
  for (std::size_t i = 0; i < n; ++i) {
    const auto* an = std::get_if<std::uint64_t>(&a[i]);
    const auto* bn = std::get_if<std::uint64_t>(&b[i]);
    if (an != nullptr && bn != nullptr) {
      if (const auto c = *an <=> *bn; std::is_neq(c)) return c;
    } else if (an == nullptr && bn == nullptr) {
      if (const auto c = std::get<std::string>(a[i]) <=> std::get<std::string>(b[i]);
          std::is_neq(c)) {
        return c;
      }
    } else {
      // Numeric segments sort above alphanumeric ones (docs/packaging.md, "Local version labels").
      return an != nullptr ? std::strong_ordering::greater : std::strong_ordering::less;
    }
  }
  return a.size() <=> b.size();
}

// Local labels separate segments with any of '-', '_' and '.'; empty segments are kept so
// that the caller can reject them.
std::vector<std::string_view> split_local(std::string_view local) {
  std::vector<std::string_view> segments;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= local.size(); ++i) {
    if (i == local.size() || is_separator(local[i])) {
      segments.push_back(local.substr(start, i - start));
      start = i + 1;
    }
  }
  return segments;
}

// The three positions a pre-release key can take relative to real pre-release labels.
enum class PreRank { dev_only = 0, pre = 1, none = 2 };

PreRank pre_rank(const Version& v) {
  if (v.pre().has_value()) return PreRank::pre;
  // A bare dev release (1.0.dev1) sorts before every pre-release of the same release.
  if (!v.post().has_value() && v.dev().has_value()) return PreRank::dev_only;
  return PreRank::none;
}

}  // namespace

Result<Version> Version::parse(std::string_view text) {
  const auto invalid = [&](std::string_view why) {
    std::string message = "\"" + sanitize_for_log(text, 100) + "\" is not a valid PEP 440 version";
    if (!why.empty()) {
      message += " (";
      message += why;
      message += ")";
    }
    return make_error(Errc::invalid, std::move(message));
  };

  std::string_view body = text;
  while (!body.empty() && is_space(body.front())) body.remove_prefix(1);
  while (!body.empty() && is_space(body.back())) body.remove_suffix(1);
  Parser p(body);
  Version v;

  p.consume('v');

  // Epoch: digits followed by '!'; otherwise the digits start the release.
  const std::size_t epoch_start = p.pos();
  if (const auto epoch = p.number(); epoch && p.consume('!')) {
    v.epoch_ = *epoch;
  } else {
    p.rewind(epoch_start);
  }

  do {
    const auto part = p.number();
    if (!part) return invalid("");
    v.release_.push_back(*part);
  } while (p.peek_is(is_digit, 1) && p.consume('.'));

  const std::size_t pre_start = p.pos();
  p.skip_optional_separator();
  if (const auto kind = parse_pre_label(p)) {
    p.skip_optional_separator();
    v.pre_ = std::make_pair(*kind, p.number_or_zero());
  } else {
    p.rewind(pre_start);
  }

  const std::size_t post_start = p.pos();
  if (p.peek_is([](char c) { return c == '-'; }) && p.peek_is(is_digit, 1)) {
    p.consume('-');
    v.post_ = p.number_or_zero();
  } else {
    p.skip_optional_separator();
    if (parse_post_label(p)) {
      p.skip_optional_separator();
      v.post_ = p.number_or_zero();
    } else {
      p.rewind(post_start);
    }
  }

  const std::size_t dev_start = p.pos();
  p.skip_optional_separator();
  if (p.consume_word("dev")) {
    p.skip_optional_separator();
    v.dev_ = p.number_or_zero();
  } else {
    p.rewind(dev_start);
  }

  if (p.consume('+')) {
    const std::string_view local = p.rest();
    p.skip_rest();
    for (const auto segment : split_local(local)) {
      if (segment.empty()) return invalid("empty local version segment");
      const bool numeric = std::all_of(segment.begin(), segment.end(), is_digit);
      const bool alnum = std::all_of(segment.begin(), segment.end(),
                                     [](char c) { return is_digit(c) || is_alpha(c); });
      if (!alnum) return invalid("local version segments are letters and digits");
      if (numeric) {
        Parser digits(segment);
        const auto value = digits.number();
        if (digits.overflowed()) return invalid("a number is too large");
        v.local_.emplace_back(*value);
      } else {
        v.local_.emplace_back(to_lower(segment));
      }
    }
  }

  if (p.overflowed()) return invalid("a number is too large");
  if (!p.at_end()) return invalid("");
  return v;
}

std::string Version::public_str() const {
  return public_str(release_.size());
}

std::string Version::public_str(std::size_t release_segments) const {
  std::string out;
  if (epoch_ != 0) out += std::to_string(epoch_) + "!";
  for (std::size_t i = 0; i < release_segments && i < release_.size(); ++i) {
    if (i != 0) out.push_back('.');
    out += std::to_string(release_[i]);
  }
  if (pre_) {
    out += pre_spelling(pre_->first);
    out += std::to_string(pre_->second);
  }
  if (post_) out += ".post" + std::to_string(*post_);
  if (dev_) out += ".dev" + std::to_string(*dev_);
  return out;
}

std::string Version::local_str() const {
  std::string out;
  for (std::size_t i = 0; i < local_.size(); ++i) {
    if (i != 0) out.push_back('.');
    if (const auto* n = std::get_if<std::uint64_t>(&local_[i])) {
      out += std::to_string(*n);
    } else {
      out += std::get<std::string>(local_[i]);
    }
  }
  return out;
}

std::string Version::str() const {
  std::string out = public_str();
  if (!local_.empty()) out += "+" + local_str();
  return out;
}

std::string Version::canonical_str() const {
  std::size_t segments = release_.size();
  while (segments > 1 && release_[segments - 1] == 0) --segments;
  std::string out = public_str(segments);
  if (!local_.empty()) out += "+" + local_str();
  return out;
}

std::strong_ordering operator<=>(const Version& a, const Version& b) {
  if (const auto c = a.epoch_ <=> b.epoch_; std::is_neq(c)) return c;

  // Trailing zeros carry no meaning (1.0 == 1.0.0), so a missing part compares as 0.
  const std::size_t n = std::max(a.release_.size(), b.release_.size());
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t ai = i < a.release_.size() ? a.release_[i] : 0;
    const std::uint64_t bi = i < b.release_.size() ? b.release_[i] : 0;
    if (const auto c = ai <=> bi; std::is_neq(c)) return c;
  }

  const PreRank ar = pre_rank(a);
  const PreRank br = pre_rank(b);
  if (const auto c = static_cast<int>(ar) <=> static_cast<int>(br); std::is_neq(c)) return c;
  if (ar == PreRank::pre) {
    if (const auto c = a.pre_->first <=> b.pre_->first; std::is_neq(c)) return c;
    if (const auto c = a.pre_->second <=> b.pre_->second; std::is_neq(c)) return c;
  }

  // No post release sorts before any post release.
  if (const auto c = a.post_.has_value() <=> b.post_.has_value(); std::is_neq(c)) return c;
  if (a.post_) {
    if (const auto c = *a.post_ <=> *b.post_; std::is_neq(c)) return c;
  }

  // A dev release sorts before the same version without one.
  if (const auto c = b.dev_.has_value() <=> a.dev_.has_value(); std::is_neq(c)) return c;
  if (a.dev_) {
    if (const auto c = *a.dev_ <=> *b.dev_; std::is_neq(c)) return c;
  }

  // No local label sorts before any local label.
  if (const auto c = a.has_local() <=> b.has_local(); std::is_neq(c)) return c;
  return compare_local(a.local_, b.local_);
}

}  // namespace wf::core
