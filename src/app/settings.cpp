#include <toml++/toml.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>

#include "config_readers.hpp"
#include "config_tables.hpp"
#include "setting_values.hpp"
#include "wheelforge/app/app.hpp"
#include "wheelforge/build/git_source.hpp"
#include "wheelforge/catalog/catalog.hpp"
#include "wheelforge/store/object_store.hpp"
#include "wheelforge/util/redact.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::app {
namespace {

namespace fs = std::filesystem;
using detail::apply_bool;
using detail::apply_count;
using detail::apply_duration;
using detail::apply_size;
using detail::format_duration;
using detail::format_size;
using detail::kKiB;
using detail::kMiB;
using detail::quoted;
using detail::read_s3_table;
using detail::resolve_s3_credentials;
using std::chrono::seconds;

constexpr seconds kMaxTimeout{3600};

// Which TOML value types a setting accepts in the file.
constexpr unsigned kTomlString = 1U;
constexpr unsigned kTomlInteger = 2U;
constexpr unsigned kTomlBool = 4U;
// An array of strings, passed on as its items separated by ", ".
constexpr unsigned kTomlStrings = 8U;

/// Parses `text` into its field of Settings; returns why it is invalid, or nullopt.
using ApplyFn = std::optional<std::string> (*)(Settings&, std::string_view text);
/// The field as a TOML value.
using PrintFn = std::string (*)(const Settings&);

/// One setting. Its environment variable is WHEELFORGE_<NAME> and its flag --<name> with
/// dashes, so that the three spellings never drift apart.
struct Spec {
  std::string_view name;
  std::optional<std::string> Overrides::*override_value;
  unsigned toml_types;
  bool secret;
  ApplyFn apply;
  PrintFn print;
};

const std::array kSpecs{
    Spec{"data_dir", &Overrides::data_dir, kTomlString, false,
         [](Settings& s, std::string_view text) -> std::optional<std::string> {
           if (text.empty()) return "must not be empty";
           s.data_dir = fs::path(std::string(text));
           return std::nullopt;
         },
         [](const Settings& s) { return toml_quote(s.data_dir.string()); }},
    Spec{"catalog", &Overrides::catalog, kTomlString, false,
         [](Settings& s, std::string_view text) -> std::optional<std::string> {
           if (auto st = catalog::validate_catalog_location(text); !st) {
             std::string_view why = st.error().message;
             if (why.starts_with("catalog: ")) why.remove_prefix(9);
             return std::string(why);
           }
           s.catalog = text.empty() ? "sqlite" : std::string(text);
           // The URI's password is a secret: masked wherever text is logged or shown.
           if (catalog::is_postgres_location(text)) add_secret(catalog::uri_password(text));
           return std::nullopt;
         },
         // Shown with its password masked.
         [](const Settings& s) {
           return toml_quote(catalog::describe_catalog_location(s.catalog));
         }},
    Spec{"listen", &Overrides::listen, kTomlString, false,
         [](Settings& s, std::string_view text) -> std::optional<std::string> {
           if (auto l = parse_listen(text); !l) {
             // parse_listen's message names the setting already; the caller adds the name.
             std::string_view why = l.error().message;
             if (why.starts_with("listen: ")) why.remove_prefix(8);
             return std::string(why);
           }
           s.listen = std::string(text);
           return std::nullopt;
         },
         [](const Settings& s) { return toml_quote(s.listen); }},
    Spec{"max_upload_size", &Overrides::max_upload_size, kTomlString | kTomlInteger, false,
         [](Settings& s, std::string_view text) {
           return apply_size(s.max_upload_size, text, 1, "a size such as 1048576, 512M or 8G");
         },
         [](const Settings& s) { return format_size(s.max_upload_size); }},
    Spec{"max_inflated_size", &Overrides::max_inflated_size, kTomlString | kTomlInteger, false,
         [](Settings& s, std::string_view text) {
           return apply_size(s.max_inflated_size, text, 1, "a size such as 1048576, 512M or 16G");
         },
         [](const Settings& s) { return format_size(s.max_inflated_size); }},
    Spec{"max_compression_ratio", &Overrides::max_compression_ratio, kTomlInteger, false,
         [](Settings& s, std::string_view text) {
           return apply_count(s.max_compression_ratio, text, 1, 1'000'000);
         },
         [](const Settings& s) { return std::to_string(s.max_compression_ratio); }},
    Spec{"max_archive_members", &Overrides::max_archive_members, kTomlInteger, false,
         [](Settings& s, std::string_view text) {
           return apply_count(s.max_archive_members, text, 1, 100'000'000);
         },
         [](const Settings& s) { return std::to_string(s.max_archive_members); }},
    Spec{"worker_threads", &Overrides::worker_threads, kTomlInteger, false,
         [](Settings& s, std::string_view text) {
           return apply_count(s.worker_threads, text, 1, 64);
         },
         [](const Settings& s) { return std::to_string(s.worker_threads); }},
    Spec{"network_threads", &Overrides::network_threads, kTomlInteger, false,
         [](Settings& s, std::string_view text) {
           return apply_count(s.network_threads, text, 0, 64);
         },
         [](const Settings& s) { return std::to_string(s.network_threads); }},
    Spec{"read_timeout", &Overrides::read_timeout, kTomlString | kTomlInteger, false,
         [](Settings& s, std::string_view text) {
           return apply_duration(s.read_timeout, text, seconds{1}, kMaxTimeout);
         },
         [](const Settings& s) { return format_duration(s.read_timeout); }},
    Spec{"first_byte_timeout", &Overrides::first_byte_timeout, kTomlString | kTomlInteger, false,
         [](Settings& s, std::string_view text) {
           return apply_duration(s.first_byte_timeout, text, seconds{1}, kMaxTimeout);
         },
         [](const Settings& s) { return format_duration(s.first_byte_timeout); }},
    Spec{"min_upload_rate", &Overrides::min_upload_rate, kTomlString | kTomlInteger, false,
         [](Settings& s, std::string_view text) {
           return apply_size(s.min_upload_rate, text, 0, "bytes per second such as 1024, 64K or 0");
         },
         [](const Settings& s) { return format_size(s.min_upload_rate); }},
    Spec{"idle_timeout", &Overrides::idle_timeout, kTomlString | kTomlInteger, false,
         [](Settings& s, std::string_view text) {
           return apply_duration(s.idle_timeout, text, seconds{1}, kMaxTimeout);
         },
         [](const Settings& s) { return format_duration(s.idle_timeout); }},
    Spec{"max_connections", &Overrides::max_connections, kTomlInteger, false,
         [](Settings& s, std::string_view text) {
           return apply_count(s.max_connections, text, 1, 1'000'000);
         },
         [](const Settings& s) { return std::to_string(s.max_connections); }},
    Spec{"max_connections_per_client", &Overrides::max_connections_per_client, kTomlInteger, false,
         [](Settings& s, std::string_view text) {
           return apply_count(s.max_connections_per_client, text, 1, 1'000'000);
         },
         [](const Settings& s) { return std::to_string(s.max_connections_per_client); }},
    Spec{"trusted_proxies", &Overrides::trusted_proxies, kTomlStrings | kTomlString, false,
         [](Settings& s, std::string_view text) -> std::optional<std::string> {
           auto parsed = http::parse_trusted_proxies(text);
           if (!parsed) return parsed.error().message;
           s.trusted_proxies = std::move(*parsed);
           return std::nullopt;
         },
         [](const Settings& s) {
           std::string out = "[";
           for (const auto& r : s.trusted_proxies.ranges) {
             if (out.size() > 1) out += ", ";
             out += toml_quote(r.text);
           }
           return out + "]";
         }},
    Spec{"forwarded_header", &Overrides::forwarded_header, kTomlString, false,
         [](Settings& s, std::string_view text) -> std::optional<std::string> {
           const std::string value = to_lower(trim(text));
           if (value == "x-forwarded-for") {
             s.forwarded_header = http::ForwardedHeader::x_forwarded_for;
           } else if (value == "forwarded") {
             s.forwarded_header = http::ForwardedHeader::forwarded;
           } else {
             return "expected \"x-forwarded-for\" or \"forwarded\", got " + quoted(text);
           }
           return std::nullopt;
         },
         [](const Settings& s) {
           return toml_quote(s.forwarded_header == http::ForwardedHeader::forwarded
                                 ? "forwarded"
                                 : "x-forwarded-for");
         }},
    Spec{"shutdown_grace", &Overrides::shutdown_grace, kTomlString | kTomlInteger, false,
         [](Settings& s, std::string_view text) {
           return apply_duration(s.shutdown_grace, text, seconds{0}, kMaxTimeout);
         },
         [](const Settings& s) { return format_duration(s.shutdown_grace); }},
    Spec{"access_log", &Overrides::access_log, kTomlBool, false,
         [](Settings& s, std::string_view text) { return apply_bool(s.access_log, text); },
         [](const Settings& s) { return std::string(s.access_log ? "true" : "false"); }},
    Spec{"private", &Overrides::private_reads, kTomlBool, false,
         [](Settings& s, std::string_view text) { return apply_bool(s.private_reads, text); },
         [](const Settings& s) { return std::string(s.private_reads ? "true" : "false"); }},
    Spec{"tls_cert", &Overrides::tls_cert, kTomlString, false,
         [](Settings& s, std::string_view text) -> std::optional<std::string> {
           s.tls_cert = std::string(text);
           return std::nullopt;
         },
         [](const Settings& s) { return toml_quote(s.tls_cert); }},
    Spec{"tls_key", &Overrides::tls_key, kTomlString, false,
         [](Settings& s, std::string_view text) -> std::optional<std::string> {
           s.tls_key = std::string(text);
           return std::nullopt;
         },
         [](const Settings& s) { return toml_quote(s.tls_key); }},
    Spec{"base_url", &Overrides::base_url, kTomlString, false,
         [](Settings& s, std::string_view text) -> std::optional<std::string> {
           std::string url(trim(text));
           while (url.ends_with('/')) url.pop_back();
           if (url.empty()) {
             s.base_url.clear();
             return std::nullopt;
           }
           if (!detail::http_url_rest(url)) {
             return "expected an http:// or https:// URL without query or fragment, such as "
                    "https://wheels.example.com, got " +
                    quoted(text);
           }
           s.base_url = std::move(url);
           return std::nullopt;
         },
         [](const Settings& s) { return toml_quote(s.base_url); }},
    Spec{"upstream_page_cache", &Overrides::upstream_page_cache, kTomlString | kTomlInteger, false,
         [](Settings& s, std::string_view text) {
           return apply_size(s.upstream_page_cache, text, 64 * kKiB,
                             "a size of at least 64K such as 64M or 1G");
         },
         [](const Settings& s) { return format_size(s.upstream_page_cache); }},
    Spec{"upstream_file_cache", &Overrides::upstream_file_cache, kTomlString | kTomlInteger, false,
         [](Settings& s, std::string_view text) {
           return apply_size(s.upstream_file_cache, text, 0,
                             "a size such as 20G, or 0 for no bound");
         },
         [](const Settings& s) { return format_size(s.upstream_file_cache); }},
    Spec{"upstream_page_disk_cache", &Overrides::upstream_page_disk_cache,
         kTomlString | kTomlInteger, false,
         [](Settings& s, std::string_view text) {
           return apply_size(s.upstream_page_disk_cache, text, 0,
                             "a size such as 1G, or 0 for no bound");
         },
         [](const Settings& s) { return format_size(s.upstream_page_disk_cache); }},
    Spec{"blob_store", &Overrides::blob_store, kTomlString, false,
         [](Settings& s, std::string_view text) -> std::optional<std::string> {
           const std::string value(trim(text));
           if (value != "file" && !parse_blob_store_url(value)) {
             return "expected \"file\" or s3://BUCKET/PREFIX, got " + quoted(text);
           }
           s.blob_store = value;
           return std::nullopt;
         },
         [](const Settings& s) { return toml_quote(s.blob_store); }},
    Spec{"file_serving", &Overrides::file_serving, kTomlString, false,
         [](Settings& s, std::string_view text) -> std::optional<std::string> {
           const std::string value(trim(text));
           if (value != "redirect" && value != "proxy") {
             return "expected \"redirect\" or \"proxy\", got " + quoted(text);
           }
           s.file_serving = value;
           return std::nullopt;
         },
         [](const Settings& s) { return toml_quote(s.file_serving); }},
    Spec{"blob_cache", &Overrides::blob_cache, kTomlString | kTomlInteger, false,
         [](Settings& s, std::string_view text) {
           return apply_size(s.blob_cache, text, kMiB, "a size of at least 1M such as 2G");
         },
         [](const Settings& s) { return format_size(s.blob_cache); }},
};

std::string env_name(std::string_view name) {
  std::string out = "WHEELFORGE_";
  for (const char c : name) {
    out += static_cast<char>(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
  }
  return out;
}

std::string flag_name(std::string_view name) {
  std::string out = "--";
  for (const char c : name) out += c == '_' ? '-' : c;
  return out;
}

std::string expected_types(unsigned types) {
  std::string out;
  for (const auto& [bit, what] :
       {std::pair{kTomlString, "a string"}, std::pair{kTomlInteger, "an integer"},
        std::pair{kTomlBool, "a boolean"}, std::pair{kTomlStrings, "an array of strings"}}) {
    if ((types & bit) == 0) continue;
    if (!out.empty()) out += " or ";
    out += what;
  }
  return out;
}

/// A value and where it came from (the file, the variable or the flag), for messages.
struct Candidate {
  std::string text;
  std::string origin;
};

/// The file parsed, or nullopt after adding why it cannot be (missing, a syntax error).
std::optional<toml::table> parse_file(const fs::path& path, std::vector<std::string>& problems) {
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    problems.push_back("config: " + path.string() + ": no such file");
    return std::nullopt;
  }
  try {
    return toml::parse_file(path.string());
  } catch (const toml::parse_error& e) {
    const auto& where = e.source().begin;
    problems.push_back("config: " + path.string() + ":" + std::to_string(where.line) + ":" +
                       std::to_string(where.column) + ": " + std::string(e.description()));
    return std::nullopt;
  }
}

/// Reads the file's top-level values as text, or adds problems (unknown keys, wrong types).
/// [build] and [recipes] are the build runner's (read_build_tables).
void read_top_level(const toml::table& table, const fs::path& path,
                    std::array<std::optional<Candidate>, kSpecs.size()>& values,
                    std::vector<std::string>& problems) {
  std::vector<std::string_view> known = {"build", "recipes",     "upstream",
                                         "s3",    "oidc_issuer", "attestations"};
  for (const auto& spec : kSpecs) known.push_back(spec.name);
  for (const auto& [key, node] : table) {
    const std::string_view k = key.str();
    if (k == "build" || k == "recipes" || k == "upstream" || k == "s3" || k == "oidc_issuer" ||
        k == "attestations") {
      continue;
    }
    std::size_t i = 0;
    while (i < kSpecs.size() && kSpecs[i].name != k) ++i;
    if (i == kSpecs.size()) {
      problems.push_back(detail::unknown_key(k, path.string(), known));
      continue;
    }
    const unsigned types = kSpecs[i].toml_types;
    std::optional<std::string> text;
    if ((types & kTomlString) != 0 && node.is_string()) {
      text = *node.value<std::string>();
    } else if ((types & kTomlInteger) != 0 && node.is_integer()) {
      const auto n = *node.value<std::int64_t>();
      // A negative number is passed on as text so that the setting's own check reports it.
      text = std::to_string(n);
    } else if ((types & kTomlBool) != 0 && node.is_boolean()) {
      text = *node.value<bool>() ? "true" : "false";
    } else if ((types & kTomlStrings) != 0 && node.is_array()) {
      const toml::array& items = *node.as_array();
      std::string joined;
      if (std::all_of(items.begin(), items.end(),
                      [](const toml::node& n) { return n.is_string(); })) {
        for (const auto& item : items) {
          if (!joined.empty()) joined += ", ";
          joined += *item.value<std::string>();
        }
        text = std::move(joined);
      }
    }
    if (!text) {
      problems.push_back(std::string(k) + ": expected " + expected_types(types) + " (in " +
                         path.string() + ")");
      continue;
    }
    values[i] = Candidate{std::move(*text), path.string()};
  }
}

}  // namespace

