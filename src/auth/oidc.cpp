// JWT verification for trusted publishing: the JSON is read by render/oidc.hpp, the
// signatures checked by crypto/signature.hpp (RS256, ES256).

#include "wheelforge/auth/oidc.hpp"

#include <algorithm>

#include "wheelforge/core/name.hpp"
#include "wheelforge/crypto/signature.hpp"
#include "wheelforge/render/oidc.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::auth::oidc {

struct KeySet::Key {
  crypto::PublicKey key;
};

namespace {

std::optional<std::string> b64url_decode(std::string_view s) {
  std::string t(s);
  for (char& c : t) {
    if (c == '-') {
      c = '+';
    } else if (c == '_') {
      c = '/';
    } else if (c == '+' || c == '/' || c == '=') {
      return std::nullopt;  // base64url without padding only
    }
  }
  while (t.size() % 4 != 0) t += '=';
  return base64_decode(t);
}

constexpr std::size_t kMaxClaimValue = 500;

bool valid_claim_name(std::string_view n) {
  return !n.empty() && n.size() <= 64 && std::all_of(n.begin(), n.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-' || c == '.' || c == ':';
  });
}

// Registered claims say nothing about who runs the job: a rule on them would match anyone.
bool registered_claim(std::string_view n) {
  return n == "iss" || n == "aud" || n == "exp" || n == "nbf" || n == "iat" || n == "jti";
}

Error refused(std::string message) {
  return make_error(Errc::unauthorized, std::move(message));
}

}  // namespace

std::optional<Alg> parse_alg(std::string_view name) {
  if (name == "RS256") return Alg::rs256;
  if (name == "ES256") return Alg::es256;
  return std::nullopt;
}

Result<Jwt> parse_jwt(std::string_view token) {
  const auto d1 = token.find('.');
  const auto d2 = d1 == std::string_view::npos ? d1 : token.find('.', d1 + 1);
  if (d2 == std::string_view::npos || token.find('.', d2 + 1) != std::string_view::npos) {
    return make_error(Errc::invalid, "not a JWT: expected three dot-separated parts");
  }
  const auto header_text = b64url_decode(token.substr(0, d1));
  const auto payload_text = b64url_decode(token.substr(d1 + 1, d2 - d1 - 1));
  const auto signature = b64url_decode(token.substr(d2 + 1));
  if (!header_text || !payload_text || !signature) {
    return make_error(Errc::invalid, "not a JWT: a part is not base64url");
  }
  auto header = render::parse_jwt_header(*header_text);
  if (!header) return header.error();
  auto payload = render::parse_jwt_payload(*payload_text);
  if (!payload) return payload.error();
  Jwt out;
  out.alg = std::move(header->alg);
  out.kid = std::move(header->kid);
  out.claims = std::move(payload->claims);
  out.audiences = std::move(payload->audiences);
  out.exp = payload->exp;
  out.nbf = payload->nbf;
  out.iat = payload->iat;
  if (const auto it = out.claims.find("iss"); it != out.claims.end()) out.issuer = it->second;
  if (const auto it = out.claims.find("jti"); it != out.claims.end()) out.jti = it->second;
  out.signing_input = std::string(token.substr(0, d2));
  out.signature = *signature;
  return out;
}

Result<KeySet> KeySet::parse(std::string_view jwks) {
  auto entries = render::parse_jwks(jwks);
  if (!entries) return entries.error();
  KeySet set;
  std::size_t unnamed = 0;
  for (const auto& k : *entries) {
    if (!k.use.empty() && k.use != "sig") continue;
    std::optional<crypto::PublicKey> key;
    if (k.kty == "RSA") {
      const auto n = b64url_decode(k.n);
      const auto e = b64url_decode(k.e);
      if (n && e && !n->empty() && !e->empty()) key = crypto::PublicKey::rsa(*n, *e);
    } else if (k.kty == "EC" && k.crv == "P-256") {
      const auto x = b64url_decode(k.x);
      const auto y = b64url_decode(k.y);
      if (x && y) key = crypto::PublicKey::p256(*x, *y);
    }
    if (!key) continue;
    // Keys without a kid are kept under a name no token can give.
    std::string kid = k.kid ? *k.kid : "\n" + std::to_string(unnamed++);
    set.keys_.emplace(std::move(kid), std::make_shared<const Key>(Key{std::move(*key)}));
  }
  return set;
}

bool KeySet::has(std::string_view kid) const {
  return keys_.find(kid) != keys_.end();
}

