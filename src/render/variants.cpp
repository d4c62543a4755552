#include "wheelforge/render/variants.hpp"

#include <algorithm>
#include <map>

#include "render/json_text.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::render {
namespace {

using detail::Json;

constexpr std::string_view kSchemaPrefix = "https://variants-schema.wheelnext.dev/v";
constexpr std::string_view kSchemaSuffix = ".json";
// A name in a message: long enough to recognise, short enough to keep the message readable.
constexpr std::size_t kShown = 80;
// The most problems listed in one answer.
constexpr std::size_t kMaxProblems = 20;

std::string q(std::string_view s) {
  return "'" + sanitize_for_log(s, kShown) + "'";
}

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

class Checker {
 public:
  void add(std::string problem) {
    if (problems_.list().size() < kMaxProblems) problems_.add(std::move(problem));
  }
  [[nodiscard]] bool empty() const { return problems_.empty(); }
  [[nodiscard]] Error error() const {
    Error e = problems_.to_error(Errc::invalid);
    e.message = "variant.json: " + e.message;
    return e;
  }

  // A list of strings each accepted by `valid`; false (and a problem) otherwise.
  bool string_list(const Json& j, const std::string& where, bool (*valid)(std::string_view)) {
    if (!j.is_array()) {
      add(where + " is not a list");
      return false;
    }
    bool ok = true;
    for (const auto& item : j) {
      if (!item.is_string() || !valid(item.get_ref<const std::string&>())) {
        add(where + " holds " + q(item.dump(-1, ' ', false, Json::error_handler_t::replace)) +
            ", not a valid name");
        ok = false;
      }
    }
    return ok;
  }

  // {namespace: {feature: [values]}}.
  std::optional<core::VariantProperties> properties(const Json& j, const std::string& where) {
    if (!j.is_object()) {
      add(where + " is not an object");
      return std::nullopt;
    }
    core::VariantProperties out;
    bool ok = true;
    for (const auto& [ns, features] : j.items()) {
      if (!core::is_valid_variant_key(ns)) {
        add(where + " namespace " + q(ns) + " is not valid (PEP 825: a-z, 0-9 and '_')");
        ok = false;
        continue;
      }
      if (!features.is_object()) {
        add(where + "." + ns + " is not an object");
        ok = false;
        continue;
      }
      for (const auto& [feature, values] : features.items()) {
        const std::string at = where + "." + ns + "." + sanitize_for_log(feature, kShown);
        if (!core::is_valid_variant_key(feature)) {
          add(at + ": feature name " + q(feature) + " is not valid (PEP 825: a-z, 0-9 and '_')");
          ok = false;
          continue;
        }
        if (!values.is_array() || values.empty()) {
          add(at + " is not a non-empty list of values");
          ok = false;
          continue;
        }
        auto& list = out[ns][feature];
        for (const auto& value : values) {
          if (!value.is_string() ||
              !core::is_valid_variant_value(value.get_ref<const std::string&>())) {
            add(at + " holds " + q(value.dump(-1, ' ', false, Json::error_handler_t::replace)) +
                ", not a valid value (PEP 825: a-z, 0-9, '_' and '.')");
            ok = false;
            continue;
          }
          list.push_back(value.get<std::string>());
        }
        std::sort(list.begin(), list.end());
        list.erase(std::unique(list.begin(), list.end()), list.end());
      }
    }
    if (!ok) return std::nullopt;
    return out;
  }

 private:
  Problems problems_;
};

void check_priorities(const Json& doc, Checker& c, std::vector<std::string>& namespaces) {
  const auto it = doc.find("default-priorities");
  if (it == doc.end()) {
    c.add("'default-priorities' is missing");
    return;
  }
  if (!it->is_object()) {
    c.add("'default-priorities' is not an object");
    return;
  }
  const auto ns = it->find("namespace");
  if (ns == it->end()) {
    c.add("'default-priorities.namespace' is missing");
  } else if (c.string_list(*ns, "'default-priorities.namespace'", core::is_valid_variant_key)) {
    for (const auto& n : *ns) namespaces.push_back(n.get<std::string>());
  }
  if (const auto f = it->find("feature"); f != it->end()) {
    if (!f->is_object()) {
      c.add("'default-priorities.feature' is not an object");
    } else {
      for (const auto& [key, list] : f->items()) {
        c.string_list(list, "'default-priorities.feature." + sanitize_for_log(key, kShown) + "'",
                      core::is_valid_variant_key);
      }
    }
  }
  if (const auto p = it->find("property"); p != it->end()) {
    (void)c.properties(*p, "'default-priorities.property'");
  }
}

void check_providers(const Json& doc, Checker& c) {
  const auto it = doc.find("providers");
  if (it == doc.end()) return;
  if (!it->is_object()) {
    c.add("'providers' is not an object");
    return;
  }
  for (const auto& [ns, provider] : it->items()) {
    if (!core::is_valid_variant_key(ns)) c.add("'providers' namespace " + q(ns) + " is not valid");
    if (!provider.is_object())
      c.add("'providers." + sanitize_for_log(ns, kShown) + "' is not an object");
  }
}

}  // namespace

