// The JSON of PEP 740 attestations (render/attestation.hpp).

#include "wheelforge/render/attestation.hpp"

#include "render/json_text.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::render {
namespace {

using detail::Json;
using detail::OrderedJson;

// The base64 string at `key` of `j`, decoded; nullopt when it is missing, not a string, or not
// base64.
std::optional<std::string> base64_field(const Json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_string()) return std::nullopt;
  return base64_decode(it->get<std::string>());
}

}  // namespace

Result<std::vector<AttestationObject>> parse_attestations(std::string_view json) {
  const Json all = Json::parse(json, nullptr, false);
  if (all.is_discarded() || !all.is_array()) {
    return make_error(Errc::invalid, "attestations: not a JSON array of attestation objects");
  }
  if (all.empty()) return make_error(Errc::invalid, "attestations: the array is empty");
  std::vector<AttestationObject> out;
  for (std::size_t i = 0; i < all.size(); ++i) {
    const Json& a = all[i];
    const std::string where = "attestation " + std::to_string(i + 1) + ": ";
    if (!a.is_object()) return make_error(Errc::invalid, where + "not a JSON object");
    if (const auto v = a.find("version"); v == a.end() || *v != 1) {
      return make_error(Errc::invalid, where + "version is not 1");
    }
    const auto material = a.find("verification_material");
    const auto envelope = a.find("envelope");
    if (material == a.end() || !material->is_object()) {
      return make_error(Errc::invalid, where + "no verification_material object");
    }
    if (envelope == a.end() || !envelope->is_object()) {
      return make_error(Errc::invalid, where + "no envelope object");
    }
    if (const auto t = material->find("transparency_entries");
        t == material->end() || !t->is_array()) {
      return make_error(Errc::invalid,
                        where + "verification_material.transparency_entries is not a list");
    }
    AttestationObject o;
    auto certificate = base64_field(*material, "certificate");
    auto statement = base64_field(*envelope, "statement");
    auto signature = base64_field(*envelope, "signature");
    if (!certificate || certificate->empty()) {
      return make_error(Errc::invalid, where + "verification_material.certificate is not base64");
    }
    if (!statement || statement->empty()) {
      return make_error(Errc::invalid, where + "envelope.statement is not base64");
    }
    if (!signature || signature->empty()) {
      return make_error(Errc::invalid, where + "envelope.signature is not base64");
    }
    o.certificate = std::move(*certificate);
    o.statement = std::move(*statement);
    o.signature = std::move(*signature);
    o.json = a.dump(-1, ' ', false, Json::error_handler_t::replace);
    out.push_back(std::move(o));
  }
  return out;
}

Result<InTotoStatement> parse_intoto_statement(std::string_view json) {
  const Json j = Json::parse(json, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return make_error(Errc::invalid, "the statement is not a JSON object");
  }
  if (const auto t = j.find("_type"); t == j.end() || *t != "https://in-toto.io/Statement/v1") {
    return make_error(Errc::invalid, "the statement is not an in-toto v1 statement (_type)");
  }
  const auto subjects = j.find("subject");
  if (subjects == j.end() || !subjects->is_array()) {
    return make_error(Errc::invalid, "the statement has no subject list");
  }
  const auto predicate = j.find("predicateType");
  if (predicate == j.end() || !predicate->is_string()) {
    return make_error(Errc::invalid, "the statement has no predicateType");
  }
  InTotoStatement out;
  out.predicate_type = predicate->get<std::string>();
  for (const Json& s : *subjects) {
    StatementSubject subject;
    if (s.is_object()) {
      if (const auto n = s.find("name"); n != s.end() && n->is_string()) {
        subject.name = n->get<std::string>();
      }
      if (const auto d = s.find("digest"); d != s.end() && d->is_object()) {
        if (const auto h = d->find("sha256"); h != d->end() && h->is_string()) {
          subject.sha256 = h->get<std::string>();
        }
      }
    }
    out.subjects.push_back(std::move(subject));
  }
  return out;
}

std::string render_provenance(const ProvenancePublisher& publisher,
                              std::span<const std::string> attestations) {
  OrderedJson p;
  p["kind"] = publisher.kind;
  for (const auto& [k, v] : publisher.fields) p[k] = v;
  OrderedJson list = OrderedJson::array();
  for (const std::string& a : attestations) {
    OrderedJson one = OrderedJson::parse(a, nullptr, false);
    if (!one.is_discarded()) list.push_back(std::move(one));
  }
  OrderedJson bundle;
  bundle["publisher"] = std::move(p);
  bundle["attestations"] = std::move(list);
  OrderedJson out;
  out["version"] = 1;
  out["attestation_bundles"] = OrderedJson::array({std::move(bundle)});
  return detail::dump(out);
}

}  // namespace wf::render
