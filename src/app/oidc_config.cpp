// The [[oidc_issuer]] tables: the OIDC issuers whose tokens trusted publishing exchanges for
// upload tokens (docs/publishing.md, docs/configuration.md "[[oidc_issuer]]"); and the
// [attestations] table: the CA certificates uploaded attestations are verified against.

#include <algorithm>
#include <array>

#include "config_readers.hpp"
#include "config_tables.hpp"
#include "wheelforge/app/app.hpp"
#include "wheelforge/util/fs.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::app::detail {
namespace {

using Issuer = auth::oidc::IssuerConfig;
using IssuerReadFn = void (*)(const toml::node&, const std::string& key, Issuer&, ProblemList&);

struct IssuerKey {
  std::string_view name;
  IssuerReadFn read;
};

bool valid_issuer_name(std::string_view name) {
  if (name.empty() || name.size() > 64 || name.front() == '-') return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
  });
}

// An http(s) URL without query or fragment, its trailing '/' removed; nullopt otherwise.
std::optional<std::string> issuer_url(const toml::node& node, const std::string& key,
                                      ProblemList& p) {
  auto v = read_string(node, key, p);
  if (!v) return std::nullopt;
  std::string url(trim(*v));
  if (!http_url_rest(url)) {
    p.push_back(key + ": expected an http:// or https:// URL without query or fragment, got '" +
                clean(*v) + "'");
    return std::nullopt;
  }
  while (url.ends_with('/')) url.pop_back();
  return url;
}

const std::array kIssuerKeys{
    IssuerKey{"name",
              [](const toml::node& node, const std::string& key, Issuer& e, ProblemList& p) {
                auto v = read_string(node, key, p);
                if (!v) return;
                if (!valid_issuer_name(*v)) {
                  p.push_back(key +
                              ": expected lower-case letters, digits and '-' (at most 64, not "
                              "starting with '-'), got '" +
                              clean(*v) + "'");
                  return;
                }
                e.name = std::move(*v);
              }},
    IssuerKey{"url",
              [](const toml::node& node, const std::string& key, Issuer& e, ProblemList& p) {
                if (auto url = issuer_url(node, key, p)) e.url = std::move(*url);
              }},
    IssuerKey{"audience",
              [](const toml::node& node, const std::string& key, Issuer& e, ProblemList& p) {
                auto v = read_string(node, key, p);
                if (!v) return;
                if (v->empty() || v->size() > 200) {
                  p.push_back(key + ": expected 1 to 200 characters");
                  return;
                }
                e.audience = std::move(*v);
              }},
    IssuerKey{"jwks_url",
              [](const toml::node& node, const std::string& key, Issuer& e, ProblemList& p) {
                if (auto url = issuer_url(node, key, p)) e.jwks_url = std::move(*url);
              }},
    IssuerKey{"jwks_refetch_interval",
              [](const toml::node& node, const std::string& key, Issuer& e, ProblemList& p) {
                std::optional<std::chrono::seconds> d;
                if (const auto i = node.value_exact<std::int64_t>(); i && *i >= 0) {
                  d = std::chrono::seconds{*i};
                } else if (const auto t = node.value_exact<std::string>()) {
                  d = parse_duration(*t);
                }
                if (!d || *d > std::chrono::seconds{3600}) {
                  p.push_back(key + ": expected a duration from 0s to 1h such as \"1m\", got " +
                              spelled(node));
                  return;
                }
                e.jwks_refetch_interval = *d;
              }},
};

}  // namespace

void read_oidc_tables(const toml::table& root, std::vector<auth::oidc::IssuerConfig>& issuers,
                      ProblemList& problems) {
  const auto* node = root.get("oidc_issuer");
  if (node == nullptr) return;
  const auto* array = node->as_array();
  if (array == nullptr || !array->is_array_of_tables()) {
    problems.push_back("oidc_issuer: expected [[oidc_issuer]] tables, got " + spelled(*node));
    return;
  }
  for (std::size_t i = 0; i < array->size(); ++i) {
    const auto* table = (*array)[i].as_table();
    Issuer e;
    std::string where = "oidc_issuer[" + std::to_string(i) + "]";
    if (const auto* n = table->get("name"); n != nullptr && n->is_string()) {
      where = "oidc_issuer." + clean(*n->value<std::string>());
    }
    const std::size_t before = problems.size();
    for (const auto& [k, value] : *table) {
      const std::string name(k.str());
      const auto row = std::find_if(kIssuerKeys.begin(), kIssuerKeys.end(),
                                    [&](const IssuerKey& r) { return r.name == name; });
      if (row == kIssuerKeys.end()) {
        problems.push_back(unknown_key(name, "[[oidc_issuer]] " + where, row_names(kIssuerKeys)));
      } else {
        row->read(value, where + "." + name, e, problems);
      }
    }
    if (table->get("name") == nullptr) problems.push_back(where + ".name: required");
    if (table->get("url") == nullptr) problems.push_back(where + ".url: required");
    for (const auto& other : issuers) {
      if (!e.name.empty() && other.name == e.name) {
        problems.push_back(where + ".name: another [[oidc_issuer]] has this name");
      }
      if (!e.url.empty() && other.url == e.url) {
        problems.push_back(where + ".url: another [[oidc_issuer]] has this issuer URL");
      }
    }
    if (problems.size() == before) issuers.push_back(std::move(e));
  }
}

