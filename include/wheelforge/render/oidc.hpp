#pragma once
// The JSON of trusted publishing (docs/publishing.md): what a JWT's header and payload, an
// issuer's discovery document and JWKS, and a mint request say; and the answers of
// /.well-known/pytp, /_/oidc/*, and /admin/publishers. Pure: no I/O.

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "wheelforge/catalog/catalog.hpp"
#include "wheelforge/util/result.hpp"

namespace wf::render {

struct JwtHeader {
  std::string alg;  ///< as written; "" when absent
  std::string kid;  ///< "" when absent
};

struct JwtPayload {
  /// Every claim whose value is a string, an integer or a boolean, as text.
  std::map<std::string, std::string> claims;
  std::vector<std::string> audiences;  ///< `aud`: a string or a list of them
  std::optional<std::int64_t> exp;
  std::optional<std::int64_t> nbf;
  std::optional<std::int64_t> iat;
};

/// A JWT's decoded header; Errc::invalid unless it is a JSON object.
[[nodiscard]] Result<JwtHeader> parse_jwt_header(std::string_view json);
/// A JWT's decoded payload; Errc::invalid unless it is a JSON object.
[[nodiscard]] Result<JwtPayload> parse_jwt_payload(std::string_view json);

/// One key of a JWKS, its fields as written ("" when absent; base64url for n, e, x, y).
struct Jwk {
  std::string kty;
  std::optional<std::string> kid;
  std::string use;
  std::string crv;
  std::string n;
  std::string e;
  std::string x;
  std::string y;
};
/// The keys of a JWKS document ({"keys": [...]}); entries that are not objects are skipped.
[[nodiscard]] Result<std::vector<Jwk>> parse_jwks(std::string_view json);

/// The two fields of an OIDC discovery document that matter here.
struct OidcDiscovery {
  std::string issuer;
  std::string jwks_uri;
};
[[nodiscard]] Result<OidcDiscovery> parse_oidc_discovery(std::string_view json);

/// The JWT of a mint request ({"token": "..."}); Errc::invalid for anything else.
[[nodiscard]] Result<std::string> parse_mint_request(std::string_view json);

/// {"audience-endpoint": ..., "token-mint-endpoint": ...} under `base` ("https://host").
[[nodiscard]] std::string render_pytp_discovery(std::string_view base);
/// {"audience": ...}
[[nodiscard]] std::string render_oidc_audience(std::string_view audience);
/// {"success": true, "token": ..., "expires": UNIX_SECONDS}
[[nodiscard]] std::string render_minted_token(std::string_view token, std::int64_t expires);
/// Warehouse's refusal: {"message": "Token request failed", "errors": [{code, description}]}.
[[nodiscard]] std::string render_mint_refusal(std::string_view code, std::string_view description);
/// One publisher: id, project, issuer, claims (an object), description, created_at, created_by.
[[nodiscard]] std::string render_publisher(const catalog::PublisherRecord& publisher);
/// {"publishers": [...]}
[[nodiscard]] std::string render_publishers(std::span<const catalog::PublisherRecord> publishers);

}  // namespace wf::render
