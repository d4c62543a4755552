#pragma once
// Trusted publishing (docs/publishing.md): the verification of a CI job's OIDC token (a JWT
// signed with RS256 or ES256 by a configured issuer) and the matching of its claims against a
// project's trusted publishers. No I/O: the issuer's keys (JWKS) are fetched by the caller.

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "wheelforge/catalog/catalog.hpp"
#include "wheelforge/util/result.hpp"

namespace wf::auth::oidc {

/// An [[oidc_issuer]] table of the configuration (docs/configuration.md).
struct IssuerConfig {
  std::string name;                     ///< what publishers name it by
  std::string url;                      ///< the issuer (`iss`), without a trailing '/'
  std::string audience = "wheelforge";  ///< the `aud` its tokens must carry
  std::string jwks_url;                 ///< "": the discovery document's jwks_uri
  /// A token naming a key id the kept JWKS lacks fetches it again at most this often.
  std::chrono::seconds jwks_refetch_interval{60};
  bool operator==(const IssuerConfig&) const = default;
};

/// The signature algorithms accepted; anything else (`none`, HS256, RS512, ...) is refused.
enum class Alg : std::uint8_t { rs256, es256 };

/// A JWT split and decoded, its signature not checked yet.
struct Jwt {
  std::string alg;  ///< the header's alg, as written
  std::string kid;  ///< the header's kid; "" when it has none
  std::string issuer;
  std::vector<std::string> audiences;  ///< `aud`, a string or a list
  std::optional<std::int64_t> exp;
  std::optional<std::int64_t> nbf;
  std::optional<std::int64_t> iat;
  std::string jti;
  /// Every claim whose value is a string, a number or a boolean, as text.
  std::map<std::string, std::string> claims;
  std::string signing_input;  ///< "<header>.<payload>", as received
  std::string signature;      ///< decoded
};

/// Splits and decodes `token`: three base64url parts, the first two JSON objects.
/// Errc::invalid for anything else.
[[nodiscard]] Result<Jwt> parse_jwt(std::string_view token);

/// The public keys of an issuer (a JWKS document), by key id. Copyable, immutable.
class KeySet {
 public:
  struct Key;
  KeySet() = default;
  /// Reads a JWKS document ({"keys": [...]}): RSA keys (n, e) and P-256 keys (x, y); keys of
  /// other types or curves are skipped. Errc::invalid when the document is not a JWKS.
  [[nodiscard]] static Result<KeySet> parse(std::string_view jwks);
  [[nodiscard]] bool has(std::string_view kid) const;
  [[nodiscard]] std::size_t size() const { return keys_.size(); }
  /// Errc::unauthorized unless `jwt`'s signature verifies with its `kid` key (or, when it names
  /// none, with the one key of its type that the set holds) under an allowed algorithm.
  [[nodiscard]] Status verify(const Jwt& jwt) const;

 private:
  std::map<std::string, std::shared_ptr<const Key>, std::less<>> keys_;
};

/// The algorithm `name` names, or nullopt when it is not allowed.
[[nodiscard]] std::optional<Alg> parse_alg(std::string_view name);

/// What a token must say besides its signature.
struct Expectations {
  std::string issuer;    ///< `iss`, exactly
  std::string audience;  ///< one of `aud`
  std::int64_t now = 0;  ///< seconds since the epoch
  std::int64_t leeway = 60;
};

/// Errc::unauthorized with the reason (wrong issuer or audience, expired, not yet valid, no
/// `exp`, no `jti`) when `jwt`'s registered claims do not meet `expect`.
[[nodiscard]] Status check_claims(const Jwt& jwt, const Expectations& expect);

/// True when every claim `publisher` requires is in `jwt`, with that exact value.
[[nodiscard]] bool publisher_matches(const catalog::PublisherRecord& publisher, const Jwt& jwt);

/// A publisher request from fields (project, issuer, description, and claim.NAME=VALUE or
/// claim=NAME=VALUE for each required claim), its issuer one of `issuers`: the record to
/// store, or Errc::invalid naming every problem. Claims on iss, aud, exp, nbf, iat and jti
/// are refused (they say nothing about who runs the job).
[[nodiscard]] Result<catalog::PublisherRecord> decode_publisher_request(
    const std::vector<std::pair<std::string, std::string>>& fields,
    const std::vector<std::string>& issuers, Micros now);

}  // namespace wf::auth::oidc
