#include <toml++/toml.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>

#include "config_readers.hpp"
#include "config_tables.hpp"
#include "wheelforge/app/app.hpp"
#include "wheelforge/build/git_source.hpp"
#include "wheelforge/catalog/catalog.hpp"
#include "wheelforge/store/object_store.hpp"
#include "wheelforge/util/redact.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::app {
namespace {

namespace fs = std::filesystem;
using std::chrono::seconds;

constexpr std::uint64_t kKiB = 1ULL << 10U;
constexpr std::uint64_t kMiB = 1ULL << 20U;
constexpr std::uint64_t kGiB = 1ULL << 30U;
constexpr std::uint64_t kTiB = 1ULL << 40U;
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

std::string format_size(std::uint64_t bytes) {
  for (const auto& [unit, suffix] :
       {std::pair{kTiB, 'T'}, std::pair{kGiB, 'G'}, std::pair{kMiB, 'M'}, std::pair{kKiB, 'K'}}) {
    if (bytes >= unit && bytes % unit == 0)
      return toml_quote(std::to_string(bytes / unit) + suffix);
  }
  return toml_quote(std::to_string(bytes));
}

std::string format_duration(seconds d) {
  const auto n = d.count();
  if (n != 0 && n % 3600 == 0) return toml_quote(std::to_string(n / 3600) + "h");
  if (n != 0 && n % 60 == 0) return toml_quote(std::to_string(n / 60) + "m");
  return toml_quote(std::to_string(n) + "s");
}

std::string quoted(std::string_view value) {
  return "'" + sanitize_for_log(value) + "'";
}

std::optional<std::string> apply_count(std::size_t& field, std::string_view text, std::uint64_t min,
                                       std::uint64_t max) {
  const auto n = parse_u64(trim(text));
  if (!n || *n < min || *n > max) {
    return "expected a whole number from " + std::to_string(min) + " to " + std::to_string(max) +
           ", got " + quoted(text);
  }
  field = static_cast<std::size_t>(*n);
  return std::nullopt;
}

/// A byte count ("1048576", "64K", "8G") of at least `min`; `expected` names the form in the
/// error message.
std::optional<std::string> apply_size(std::uint64_t& field, std::string_view text,
                                      std::uint64_t min, std::string_view expected) {
  const auto n = parse_size(text);
  if (!n || *n < min) return "expected " + std::string(expected) + ", got " + quoted(text);
  field = *n;
  return std::nullopt;
}

std::optional<std::string> apply_bool(bool& field, std::string_view text) {
  const auto b = parse_bool(text);
  if (!b) return "expected true or false, got " + quoted(text);
  field = *b;
  return std::nullopt;
}

std::optional<std::string> apply_duration(seconds& field, std::string_view text, seconds min,
                                          seconds max) {
  const auto d = parse_duration(text);
  if (!d) return "expected a duration such as 30s, 2m or 1h, got " + quoted(text);
  if (*d < min || *d > max) {
    return "expected a duration from " + std::to_string(min.count()) + "s to " +
           std::to_string(max.count()) + "s, got " + quoted(text);
  }
  field = *d;
  return std::nullopt;
}

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

constexpr std::array<std::string_view, 6> kS3Keys = {
    "endpoint",      "region", "addressing", "access_key_id", "secret_access_key_file",
    "presign_expiry"};

/// Reads the [s3] table into `s3`, adding every problem ("s3.KEY: ...").
void read_s3_table(const toml::table& root, const fs::path& path, S3Settings& s3,
                   std::vector<std::string>& problems) {
  const toml::node* node = root.get("s3");
  if (node == nullptr) return;
  const toml::table* table = node->as_table();
  if (table == nullptr) {
    problems.push_back("s3: expected a table ([s3]) (in " + path.string() + ")");
    return;
  }
  const std::vector<std::string_view> known(kS3Keys.begin(), kS3Keys.end());
  for (const auto& [key, value] : *table) {
    const std::string_view k = key.str();
    const std::string where = "s3." + std::string(k);
    if (std::find(kS3Keys.begin(), kS3Keys.end(), k) == kS3Keys.end()) {
      problems.push_back(detail::unknown_key(k, "[s3]", known));
      continue;
    }
    if (k == "presign_expiry") {
      std::string text;
      if (value.is_integer()) {
        text = std::to_string(*value.value<std::int64_t>());
      } else if (value.is_string()) {
        text = *value.value<std::string>();
      } else {
        problems.push_back(where + ": expected a duration such as 5m (in " + path.string() + ")");
        continue;
      }
      if (auto why = apply_duration(s3.presign_expiry, text, seconds{1}, seconds{604800})) {
        problems.push_back(where + ": " + *why);
      }
      continue;
    }
    if (!value.is_string()) {
      problems.push_back(where + ": expected a string (in " + path.string() + ")");
      continue;
    }
    std::string text(trim(*value.value<std::string>()));
    if (k == "endpoint") {
      while (text.ends_with('/')) text.pop_back();
      if (!text.empty() && !detail::http_url_rest(text)) {
        problems.push_back(where + ": expected an http:// or https:// URL such as " +
                           "https://s3.eu-west-1.amazonaws.com, got " + (quoted)(text));
        continue;
      }
      s3.endpoint = text;
    } else if (k == "region") {
      if (text.empty()) {
        problems.push_back(where + ": must not be empty");
        continue;
      }
      s3.region = text;
    } else if (k == "addressing") {
      if (text != "path" && text != "virtual") {
        problems.push_back(where + ": expected \"path\" or \"virtual\", got " + (quoted)(text));
        continue;
      }
      s3.addressing = text;
    } else if (k == "access_key_id") {
      s3.access_key_id = text;
    } else if (k == "secret_access_key_file") {
      s3.secret_access_key_file = text;
    }
  }
}

/// With an S3 blob store: the credentials, from [s3] or the environment (the client's rule,
/// store::load_s3_credentials); adds a problem when there are none.
void resolve_s3_credentials(S3Settings& s3, std::vector<std::string>& problems) {
  store::S3Config config;
  config.access_key_id = s3.access_key_id;
  if (auto st = store::load_s3_credentials(config, s3.secret_access_key_file); !st) {
    problems.push_back("s3: " + st.error().message);
    return;
  }
  s3.access_key_id = config.access_key_id;
  s3.secret_access_key = config.secret_access_key;
  s3.session_token = config.session_token;
  s3.credentials_from = s3.secret_access_key_file.empty() ? "environment" : "[s3]";
}

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

std::optional<BlobStoreUrl> parse_blob_store_url(std::string_view text) {
  constexpr std::string_view kScheme = "s3://";
  if (!text.starts_with(kScheme)) return std::nullopt;
  text.remove_prefix(kScheme.size());
  const auto slash = text.find('/');
  BlobStoreUrl out;
  out.bucket = std::string(text.substr(0, slash));
  if (slash != std::string_view::npos) out.prefix = std::string(text.substr(slash + 1));
  while (out.prefix.ends_with('/')) out.prefix.pop_back();
  // S3 bucket names: 3 to 63 of lower-case letters, digits, '.' and '-'.
  if (out.bucket.size() < 3 || out.bucket.size() > 63) return std::nullopt;
  for (const char c : out.bucket) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-')) {
      return std::nullopt;
    }
  }
  for (const char c : out.prefix) {
    if (static_cast<unsigned char>(c) < 0x20 || c == '\\') return std::nullopt;
  }
  if (out.prefix.starts_with('/') || out.prefix.find("//") != std::string::npos) {
    return std::nullopt;
  }
  return out;
}

