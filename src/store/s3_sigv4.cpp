#include "store/s3_sigv4.hpp"

#include <algorithm>
#include <array>
#include <map>

#include "wheelforge/crypto/digest.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::store::sigv4 {

namespace {

constexpr std::string_view kAlgorithm = "AWS4-HMAC-SHA256";

bool unreserved(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_' || c == '.' || c == '~';
}

/// A header value as SigV4 canonicalizes it: trimmed, each run of spaces one space.
std::string canonical_value(std::string_view value) {
  std::string out;
  bool space = false;
  for (const char c : value) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      space = !out.empty();
      continue;
    }
    if (space) out += ' ';
    space = false;
    out += c;
  }
  return out;
}

/// Encoded "k=v" pairs, sorted by key then value, joined with '&'.
std::string canonical_query(const std::vector<Pair>& query) {
  std::vector<Pair> encoded;
  encoded.reserve(query.size());
  for (const auto& [k, v] : query) encoded.emplace_back(uri_encode(k, false), uri_encode(v, false));
  std::sort(encoded.begin(), encoded.end());
  std::string out;
  for (const auto& [k, v] : encoded) {
    if (!out.empty()) out += '&';
    out += k;
    out += '=';
    out += v;
  }
  return out;
}

struct Canonical {
  std::string request;
  std::string signed_headers;
};

/// The canonical request of `method` `path` with these (encoded-to-be) parameters and headers.
Canonical canonical_request(std::string_view method, std::string_view path,
                            const std::vector<Pair>& query, const std::vector<Pair>& headers,
                            std::string_view payload_hash) {
  std::map<std::string, std::string> lowered;
  for (const auto& [name, value] : headers) {
    auto& slot = lowered[to_lower(name)];
    if (!slot.empty()) slot += ',';
    slot += canonical_value(value);
  }
  Canonical c;
  std::string block;
  for (const auto& [name, value] : lowered) {
    block += name + ':' + value + '\n';
    if (!c.signed_headers.empty()) c.signed_headers += ';';
    c.signed_headers += name;
  }
  c.request = std::string(method) + '\n' + uri_encode(path, true) + '\n' + canonical_query(query) +
              '\n' + block + '\n' + c.signed_headers + '\n' + std::string(payload_hash);
  return c;
}

std::string scope(std::string_view date, std::string_view region) {
  return std::string(date) + '/' + std::string(region) + "/s3/aws4_request";
}

std::string string_to_sign(std::string_view timestamp, std::string_view scope_text,
                           std::string_view canonical) {
  return std::string(kAlgorithm) + '\n' + std::string(timestamp) + '\n' + std::string(scope_text) +
         '\n' + crypto::sha256_hex(canonical);
}

std::string signature(const Credentials& credentials, std::string_view date,
                      std::string_view region, std::string_view to_sign) {
  std::string key = crypto::hmac_sha256("AWS4" + credentials.secret_access_key, date);
  key = crypto::hmac_sha256(key, region);
  key = crypto::hmac_sha256(key, "s3");
  key = crypto::hmac_sha256(key, "aws4_request");
  return hex_encode(crypto::hmac_sha256(key, to_sign));
}

}  // namespace

std::string uri_encode(std::string_view s, bool keep_slash) {
  static constexpr std::array<char, 16> kHex = {'0', '1', '2', '3', '4', '5', '6', '7',
                                                '8', '9', 'A', 'B', 'C', 'D', 'E', 'F'};
  std::string out;
  out.reserve(s.size());
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (unreserved(c) || (keep_slash && c == '/')) {
      out += ch;
    } else {
      out += '%';
      out += kHex[c >> 4U];
      out += kHex[c & 15U];
    }
  }
  return out;
}

std::string amz_date(std::time_t t) {
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::array<char, 20> buf{};
  const std::size_t n = std::strftime(buf.data(), buf.size(), "%Y%m%dT%H%M%SZ", &tm);
  return std::string(buf.data(), n);
}

std::string target(const Request& request) {
  std::string out = uri_encode(request.path, true);
  char sep = '?';
  for (const auto& [k, v] : request.query) {
    out += sep;
    out += uri_encode(k, false);
    out += '=';
    out += uri_encode(v, false);
    sep = '&';
  }
  return out;
}

Signed sign(const Request& request, const Credentials& credentials, std::string_view region,
            std::time_t now) {
  const std::string timestamp = amz_date(now);
  const std::string date = timestamp.substr(0, 8);
  Signed s;
  s.headers.emplace_back("host", request.host);
  for (const auto& h : request.headers) s.headers.push_back(h);
  s.headers.emplace_back("x-amz-date", timestamp);
  s.headers.emplace_back("x-amz-content-sha256", request.payload_hash);
  if (!credentials.session_token.empty()) {
    s.headers.emplace_back("x-amz-security-token", credentials.session_token);
  }
  const Canonical c = canonical_request(request.method, request.path, request.query, s.headers,
                                        request.payload_hash);
  s.canonical_request = c.request;
  const std::string scope_text = scope(date, region);
  s.string_to_sign = string_to_sign(timestamp, scope_text, c.request);
  s.signature = signature(credentials, date, region, s.string_to_sign);
  s.authorization = std::string(kAlgorithm) + " Credential=" + credentials.access_key_id + '/' +
                    scope_text + ", SignedHeaders=" + c.signed_headers +
                    ", Signature=" + s.signature;
  s.headers.emplace_back("authorization", s.authorization);
  return s;
}

Presigned presign(std::string_view scheme, const Request& request, const Credentials& credentials,
                  std::string_view region, std::time_t now, long expires_seconds) {
  const std::string timestamp = amz_date(now);
  const std::string date = timestamp.substr(0, 8);
  const std::string scope_text = scope(date, region);
  std::vector<Pair> query = request.query;
  query.emplace_back("X-Amz-Algorithm", std::string(kAlgorithm));
  query.emplace_back("X-Amz-Credential", credentials.access_key_id + '/' + scope_text);
  query.emplace_back("X-Amz-Date", timestamp);
  query.emplace_back("X-Amz-Expires", std::to_string(expires_seconds));
  query.emplace_back("X-Amz-SignedHeaders", "host");
  if (!credentials.session_token.empty()) {
    query.emplace_back("X-Amz-Security-Token", credentials.session_token);
  }
  const Canonical c = canonical_request(request.method, request.path, query,
                                        {{"host", request.host}}, kUnsignedPayload);
  Presigned p;
  p.canonical_request = c.request;
  p.string_to_sign = string_to_sign(timestamp, scope_text, c.request);
  p.signature = signature(credentials, date, region, p.string_to_sign);
  Request with_query = request;
  with_query.query = std::move(query);
  with_query.query.emplace_back("X-Amz-Signature", p.signature);
  p.url = std::string(scheme) + "://" + request.host + target(with_query);
  return p;
}

}  // namespace wf::store::sigv4
