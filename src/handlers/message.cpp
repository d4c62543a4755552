#include "wheelforge/handlers/message.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>

#include "wheelforge/util/strings.hpp"

namespace wf::handlers {

const char* method_name(Method m) {
  switch (m) {
    case Method::get:
      return "GET";
    case Method::head:
      return "HEAD";
    case Method::put:
      return "PUT";
    case Method::post:
      return "POST";
    case Method::del:
      return "DELETE";
    case Method::other:
      return "OTHER";
  }
  return "OTHER";
}

std::string_view Request::header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (k == name) return v;
  }
  return {};
}

std::string Request::query_param(std::string_view name) const {
  return find_query_param(name).value_or("");
}

std::optional<std::string> Request::find_query_param(std::string_view name) const {
  for (const auto part : split(query, '&')) {
    const auto eq = part.find('=');
    const std::string_view key = part.substr(0, eq);
    if (key != name) continue;
    const std::string_view raw =
        eq == std::string_view::npos ? std::string_view() : part.substr(eq + 1);
    return percent_decode(raw).value_or("");
  }
  return std::nullopt;
}

std::string base_url(const Request& req) {
  std::string_view host = req.header("host");
  const bool plain =
      !host.empty() && host.size() <= 255 && std::all_of(host.begin(), host.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '.' || c == '-' ||
               c == ':' || c == '[' || c == ']';
      });
  return std::string(req.tls ? "https://" : "http://") + std::string(plain ? host : "localhost");
}

std::string_view Response::header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (iequals(k, name)) return v;
  }
  return {};
}

Result<std::pair<std::vector<std::string>, std::string>> parse_target(std::string_view target) {
  if (target.empty() || target.front() != '/') {
    return make_error(Errc::invalid, "request target must be an absolute path");
  }
  for (const char c : target) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7F) {
      return make_error(Errc::invalid, "control character in the request target");
    }
  }
  std::string query;
  if (const auto q = target.find('?'); q != std::string_view::npos) {
    query = std::string(target.substr(q + 1));
    target = target.substr(0, q);
  }
  std::vector<std::string> segments;
  for (const auto raw : split(target.substr(1), '/')) {
    auto decoded = percent_decode(raw);
    if (!decoded) return make_error(Errc::invalid, "malformed percent-escape in the request path");
    segments.push_back(std::move(*decoded));
  }
  return std::pair{std::move(segments), std::move(query)};
}

std::vector<std::pair<std::string, std::string>> parse_form(std::string_view s) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto part : split(s, '&')) {
    if (part.empty()) continue;
    const auto eq = part.find('=');
    auto decode = [](std::string_view raw) {
      std::string plus(raw);
      for (auto& c : plus) {
        if (c == '+') c = ' ';
      }
      return percent_decode(plus).value_or("");
    };
    out.emplace_back(decode(part.substr(0, eq)),
                     eq == std::string_view::npos ? std::string() : decode(part.substr(eq + 1)));
  }
  return out;
}

std::string damaged_message(std::string_view filename) {
  return sanitize_for_log(filename, 300) +
         " is damaged on this server (its stored copy failed an integrity check): the "
         "administrator must restore it from a backup, or upload the same file again";
}

int status_for(Errc code) {
  switch (code) {
    case Errc::invalid:
      return 400;
    case Errc::unauthorized:
      return 401;
    case Errc::forbidden:
      return 403;
    case Errc::not_found:
      return 404;
    case Errc::not_acceptable:
      return 406;
    case Errc::conflict:
      return 409;
    case Errc::gone:
      return 410;
    case Errc::too_large:
      return 413;
    case Errc::method_not_allowed:
      return 405;
    case Errc::uri_too_long:
      return 414;
    case Errc::range_not_satisfiable:
      return 416;
    case Errc::header_too_large:
      return 431;
    case Errc::too_slow:
      return 408;
    case Errc::storage_full:
      return 507;
    case Errc::upstream:
      return 502;
    case Errc::unavailable:
      return 503;
    case Errc::io:
    case Errc::internal:
      return 500;
  }
  return 500;
}

Result<std::optional<std::uint64_t>> requested_position(const Request& req) {
  std::string value(req.header(kMinPositionHeader));
  if (value.empty()) {
    auto param = req.find_query_param("min_position");
    if (!param) return std::optional<std::uint64_t>();
    value = *param;
  }
  std::uint64_t n = 0;
  const auto* end = value.data() + value.size();
  const auto [ptr, ec] = std::from_chars(value.data(), end, n);
  if (value.empty() || ec != std::errc() || ptr != end) {
    return make_error(Errc::invalid,
                      "X-Wheelforge-Min-Position: expected a catalog position"
                      " (a decimal number, as X-Wheelforge-Position gives it)");
  }
  return std::optional<std::uint64_t>(n);
}

Response position_lag_response(std::uint64_t applied, std::uint64_t wanted) {
  Response r = error_response(make_error(
      Errc::unavailable, "this replica has applied catalog position " + std::to_string(applied) +
                             ", not yet " + std::to_string(wanted) + " (" +
                             std::to_string(wanted - std::min(wanted, applied)) +
                             " behind); try again"));
  r.set("Retry-After", "1");
  return r;
}

Response error_response(const Error& error) {
  Response r;
  r.status = status_for(error.code);
  // A bug says nothing to the client (it is logged in full). A storage fault says that it is
  // the server's, so that nobody goes looking for a problem in their file.
  std::string message;
  switch (error.code) {
    case Errc::internal:
      message = "internal server error";
      break;
    case Errc::io:
      message = "server storage error (not a problem with the request): " + error.message +
                "; try again later or tell the index's administrator";
      break;
    default:
      message = error.message;
  }
  r.reason = sanitize_for_log(message, 200);
  r.set("Content-Type", "text/plain; charset=utf-8");
  if (error.code == Errc::unauthorized) r.set("WWW-Authenticate", "Basic realm=\"wheelforge\"");
  r.body = message + "\n";
  return r;
}

Response method_not_allowed(std::string_view allow) {
  Response r = error_response(make_error(
      Errc::method_not_allowed, "method not allowed: this address answers " + std::string(allow)));
  r.set("Allow", std::string(allow));
  return r;
}

Error body_too_large(std::string_view what, std::optional<std::uint64_t> size,
                     std::uint64_t limit) {
  std::string message(what);
  if (size) message += " of " + std::to_string(*size) + " bytes";
  message += " exceeds the limit of " + std::to_string(limit) + " bytes";
  return make_error(Errc::too_large, std::move(message));
}

}  // namespace wf::handlers