bool is_known_variant_schema(std::string_view url) {
  if (!url.starts_with(kSchemaPrefix) || !url.ends_with(kSchemaSuffix)) return false;
  const std::string_view version =
      url.substr(kSchemaPrefix.size(), url.size() - kSchemaPrefix.size() - kSchemaSuffix.size());
  const auto parts = split(version, '.');
  if (parts.size() != 3 || !all_digits(parts[0]) || !all_digits(parts[1]) ||
      !all_digits(parts[2])) {
    return false;
  }
  if (parts[0] != "0") return false;
  return (parts[1] == "0" && parts[2] == "3") || parts[1] == "1";
}

Result<core::WheelVariant> parse_variant_json(std::string_view bytes, std::string_view label) {
  const Json doc = Json::parse(bytes, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return make_error(Errc::invalid, "variant.json is not valid JSON");
  if (!doc.is_object()) return make_error(Errc::invalid, "variant.json is not a JSON object");

  Checker c;
  core::WheelVariant out;
  out.label = std::string(label);
  if (!core::is_valid_variant_label(label)) {
    c.add("the variant label " + q(label) + " of the file name is not valid (PEP 825)");
  }
  if (const auto s = doc.find("$schema"); s == doc.end() || !s->is_string()) {
    c.add("'$schema' is missing (it names the format version)");
  } else if (!is_known_variant_schema(s->get_ref<const std::string&>())) {
    c.add("'$schema' " + q(s->get_ref<const std::string&>()) +
          " is a format version wheelforge does not read (it reads "
          "https://variants-schema.wheelnext.dev/v0.0.3.json and v0.1.x)");
  } else {
    out.schema = s->get<std::string>();
  }
  std::vector<std::string> namespaces;
  check_priorities(doc, c, namespaces);
  check_providers(doc, c);

  const auto variants = doc.find("variants");
  bool defines_label = false;
  if (variants == doc.end() || !variants->is_object() || variants->empty()) {
    c.add("'variants' is missing or not a non-empty object");
  } else {
    for (const auto& [key, value] : variants->items()) {
      if (!core::is_valid_variant_label(key)) {
        c.add("variant label " + q(key) + " is not valid (PEP 825: a-z, 0-9, '_' and '.')");
        continue;
      }
      auto props = c.properties(value, "'variants." + key + "'");
      if (!props) continue;
      if (key == core::kNullVariantLabel && !props->empty()) {
        c.add("the label 'null' is reserved for the variant without properties, but has some");
      } else if (key != core::kNullVariantLabel && props->empty()) {
        c.add("variant label " + q(key) + " has no properties: only 'null' may be empty");
      }
      for (const auto& [ns, features] : *props) {
        if (std::find(namespaces.begin(), namespaces.end(), ns) == namespaces.end()) {
          c.add("namespace " + q(ns) + " of 'variants." + key +
                "' is not listed in 'default-priorities.namespace'");
        }
      }
      if (key == label) {
        defines_label = true;
        out.properties = std::move(*props);
      } else {
        out.others.emplace(key, std::move(*props));
      }
    }
    if (!defines_label && core::is_valid_variant_label(label)) {
      c.add("'variants' does not define " + q(label) + ", the variant label of the file name");
    }
  }
  if (!c.empty()) return c.error();
  // Compact, keys sorted (nlohmann's objects are ordered maps): equal values, equal text.
  out.priorities = doc.at("default-priorities").dump();
  if (const auto p = doc.find("providers"); p != doc.end()) out.providers = p->dump();
  return out;
}

std::string render_variants_json(std::span<const core::WheelVariant> variants) {
  Json doc = Json::object();
  if (!variants.empty()) {
    const core::WheelVariant& first = variants.front();
    doc["$schema"] = first.schema;
    doc["default-priorities"] = Json::parse(first.priorities, nullptr, /*allow_exceptions=*/false);
    if (!first.providers.empty()) {
      doc["providers"] = Json::parse(first.providers, nullptr, /*allow_exceptions=*/false);
    }
  }
  Json table = Json::object();
  for (const auto& v : variants) {
    Json props = Json::object();
    for (const auto& [ns, features] : v.properties) {
      for (const auto& [feature, values] : features) props[ns][feature] = values;
    }
    table[v.label] = std::move(props);
  }
  doc["variants"] = std::move(table);
  return doc.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

}  // namespace wf::render