namespace {

constexpr std::array<std::string_view, 3> kAttestationKeys{"trust_roots", "signing_key",
                                                           "signing_certificate"};

// The build signer of signing_key and signing_certificate (both set, or neither).
void read_signer(const std::optional<std::filesystem::path>& key_path,
                 const std::optional<std::filesystem::path>& certificate_path,
                 AttestationTable& out, ProblemList& problems) {
  if (!key_path && !certificate_path) return;
  if (!key_path || !certificate_path) {
    problems.push_back(
        std::string("attestations.") + (key_path ? "signing_certificate" : "signing_key") +
        ": required with attestations." + (key_path ? "signing_key" : "signing_certificate") +
        " (the runner's provenance is signed by the key and names the certificate)");
    return;
  }
  auto pem = read_small_file(*key_path, 1U << 20U);
  if (!pem) {
    problems.push_back("attestations.signing_key: " + pem.error().message);
    return;
  }
  auto key = crypto::SigningKey::from_pem(*pem);
  if (!key) {
    problems.push_back("attestations.signing_key: " + key_path->string() + ": " +
                       key.error().message);
    return;
  }
  auto text = read_small_file(*certificate_path, 1U << 20U);
  if (!text) {
    problems.push_back("attestations.signing_certificate: " + text.error().message);
    return;
  }
  auto certificates = crypto::Certificate::from_pem(*text);
  if (!certificates) {
    problems.push_back("attestations.signing_certificate: " + certificate_path->string() + ": " +
                       certificates.error().message);
    return;
  }
  auto signer = auth::BuildSigner::make(std::move(*key), certificates->front());
  if (!signer) {
    problems.push_back("attestations.signing_certificate: " + certificate_path->string() + ": " +
                       signer.error().message + " (attestations.signing_key " + key_path->string() +
                       ")");
    return;
  }
  out.signer = std::make_shared<const auth::BuildSigner>(std::move(*signer));
}

}  // namespace

void read_attestations_table(const toml::table& root, AttestationTable& out,
                             ProblemList& problems) {
  const auto* node = root.get("attestations");
  if (node == nullptr) return;
  const auto* table = node->as_table();
  if (table == nullptr) {
    problems.push_back("attestations: expected a table [attestations], got " + spelled(*node));
    return;
  }
  std::optional<std::filesystem::path> key_path;
  std::optional<std::filesystem::path> certificate_path;
  for (const auto& [k, value] : *table) {
    const std::string name(k.str());
    if (name == "signing_key") {
      key_path = read_absolute_path(value, "attestations.signing_key", problems);
      continue;
    }
    if (name == "signing_certificate") {
      certificate_path = read_absolute_path(value, "attestations.signing_certificate", problems);
      continue;
    }
    if (name != "trust_roots") {
      problems.push_back(unknown_key(
          name, "[attestations]",
          std::vector<std::string_view>(kAttestationKeys.begin(), kAttestationKeys.end())));
      continue;
    }
    auto path = read_absolute_path(value, "attestations.trust_roots", problems);
    if (!path) continue;
    auto pem = read_small_file(*path, 16U << 20U);
    if (!pem) {
      problems.push_back("attestations.trust_roots: " + pem.error().message);
      continue;
    }
    auto store = crypto::TrustStore::from_pem(*pem);
    if (!store) {
      problems.push_back("attestations.trust_roots: " + path->string() + ": " +
                         store.error().message);
      continue;
    }
    out.trust_roots = *path;
    out.roots = std::make_shared<const crypto::TrustStore>(std::move(*store));
  }
  read_signer(key_path, certificate_path, out, problems);
}

std::vector<std::string> attestation_keys() {
  std::vector<std::string> keys;
  keys.reserve(kAttestationKeys.size());
  for (const auto k : kAttestationKeys) keys.push_back("attestations." + std::string(k));
  return keys;
}

std::vector<std::string> oidc_keys() {
  std::vector<std::string> keys;
  keys.reserve(kIssuerKeys.size());
  for (const auto& row : kIssuerKeys) keys.push_back("oidc_issuer." + std::string(row.name));
  return keys;
}

}  // namespace wf::app::detail

namespace wf::app {

std::string oidc_summary(const std::vector<auth::oidc::IssuerConfig>& issuers) {
  std::string out;
  for (const auto& i : issuers) {
    out += "# oidc_issuer " + i.name + ": " + i.url + ", audience " + i.audience + ", keys from " +
           (i.jwks_url.empty() ? std::string("its discovery document") : i.jwks_url) +
           ", jwks_refetch_interval " + std::to_string(i.jwks_refetch_interval.count()) + "s\n";
  }
  return out;
}

}  // namespace wf::app
