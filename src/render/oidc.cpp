// The JSON of trusted publishing (render/oidc.hpp).

#include "wheelforge/render/oidc.hpp"

#include "render/json_text.hpp"

namespace wf::render {
namespace {

using detail::Json;
using detail::OrderedJson;

std::optional<Json> json_object(std::string_view text) {
  Json j = Json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  return j;
}

std::optional<std::int64_t> time_claim(const Json& j, const char* name) {
  const auto it = j.find(name);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  if (it->is_number_integer()) return it->get<std::int64_t>();
  return static_cast<std::int64_t>(it->get<double>());
}

std::string string_field(const Json& j, const char* name) {
  const auto it = j.find(name);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

OrderedJson publisher_object(const catalog::PublisherRecord& p) {
  OrderedJson j;
  j["id"] = p.id;
  j["project"] = p.project;
  j["issuer"] = p.issuer;
  OrderedJson claims = OrderedJson::object();
  for (const auto& [k, v] : p.claims) claims[k] = v;
  j["claims"] = claims;
  j["description"] = p.description;
  j["created_at"] = iso8601_micros(p.created_at);
  j["created_by"] = p.created_by;
  return j;
}

}  // namespace

Result<JwtHeader> parse_jwt_header(std::string_view json) {
  const auto j = json_object(json);
  if (!j) return make_error(Errc::invalid, "not a JWT: its header is not a JSON object");
  return JwtHeader{string_field(*j, "alg"), string_field(*j, "kid")};
}

Result<JwtPayload> parse_jwt_payload(std::string_view json) {
  const auto j = json_object(json);
  if (!j) return make_error(Errc::invalid, "not a JWT: its payload is not a JSON object");
  JwtPayload out;
  for (const auto& [k, v] : j->items()) {
    if (v.is_string()) {
      out.claims[k] = v.get<std::string>();
    } else if (v.is_number_integer() || v.is_boolean()) {
      out.claims[k] = v.dump();
    }
  }
  if (const auto it = j->find("aud"); it != j->end()) {
    if (it->is_string()) {
      out.audiences.push_back(it->get<std::string>());
    } else if (it->is_array()) {
      for (const auto& a : *it) {
        if (a.is_string()) out.audiences.push_back(a.get<std::string>());
      }
    }
  }
  out.exp = time_claim(*j, "exp");
  out.nbf = time_claim(*j, "nbf");
  out.iat = time_claim(*j, "iat");
  return out;
}

Result<std::vector<Jwk>> parse_jwks(std::string_view json) {
  const auto j = json_object(json);
  if (!j || !j->contains("keys") || !(*j)["keys"].is_array()) {
    return make_error(Errc::invalid, "not a JWKS document (expected {\"keys\": [...]})");
  }
  std::vector<Jwk> out;
  for (const auto& k : (*j)["keys"]) {
    if (!k.is_object()) continue;
    Jwk key;
    key.kty = string_field(k, "kty");
    if (const auto it = k.find("kid"); it != k.end() && it->is_string()) {
      key.kid = it->get<std::string>();
    }
    key.use = string_field(k, "use");
    key.crv = string_field(k, "crv");
    key.n = string_field(k, "n");
    key.e = string_field(k, "e");
    key.x = string_field(k, "x");
    key.y = string_field(k, "y");
    out.push_back(std::move(key));
  }
  return out;
}

Result<OidcDiscovery> parse_oidc_discovery(std::string_view json) {
  const auto j = json_object(json);
  if (!j) return make_error(Errc::invalid, "the discovery document is not a JSON object");
  OidcDiscovery d{string_field(*j, "issuer"), string_field(*j, "jwks_uri")};
  if (d.jwks_uri.empty())
    return make_error(Errc::invalid, "the discovery document has no jwks_uri");
  return d;
}

Result<std::string> parse_mint_request(std::string_view json) {
  const auto j = json_object(json);
  if (!j || !j->contains("token") || !(*j)["token"].is_string()) {
    return make_error(Errc::invalid, "expected a JSON object {\"token\": \"<JWT>\"}");
  }
  return (*j)["token"].get<std::string>();
}

std::string render_pytp_discovery(std::string_view base) {
  OrderedJson j;
  j["audience-endpoint"] = std::string(base) + "/_/oidc/audience";
  j["token-mint-endpoint"] = std::string(base) + "/_/oidc/mint-token";
  return detail::dump(j);
}

std::string render_oidc_audience(std::string_view audience) {
  OrderedJson j;
  j["audience"] = audience;
  return detail::dump(j);
}

std::string render_minted_token(std::string_view token, std::int64_t expires) {
  OrderedJson j;
  j["success"] = true;
  j["token"] = token;
  j["expires"] = expires;
  return detail::dump(j);
}

std::string render_mint_refusal(std::string_view code, std::string_view description) {
  OrderedJson err;
  err["code"] = code;
  err["description"] = description;
  OrderedJson j;
  j["message"] = "Token request failed";
  j["errors"] = OrderedJson::array({err});
  return detail::dump(j);
}

std::string render_publisher(const catalog::PublisherRecord& publisher) {
  return detail::dump(publisher_object(publisher));
}

std::string render_publishers(std::span<const catalog::PublisherRecord> publishers) {
  OrderedJson list = OrderedJson::array();
  for (const auto& p : publishers) list.push_back(publisher_object(p));
  OrderedJson j;
  j["publishers"] = list;
  return detail::dump(j);
}

}  // namespace wf::render