std::optional<std::uint64_t> parse_size(std::string_view text) {
  text = trim(text);
  if (text.empty()) return std::nullopt;
  std::uint64_t multiplier = 1;
  switch (text.back()) {
    case 'K':
    case 'k':
      multiplier = kKiB;
      break;
    case 'M':
    case 'm':
      multiplier = kMiB;
      break;
    case 'G':
    case 'g':
      multiplier = kGiB;
      break;
    case 'T':
    case 't':
      multiplier = kTiB;
      break;
    default:
      break;
  }
  if (multiplier != 1) text.remove_suffix(1);
  const auto n = parse_u64(text);
  if (!n || *n > UINT64_MAX / multiplier) return std::nullopt;
  return *n * multiplier;
}

std::optional<seconds> parse_duration(std::string_view text) {
  text = trim(text);
  if (text.empty()) return std::nullopt;
  if (const auto n = parse_u64(text)) {
    if (*n > static_cast<std::uint64_t>(INT32_MAX)) return std::nullopt;
    return seconds{static_cast<seconds::rep>(*n)};
  }
  // A sequence of NUMBER UNIT parts, largest unit first as in "1h30m" or "2m30s".
  std::uint64_t total = 0;
  std::uint64_t last_unit = UINT64_MAX;
  while (!text.empty()) {
    std::size_t digits = 0;
    while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
    if (digits == 0 || digits == text.size()) return std::nullopt;
    const auto n = parse_u64(text.substr(0, digits));
    std::uint64_t unit = 0;
    switch (text[digits]) {
      case 'h':
        unit = 3600;
        break;
      case 'm':
        unit = 60;
        break;
      case 's':
        unit = 1;
        break;
      default:
        return std::nullopt;
    }
    if (!n || unit >= last_unit || *n > static_cast<std::uint64_t>(INT32_MAX) / unit) {
      return std::nullopt;
    }
    last_unit = unit;
    total += *n * unit;
    if (total > static_cast<std::uint64_t>(INT32_MAX)) return std::nullopt;
    text.remove_prefix(digits + 1);
  }
  return seconds{static_cast<seconds::rep>(total)};
}

std::optional<bool> parse_bool(std::string_view text) {
  const std::string t = to_lower(trim(text));
  if (t == "true" || t == "yes" || t == "on" || t == "1") return true;
  if (t == "false" || t == "no" || t == "off" || t == "0") return false;
  return std::nullopt;
}

Result<std::pair<std::string, std::uint16_t>> parse_listen(std::string_view text) {
  const auto colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0) {
    return make_error(Errc::invalid,
                      "listen: expected HOST:PORT, got '" + sanitize_for_log(text) + "'");
  }
  std::string host(text.substr(0, colon));
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  const auto port = parse_u64(text.substr(colon + 1));
  if (!port || *port > 65535) {
    return make_error(Errc::invalid, "listen: invalid port in '" + sanitize_for_log(text) + "'");
  }
  return std::pair{host, static_cast<std::uint16_t>(*port)};
}

std::string toml_quote(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20 || u == 0x7f) {
      std::array<char, 8> buf{};
      std::snprintf(buf.data(), buf.size(), "\\u%04X", static_cast<unsigned>(u));
      out += buf.data();
    } else {
      out += c;
    }
  }
  out += '"';
  return out;
}

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
  for (const auto& key : kS3Keys) keys.push_back("s3." + std::string(key));
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

namespace detail {

Status resolve_s3_credentials_for(Settings& settings) {
  std::vector<std::string> problems;
  resolve_s3_credentials(settings.s3, problems);
  if (!problems.empty()) return make_error(Errc::invalid, problems.front());
  add_secret(settings.s3.secret_access_key);
  add_secret(settings.s3.session_token);
  return ok_status();
}

}  // namespace detail

}  // namespace wf::app