std::optional<fs::path> resolve_config_file(const std::optional<std::string>& given) {
  if (given) return fs::path(*given);
  std::error_code ec;
  if (fs::exists(kDefaultConfigFile, ec)) return fs::path(kDefaultConfigFile);
  return std::nullopt;
}

ConfigCheck check_configuration(const std::optional<fs::path>& config_file,
                                const Overrides& overrides) {
  ConfigCheck out;
  std::vector<std::string>& problems = out.problems;
  // Each source replaces the one before it: defaults < file < environment < flags.
  std::array<std::optional<Candidate>, kSpecs.size()> values;
  build::RunnerConfig build;
  std::vector<core::UpstreamConfig> upstreams;
  std::vector<auth::oidc::IssuerConfig> oidc_issuers;
  detail::AttestationTable attestations;
  S3Settings s3;
  if (config_file) {
    // One parse of the whole file: the server's keys and the build runner's tables.
    if (const auto table = parse_file(*config_file, problems)) {
      read_top_level(*table, *config_file, values, problems);
      read_s3_table(*table, *config_file, s3, problems);
      detail::read_build_tables(*table, build, problems);
      detail::read_upstream_tables(*table, upstreams, problems);
      detail::read_oidc_tables(*table, oidc_issuers, problems);
      detail::read_attestations_table(*table, attestations, problems);
    }
  }
  for (std::size_t i = 0; i < kSpecs.size(); ++i) {
    const std::string var = env_name(kSpecs[i].name);
    // An empty variable counts as unset, so that `Environment=WHEELFORGE_X=` in a drop-in
    // (or `X= wheelforge ...` in a shell) restores the file's value.
    if (const char* env = std::getenv(var.c_str()); env != nullptr && *env != '\0') {
      values[i] = Candidate{env, var};
    }
    if (const auto& flag = overrides.*(kSpecs[i].override_value); flag) {
      values[i] = Candidate{*flag, flag_name(kSpecs[i].name)};
    }
  }

  Settings settings;
  for (std::size_t i = 0; i < kSpecs.size(); ++i) {
    if (!values[i]) continue;
    if (auto why = kSpecs[i].apply(settings, values[i]->text)) {
      problems.push_back(std::string(kSpecs[i].name) + ": " + *why + " (from " + values[i]->origin +
                         ")");
    }
  }
  settings.s3 = std::move(s3);
  if (settings.blob_store != "file" && problems.empty()) {
    resolve_s3_credentials(settings.s3, problems);
  }
  out.host_problems = detail::check_build_host(build.host);
  if (!problems.empty()) return out;
  settings.config_file = config_file;
  settings.overrides = overrides;
  // What the configuration holds secret is masked wherever it would be logged or shown.
  for (const auto& u : upstreams) add_secret(u.password);
  add_secret(settings.s3.secret_access_key);
  add_secret(settings.s3.session_token);
  for (const auto& [name, rc] : build.recipes) build::register_source_secrets(rc.recipe.source);
  out.config = Configuration{std::move(settings),
                             std::move(build),
                             std::move(upstreams),
                             std::move(oidc_issuers),
                             std::move(attestations.trust_roots),
                             std::move(attestations.roots),
                             std::move(attestations.signer)};
  return out;
}

