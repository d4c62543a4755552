#include "wheelforge/render/admin.hpp"

#include "render/json_text.hpp"

namespace wf::render {
namespace {

using detail::dump;
using detail::OrderedJson;

OrderedJson token_json(const catalog::TokenRecord& t, Micros now) {
  OrderedJson j;
  j["id"] = t.id;
  j["scope"] = std::string(catalog::scope_name(t.scope));
  j["project"] = t.project ? OrderedJson(*t.project) : OrderedJson(nullptr);
  j["description"] = t.description;
  j["created_at"] = iso8601_micros(t.created_at);
  j["created_by"] = t.created_by;
  j["expires_at"] = detail::time_or_null<OrderedJson>(t.expires_at);
  j["last_used_at"] = detail::time_or_null<OrderedJson>(t.last_used_at);
  j["state"] = std::string(token_state(t, now));
  return j;
}

}  // namespace

std::string_view token_state(const catalog::TokenRecord& token, Micros now) {
  if (token.revoked) return "revoked";
  if (token.expired(now)) return "expired";
  return "active";
}

std::string render_tokens(std::span<const catalog::TokenRecord> tokens, Micros now) {
  OrderedJson list = OrderedJson::array();
  for (const auto& t : tokens) list.push_back(token_json(t, now));
  OrderedJson j;
  j["tokens"] = std::move(list);
  return dump(j);
}

std::string render_token(const catalog::TokenRecord& token, Micros now) {
  return dump(token_json(token, now));
}

std::string render_created_token(const catalog::TokenRecord& token, std::string_view secret,
                                 Micros now) {
  OrderedJson j = token_json(token, now);
  j["token"] = std::string(secret);
  return dump(j);
}

std::string render_audit(std::span<const catalog::AuditRecord> entries) {
  OrderedJson list = OrderedJson::array();
  for (const auto& e : entries) {
    OrderedJson j;
    j["id"] = e.id;
    j["at"] = iso8601_micros(e.at);
    j["action"] = e.action;
    j["actor"] = e.actor.label();
    j["token_id"] = e.actor.token_id != 0 ? OrderedJson(e.actor.token_id) : OrderedJson(nullptr);
    j["token_description"] = e.actor.token_description;
    j["address"] = e.actor.address;
    j["project"] = e.project;
    j["target"] = e.target;
    j["detail"] = e.detail;
    list.push_back(std::move(j));
  }
  OrderedJson j;
  j["entries"] = std::move(list);
  return dump(j);
}

}  // namespace wf::render