Status KeySet::verify(const Jwt& jwt) const {
  const auto alg = parse_alg(jwt.alg);
  if (!alg) {
    return refused("signature algorithm '" + sanitize_for_log(jwt.alg, 20) +
                   "' is not allowed (RS256 or ES256)");
  }
  const auto wanted =
      *alg == Alg::rs256 ? crypto::SignatureAlg::rs256 : crypto::SignatureAlg::es256;
  const Key* key = nullptr;
  if (!jwt.kid.empty()) {
    const auto it = keys_.find(jwt.kid);
    if (it == keys_.end()) {
      return refused("unknown signing key '" + sanitize_for_log(jwt.kid, 80) + "'");
    }
    key = it->second.get();
  } else {
    for (const auto& [kid, k] : keys_) {
      if (k->key.alg() != wanted) continue;
      if (key != nullptr) {
        return refused("the token names no key (kid) and the issuer has several");
      }
      key = k.get();
    }
    if (key == nullptr) return refused("the token names no key (kid) and the issuer has none");
  }
  if (key->key.alg() != wanted) {
    return refused("the key '" + sanitize_for_log(jwt.kid, 80) + "' is not a " + jwt.alg + " key");
  }
  if (!key->key.verify(jwt.signing_input, jwt.signature)) {
    return refused("the token's signature does not verify");
  }
  return ok_status();
}

Status check_claims(const Jwt& jwt, const Expectations& expect) {
  if (jwt.issuer != expect.issuer) {
    return refused("wrong issuer '" + sanitize_for_log(jwt.issuer, 200) + "' (expected '" +
                   expect.issuer + "')");
  }
  bool aud_ok = false;
  for (const auto& a : jwt.audiences) aud_ok = aud_ok || a == expect.audience;
  if (!aud_ok) {
    return refused("wrong audience (expected '" + expect.audience + "')");
  }
  if (!jwt.exp) return refused("the token has no expiry (exp)");
  if (expect.now >= *jwt.exp + expect.leeway) {
    return refused("the token expired at " + std::to_string(*jwt.exp));
  }
  if (jwt.nbf && expect.now + expect.leeway < *jwt.nbf) {
    return refused("the token is not valid yet (nbf " + std::to_string(*jwt.nbf) + ")");
  }
  if (jwt.iat && expect.now + expect.leeway < *jwt.iat) {
    return refused("the token was issued in the future (iat " + std::to_string(*jwt.iat) + ")");
  }
  if (jwt.jti.empty()) return refused("the token has no id (jti)");
  return ok_status();
}

bool publisher_matches(const catalog::PublisherRecord& publisher, const Jwt& jwt) {
  if (publisher.claims.empty()) return false;
  for (const auto& [name, value] : publisher.claims) {
    const auto it = jwt.claims.find(name);
    if (it == jwt.claims.end() || it->second != value) return false;
  }
  return true;
}

Result<catalog::PublisherRecord> decode_publisher_request(
    const std::vector<std::pair<std::string, std::string>>& fields,
    const std::vector<std::string>& issuers, Micros now) {
  Problems problems;
  catalog::PublisherRecord p;
  p.created_at = now;
  const auto add_claim = [&](std::string_view name, std::string_view value) {
    if (!valid_claim_name(name) || registered_claim(name)) {
      problems.add("claim name '" + sanitize_for_log(name, 64) +
                   "' is not allowed (letters, digits, _ - . :; not iss, aud, exp, nbf, iat, jti)");
    } else if (value.empty() || value.size() > kMaxClaimValue ||
               value.find_first_of("\n\r") != std::string_view::npos) {
      problems.add("claim " + std::string(name) + ": expected a value of 1 to " +
                   std::to_string(kMaxClaimValue) + " characters on one line");
    } else {
      for (const auto& [k, v] : p.claims) {
        if (k == name) problems.add("claim " + std::string(name) + " is given twice");
      }
      p.claims.emplace_back(std::string(name), std::string(value));
    }
  };
  for (const auto& [k, v] : fields) {
    if (k == "project") {
      if (core::is_valid_project_name(v)) {
        p.project = core::normalize_name(v);
      } else {
        problems.add("project: '" + sanitize_for_log(v, 100) + "' is not a valid project name");
      }
    } else if (k == "issuer") {
      p.issuer = v;
      if (std::find(issuers.begin(), issuers.end(), v) == issuers.end()) {
        problems.add("issuer: '" + sanitize_for_log(v, 100) +
                     "' is not a configured [[oidc_issuer]]");
      }
    } else if (k == "description") {
      if (auto st = check_free_text("description", v); !st) problems.add(st.error().message);
      p.description = v;
    } else if (k == "claim") {
      const auto eq = v.find('=');
      if (eq == std::string::npos) {
        problems.add("claim: expected NAME=VALUE, got '" + sanitize_for_log(v, 100) + "'");
      } else {
        add_claim(std::string_view(v).substr(0, eq), std::string_view(v).substr(eq + 1));
      }
    } else if (k.starts_with("claim.")) {
      add_claim(std::string_view(k).substr(6), v);
    } else {
      problems.add("unknown parameter '" + sanitize_for_log(k) + "'");
    }
  }
  if (p.project.empty()) problems.add("project=NAME is required");
  if (p.issuer.empty()) problems.add("issuer=NAME is required");
  if (p.claims.empty()) {
    problems.add("at least one claim is required (e.g. claim.repository=OWNER/REPO)");
  }
  if (!problems.empty()) return problems.to_error();
  return p;
}

}  // namespace wf::auth::oidc
