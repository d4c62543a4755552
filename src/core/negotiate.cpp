#include "wheelforge/core/negotiate.hpp"

#include <array>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "wheelforge/util/strings.hpp"

namespace wf::core {
namespace {

constexpr std::string_view kTextHtml = "text/html";
constexpr std::string_view kHtmlV1 = "application/vnd.pypi.simple.v1+html";
constexpr std::string_view kJsonV1 = "application/vnd.pypi.simple.v1+json";
constexpr std::string_view kHtmlLatest = "application/vnd.pypi.simple.latest+html";
constexpr std::string_view kJsonLatest = "application/vnd.pypi.simple.latest+json";

struct Offer {
  PageFormat format;
  std::array<std::string_view, 2> names;  // second is empty when the format has no alias
  int explicit_rank;                      // preference among explicit matches, higher wins
  int wildcard_rank;                      // preference among wildcard-only matches
};

constexpr std::array<Offer, 3> kOffers{{
    {PageFormat::json_v1, {kJsonV1, kJsonLatest}, 3, 2},
    {PageFormat::html_v1, {kHtmlV1, kHtmlLatest}, 2, 1},
    {PageFormat::html_legacy, {kTextHtml, {}}, 1, 3},
}};

// q-values are kept in thousandths: they have at most three decimals (docs/formats.md,
// "Media-type negotiation").
constexpr int kQMax = 1000;

enum class Specificity { any = 0, type = 1, exact = 2 };

struct MediaRange {
  std::string type;     // lower-case, "*" for a wildcard
  std::string subtype;  // lower-case, "*" for a wildcard
  int params = 0;       // parameters other than q; more parameters are more specific
  int q = kQMax;
};

bool is_tchar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool is_token(std::string_view s) {
  if (s.empty()) return false;
  for (const char c : s) {
    if (!is_tchar(c)) return false;
  }
  return true;
}

// Splits on `sep` outside quoted strings (a parameter value may quote a ',' or ';').
std::vector<std::string_view> split_unquoted(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  bool quoted = false;
  std::size_t start = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (quoted && s[i] == '\\') {
      ++i;
    } else if (s[i] == '"') {
      quoted = !quoted;
    } else if (!quoted && s[i] == sep) {
      parts.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  }
  parts.push_back(s.substr(start));
  return parts;
}

// qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] ), as thousandths.
std::optional<int> parse_qvalue(std::string_view s) {
  if (s.empty() || (s[0] != '0' && s[0] != '1')) return std::nullopt;
  int value = s[0] == '1' ? kQMax : 0;
  if (s.size() == 1) return value;
  if (s[1] != '.' || s.size() > 5) return std::nullopt;
  int scale = 100;
  for (const char c : s.substr(2)) {
    if (c < '0' || c > '9') return std::nullopt;
    value += (c - '0') * scale;
    scale /= 10;
  }
  if (value > kQMax) return std::nullopt;
  return value;
}

// One element of the Accept list; nullopt when it is malformed. A malformed element says
// nothing reliable about what the client wants, so it is ignored rather than guessed at.
std::optional<MediaRange> parse_media_range(std::string_view element) {
  const auto pieces = split_unquoted(element, ';');
  const std::string_view range = trim(pieces[0]);
  const auto slash = range.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  MediaRange out;
  out.type = to_lower(range.substr(0, slash));
  out.subtype = to_lower(range.substr(slash + 1));
  if (!is_token(out.type) || !is_token(out.subtype)) return std::nullopt;
  if (out.type == "*" && out.subtype != "*") return std::nullopt;
  for (std::size_t i = 1; i < pieces.size(); ++i) {
    const std::string_view param = trim(pieces[i]);
    const auto eq = param.find('=');
    const std::string_view name = trim(param.substr(0, eq));
    if (iequals(name, "q")) {
      if (eq == std::string_view::npos) return std::nullopt;
      const auto q = parse_qvalue(trim(param.substr(eq + 1)));
      if (!q) return std::nullopt;
      out.q = *q;
      // Anything after the weight is an accept-extension, not a media parameter
      // (docs/formats.md, "Media-type negotiation").
      break;
    }
    if (!param.empty()) ++out.params;
  }
  return out;
}

std::optional<Specificity> match(const MediaRange& range, std::string_view offered) {
  const auto slash = offered.find('/');
  const std::string_view type = offered.substr(0, slash);
  const std::string_view subtype = offered.substr(slash + 1);
  if (range.type == "*") return Specificity::any;
  if (range.type != type) return std::nullopt;
  if (range.subtype == "*") return Specificity::type;
  if (range.subtype != subtype) return std::nullopt;
  return Specificity::exact;
}

struct Weight {
  int q = 0;
  bool is_explicit = false;
};

// The most specific range that matches decides an offer's q (docs/formats.md, "Media-type
// negotiation"). Among equally specific ranges (repeats, or the v1 name and its "latest" alias)
// the highest q wins.
std::optional<Weight> weigh(const Offer& offer, const std::vector<MediaRange>& ranges) {
  std::optional<std::pair<int, int>> best_specificity;  // (specificity, params)
  Weight weight;
  for (const auto& range : ranges) {
    for (const auto name : offer.names) {
      if (name.empty()) continue;
      const auto specificity = match(range, name);
      if (!specificity) continue;
      const std::pair<int, int> key{static_cast<int>(*specificity), range.params};
      if (!best_specificity || key > *best_specificity) {
        best_specificity = key;
        weight = Weight{range.q, *specificity == Specificity::exact};
      } else if (key == *best_specificity && range.q > weight.q) {
        weight.q = range.q;
      }
    }
  }
  if (!best_specificity) return std::nullopt;
  return weight;
}

std::string offered_list() {
  return std::string(kTextHtml) + ", " + std::string(kHtmlV1) + ", " + std::string(kJsonV1);
}

}  // namespace

std::string_view content_type(PageFormat format) {
  switch (format) {
    case PageFormat::html_legacy:
      return "text/html; charset=utf-8";
    case PageFormat::html_v1:
      return kHtmlV1;
    case PageFormat::json_v1:
      return kJsonV1;
  }
  return "text/html; charset=utf-8";
}

Result<PageFormat> negotiate(std::string_view accept, std::string_view format_query) {
  if (!format_query.empty()) {
    for (const auto& offer : kOffers) {
      for (const auto name : offer.names) {
        if (!name.empty() && iequals(format_query, name)) return offer.format;
      }
    }
    return make_error(Errc::not_acceptable,
                      "format \"" + sanitize_for_log(format_query, 100) +
                          "\" is not offered; use " + std::string(kTextHtml) + ", " +
                          std::string(kHtmlV1) + ", " + std::string(kJsonV1) + ", " +
                          std::string(kHtmlLatest) + " or " + std::string(kJsonLatest));
  }

  std::vector<MediaRange> ranges;
  for (const auto element : split_unquoted(accept, ',')) {
    if (trim(element).empty()) continue;
    if (auto range = parse_media_range(element)) ranges.push_back(std::move(*range));
  }
  // No usable Accept counts as */*, which is answered text/html (docs/packaging.md, "Content
  // negotiation").
  if (ranges.empty()) return PageFormat::html_legacy;

  std::optional<PageFormat> chosen;
  std::tuple<int, bool, int> chosen_key{};
  for (const auto& offer : kOffers) {
    const auto weight = weigh(offer, ranges);
    if (!weight || weight->q == 0) continue;
    const std::tuple<int, bool, int> key{
        weight->q, weight->is_explicit,
        weight->is_explicit ? offer.explicit_rank : offer.wildcard_rank};
    if (!chosen || key > chosen_key) {
      chosen = offer.format;
      chosen_key = key;
    }
  }
  if (!chosen) {
    return make_error(Errc::not_acceptable,
                      "Accept \"" + sanitize_for_log(accept, 200) +
                          "\" allows none of the offered types: " + offered_list());
  }
  return *chosen;
}

}  // namespace wf::core