Result<Configuration> load_configuration(const std::optional<fs::path>& config_file,
                                         const Overrides& overrides) {
  auto checked = check_configuration(config_file, overrides);
  if (!checked.config) {
    Problems problems;
    for (auto& p : checked.problems) problems.add(std::move(p));
    return problems.to_error();
  }
  return std::move(*checked.config);
}

std::vector<std::string> build_host_problems(const build::HostConfig& host) {
  return detail::check_build_host(host);
}

std::vector<std::string> configuration_keys() {
  std::vector<std::string> keys;
  keys.reserve(kSpecs.size());
  for (const auto& spec : kSpecs) keys.emplace_back(spec.name);
  for (auto& key : detail::build_keys()) keys.push_back(std::move(key));
  for (auto& key : detail::upstream_keys()) keys.push_back(std::move(key));
  for (auto& key : detail::oidc_keys()) keys.push_back(std::move(key));
  for (auto& key : detail::attestation_keys()) keys.push_back(std::move(key));
  for (const auto& key : detail::kS3Keys) keys.push_back("s3." + std::string(key));
  return keys;
}

Result<std::string> server_url(const Settings& settings) {
  if (!settings.base_url.empty()) return settings.base_url;
  auto listen = parse_listen(settings.listen);
  if (!listen) return listen.error();
  auto [host, port] = *listen;
  if (port == 0) {
    return make_error(Errc::invalid, "listen = '" + sanitize_for_log(settings.listen) +
                                         "' has port 0, so the server's port is only known once "
                                         "it runs: set base_url (or listen on a fixed port)");
  }
  if (host.empty() || host == "0.0.0.0") host = "127.0.0.1";
  if (host == "::") host = "::1";
  if (host.find(':') != std::string::npos) host = "[" + host + "]";
  return std::string(settings.tls_cert.empty() ? "http://" : "https://") + host + ":" +
         std::to_string(port);
}

