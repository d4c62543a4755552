// Token lifecycle: expiry and look-back times, last-use recording, yank rights.

#include <ctime>
#include <string>

#include "wheelforge/auth/tokens.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::auth {
namespace {

constexpr Micros kSecond = 1'000'000;

// "90d", "12h", "30m", "2w", or days alone ("90"): the length in microseconds; nullopt when
// `text` is not a duration.
std::optional<Micros> parse_duration(std::string_view text) {
  if (text.empty()) return std::nullopt;
  Micros unit = 86400 * kSecond;
  std::string_view digits = text;
  switch (text.back()) {
    case 'w':
      unit = 7 * 86400 * kSecond;
      digits.remove_suffix(1);
      break;
    case 'd':
      digits.remove_suffix(1);
      break;
    case 'h':
      unit = 3600 * kSecond;
      digits.remove_suffix(1);
      break;
    case 'm':
      unit = 60 * kSecond;
      digits.remove_suffix(1);
      break;
    default:
      break;
  }
  const auto n = parse_u64(digits);
  // Up to about 100 years, so that the product stays far from overflowing.
  if (!n || *n > static_cast<std::uint64_t>(100LL * 366 * 86400 * kSecond / unit)) {
    return std::nullopt;
  }
  return static_cast<Micros>(*n) * unit;
}

// "YYYY-MM-DD", "YYYY-MM-DDTHH:MM[:SS][Z]" (UTC); nullopt for anything else.
std::optional<Micros> parse_utc(std::string_view text) {
  if (!text.empty() && (text.back() == 'Z' || text.back() == 'z')) text.remove_suffix(1);
  const auto number = [&](std::size_t pos, std::size_t len) -> std::optional<int> {
    if (pos + len > text.size()) return std::nullopt;
    const auto n = parse_u64(text.substr(pos, len));
    if (!n) return std::nullopt;
    return static_cast<int>(*n);
  };
  if (text.size() < 10 || text[4] != '-' || text[7] != '-') return std::nullopt;
  std::tm tm{};
  const auto year = number(0, 4);
  const auto month = number(5, 2);
  const auto day = number(8, 2);
  if (!year || !month || !day) return std::nullopt;
  int hour = 0;
  int minute = 0;
  int second = 0;
  if (text.size() > 10) {
    if ((text[10] != 'T' && text[10] != ' ') || (text.size() != 16 && text.size() != 19) ||
        text[13] != ':' || (text.size() == 19 && text[16] != ':')) {
      return std::nullopt;
    }
    const auto h = number(11, 2);
    const auto m = number(14, 2);
    const auto s = text.size() == 19 ? number(17, 2) : std::optional<int>(0);
    if (!h || !m || !s || *h > 23 || *m > 59 || *s > 59) return std::nullopt;
    hour = *h;
    minute = *m;
    second = *s;
  }
  if (*year < 1970 || *month < 1 || *month > 12 || *day < 1 || *day > 31) return std::nullopt;
  tm.tm_year = *year - 1900;
  tm.tm_mon = *month - 1;
  tm.tm_mday = *day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  tm.tm_sec = second;
  const std::time_t t = ::timegm(&tm);
  // timegm normalizes 2027-02-30 into March: refuse dates that do not exist.
  if (t == static_cast<std::time_t>(-1) || tm.tm_mday != *day || tm.tm_mon != *month - 1) {
    return std::nullopt;
  }
  return static_cast<Micros>(t) * kSecond;
}

constexpr const char* kTimeForms =
    "a duration such as 90d, 12h, 30m or 2w, or a UTC date or time such as 2027-01-31 or "
    "2027-01-31T12:00:00Z";

}  // namespace

Result<Micros> parse_expiry(std::string_view text, Micros now) {
  const std::string shown = sanitize_for_log(text, 60);
  if (const auto d = parse_duration(text)) {
    if (*d == 0)
      return make_error(Errc::invalid, "expiry '" + shown + "' is zero: no token would work");
    return now + *d;
  }
  if (const auto t = parse_utc(text)) {
    if (*t <= now) {
      return make_error(Errc::invalid, "expiry '" + shown + "' is in the past");
    }
    return *t;
  }
  return make_error(Errc::invalid,
                    "invalid expiry '" + shown + "': use " + std::string(kTimeForms));
}

Result<Micros> parse_since(std::string_view text, Micros now) {
  if (const auto d = parse_duration(text)) return now - *d;
  if (const auto t = parse_utc(text)) return *t;
  return make_error(Errc::invalid, "invalid time '" + sanitize_for_log(text, 60) + "': use " +
                                       std::string(kTimeForms));
}

bool may_yank(const catalog::TokenRecord& token, std::string_view project,
              const std::optional<core::ProjectClaim>& claim) {
  if (token.scope == catalog::Scope::admin) return true;
  if (token.scope != catalog::Scope::upload) return false;
  if (token.project) return *token.project == project;
  return claim && claim->kind == core::ClaimKind::token && claim->token_id == token.id;
}

Status UseRecorder::flush(const TokenIndex& index, catalog::Catalog& catalog, Micros now, Due due) {
  for (const auto& [id, at] : index.uses()) {
    Micros& p = pending_[id];
    if (at > p) p = at;
  }
  std::vector<std::pair<std::int64_t, Micros>> writes;
  for (auto it = pending_.begin(); it != pending_.end();) {
    const auto w = written_.find(it->first);
    if (w != written_.end() && it->second <= w->second.used) {
      it = pending_.erase(it);  // nothing newer than what is written
      continue;
    }
    if (w == written_.end() || now - w->second.at >= interval_ || due == Due::all) {
      writes.emplace_back(*it);
    }
    ++it;
  }
  if (writes.empty()) return ok_status();
  if (auto st = catalog.record_token_uses(writes); !st) return st;
  for (const auto& [id, at] : writes) {
    written_[id] = Written{at, now};
    pending_.erase(id);
  }
  return ok_status();
}

}  // namespace wf::auth
