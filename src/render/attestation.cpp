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

std::string build_statement(const BuildFacts& facts, std::string_view filename,
                            std::string_view sha256) {
  OrderedJson subject;
  subject["name"] = filename;
  subject["digest"] = {{"sha256", sha256}};

  OrderedJson external;
  external["recipe"] = facts.recipe;
  external["project"] = facts.project;
  external["version"] = facts.version;
  external["cell"] = {{"python", facts.python}, {"torch", facts.torch}, {"cuda", facts.cuda}};
  external["source"] = {{"kind", facts.source_kind}, {"uri", facts.source_uri}};
  OrderedJson internal;
  if (!facts.arch_list.empty()) internal["arch_list"] = facts.arch_list;
  if (!facts.container.image.empty()) internal["image"] = facts.container.image;
  if (!facts.runner.empty()) internal["runner"] = facts.runner;
  OrderedJson dependencies = OrderedJson::array();
  OrderedJson source;
  source["uri"] = facts.source_uri;
  if (!facts.source_digest.first.empty()) {
    source["digest"] = {{facts.source_digest.first, facts.source_digest.second}};
  }
  dependencies.push_back(std::move(source));
  if (!facts.container.image.empty()) {
    OrderedJson image;
    image["uri"] = facts.container.image;
    const std::string& digest = facts.container.image_digest;
    if (const std::size_t colon = digest.find(':'); colon != std::string::npos) {
      image["digest"] = {{digest.substr(0, colon), digest.substr(colon + 1)}};
    }
    dependencies.push_back(std::move(image));
  }
  OrderedJson definition;
  definition["buildType"] = kRunnerBuildType;
  definition["externalParameters"] = std::move(external);
  definition["internalParameters"] = std::move(internal);
  definition["resolvedDependencies"] = std::move(dependencies);

  OrderedJson versions = OrderedJson::object();
  const catalog::Toolchain& t = facts.toolchain;
  for (const auto& [key, value] :
       {std::pair<const char*, const std::string&>{"nvcc", t.nvcc_version},
        {"torch", t.torch_version},
        {"torch_cuda", t.torch_cuda},
        {"python", t.python_version}}) {
    if (!value.empty()) versions[key] = value;
  }
  OrderedJson builder;
  builder["id"] = facts.builder;
  builder["version"] = std::move(versions);
  OrderedJson metadata;
  metadata["invocationId"] =
      "build " + std::to_string(facts.build_id) + " job " + std::to_string(facts.job_id);
  if (!facts.started_at.empty()) metadata["startedOn"] = facts.started_at;
  OrderedJson run;
  run["builder"] = std::move(builder);
  run["metadata"] = std::move(metadata);

  OrderedJson statement;
  statement["_type"] = "https://in-toto.io/Statement/v1";
  statement["subject"] = OrderedJson::array({std::move(subject)});
  statement["predicateType"] = "https://slsa.dev/provenance/v1";
  statement["predicate"] = {{"buildDefinition", std::move(definition)},
                            {"runDetails", std::move(run)}};
  return detail::dump(statement);
}

std::string attestation_object(std::string_view certificate_der, std::string_view statement,
                               std::string_view signature) {
  OrderedJson material;
  material["certificate"] = base64_encode(certificate_der);
  material["transparency_entries"] = OrderedJson::array();
  OrderedJson envelope;
  envelope["statement"] = base64_encode(statement);
  envelope["signature"] = base64_encode(signature);
  OrderedJson out;
  out["version"] = 1;
  out["verification_material"] = std::move(material);
  out["envelope"] = std::move(envelope);
  return detail::dump(out);
}

ProvenancePublisher build_publisher(const BuildFacts& facts) {
  ProvenancePublisher p;
  p.kind = "wheelforge";
  p.fields = {{"builder", facts.builder},
              {"recipe", facts.recipe},
              {"build", std::to_string(facts.build_id)},
              {"job", std::to_string(facts.job_id)}};
  return p;
}

}  // namespace wf::render