std::string settings_to_toml(const Settings& settings) {
  std::string out = "# wheelforge configuration in effect (flags > WHEELFORGE_* environment > ";
  out += settings.config_file ? sanitize_for_log(settings.config_file->string())
                              : std::string("no config file");
  out += " > defaults)\n";
  for (const auto& spec : kSpecs) {
    if (spec.secret) {
      out += "# " + std::string(spec.name) + " = (secret, not shown)\n";
    } else {
      out += std::string(spec.name) + " = " + spec.print(settings) + "\n";
    }
  }
  if (settings.blob_store != "file") {
    // The object store's table; its secret is never shown.
    const S3Settings& s3 = settings.s3;
    out += "\n[s3]\n";
    out += "endpoint = " + toml_quote(s3.endpoint) + "\n";
    out += "region = " + toml_quote(s3.region) + "\n";
    out += "addressing = " + toml_quote(s3.addressing) + "\n";
    out += "access_key_id = " + toml_quote(s3.access_key_id) + "\n";
    out += "secret_access_key_file = " + toml_quote(s3.secret_access_key_file) + "\n";
    out += "presign_expiry = " + format_duration(s3.presign_expiry) + "\n";
    out += "# secret access key: from " +
           (s3.credentials_from == "[s3]" ? "secret_access_key_file"
                                          : std::string("AWS_SECRET_ACCESS_KEY")) +
           " (secret, not shown)" +
           (s3.session_token.empty() ? "" : "; session token from AWS_SESSION_TOKEN") + "\n";
  }
  return out;
}

}  // namespace wf::app
