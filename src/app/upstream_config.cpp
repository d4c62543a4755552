// The [[upstream]] tables of the configuration file (docs/upstreams.md): one row per key, so
// that the reader, upstream_keys() (which the documentation is checked against) and
// upstream_summary() never drift apart. Passwords are read here, from the file, a password
// file or an environment variable, and never written anywhere.

#include <algorithm>
#include <array>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "config_readers.hpp"
#include "config_tables.hpp"
#include "wheelforge/app/app.hpp"
#include "wheelforge/core/name.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::app::detail {
namespace {

using std::chrono::seconds;

/// What one table has read so far, for the checks across keys.
struct Entry {
  core::UpstreamConfig config;
  bool has_name = false;
  std::vector<std::string> password_sources;  ///< the keys that gave a password
};

using ReadFn = void (*)(const toml::node&, const std::string& key, Entry&, ProblemList&);

struct UpstreamKey {
  std::string_view name;
  ReadFn read;
};

bool valid_upstream_name(std::string_view name) {
  if (name.empty() || name.size() > 64 || name.front() == '-') return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
  });
}

/// A duration as a whole number of seconds or a string such as "10m"; nullopt for anything else
/// (the caller names the key and its range).
std::optional<seconds> duration_of(const toml::node& node) {
  if (const auto i = node.value_exact<std::int64_t>(); i && *i >= 0) return seconds{*i};
  if (const auto t = node.value_exact<std::string>()) return parse_duration(*t);
  return std::nullopt;
}

/// Project names, validated and normalized.
std::optional<std::vector<std::string>> read_names(const toml::node& node, const std::string& key,
                                                   ProblemList& problems) {
  auto names = read_strings(node, key, "a list of project names", problems);
  if (!names) return std::nullopt;
  std::vector<std::string> out;
  for (const auto& n : *names) {
    if (!core::is_valid_project_name(n)) {
      problems.push_back(key + ": '" + clean(n) + "' is not a valid project name");
      return std::nullopt;
    }
    out.push_back(core::normalize_name(n));
  }
  return out;
}

std::string trim_newlines(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  return text;
}

const std::array kUpstreamKeys{
    UpstreamKey{"name",
                [](const toml::node& node, const std::string& key, Entry& e, ProblemList& p) {
                  auto v = read_string(node, key, p);
                  if (!v) return;
                  if (!valid_upstream_name(*v)) {
                    p.push_back(key +
                                ": expected lower-case letters, digits and '-' (at most 64, "
                                "not starting with '-'), got '" +
                                clean(*v) + "'");
                    return;
                  }
                  e.config.name = std::move(*v);
                  e.has_name = true;
                }},
    UpstreamKey{"url",
                [](const toml::node& node, const std::string& key, Entry& e, ProblemList& p) {
                  auto v = read_string(node, key, p);
                  if (!v) return;
                  std::string url(trim(*v));
                  const auto rest = http_url_rest(url);
                  if (!rest) {
                    p.push_back(key +
                                ": expected the http:// or https:// URL of a simple index without "
                                "query or fragment, such as https://pypi.org/simple/, got '" +
                                clean(*v) + "'");
                    return;
                  }
                  if (rest->substr(0, rest->find('/')).find('@') != std::string_view::npos) {
                    // Credentials in the URL would end up in logs and answers.
                    p.push_back(key +
                                ": credentials do not belong in the URL: use username and "
                                "password (or password_file, password_env)");
                    return;
                  }
                  if (!url.ends_with('/')) url += '/';
                  e.config.url = std::move(url);
                }},
    UpstreamKey{"username",
                [](const toml::node& node, const std::string& key, Entry& e, ProblemList& p) {
                  auto v = read_string(node, key, p);
                  if (!v) return;
                  if (v->find(':') != std::string::npos || v->empty()) {
                    p.push_back(key + ": expected a user name without ':'");
                    return;
                  }
                  e.config.username = std::move(*v);
                }},
    UpstreamKey{"password",
                [](const toml::node& node, const std::string& key, Entry& e, ProblemList& p) {
                  // The value is never repeated in a message.
                  auto v = node.value_exact<std::string>();
                  if (!v) {
                    p.push_back(key + ": expected a string");
                    return;
                  }
                  e.config.password = std::move(*v);
                  e.password_sources.emplace_back("password");
                }},
    UpstreamKey{"password_file",
                [](const toml::node& node, const std::string& key, Entry& e, ProblemList& p) {
                  auto path = read_absolute_path(node, key, p);
                  if (!path) return;
                  std::ifstream in(*path, std::ios::binary);
                  std::ostringstream text;
                  text << in.rdbuf();
                  if (!in) {
                    p.push_back(key + ": cannot read '" + clean(path->string()) + "'");
                    return;
                  }
                  e.config.password = trim_newlines(text.str());
                  e.password_sources.emplace_back("password_file");
                }},
    UpstreamKey{"password_env",
                [](const toml::node& node, const std::string& key, Entry& e, ProblemList& p) {
                  auto v = read_string(node, key, p);
                  if (!v) return;
                  const char* value = std::getenv(v->c_str());
                  if (value == nullptr || *value == '\0') {
                    p.push_back(key + ": the environment variable '" + clean(*v) + "' is not set");
                    return;
                  }
                  e.config.password = value;
                  e.password_sources.emplace_back("password_env");
                }},
    UpstreamKey{"metadata_ttl",
                [](const toml::node& node, const std::string& key, Entry& e, ProblemList& p) {
                  const std::optional<seconds> d = duration_of(node);
                  if (!d || *d > seconds{7 * 86400}) {
                    p.push_back(key +
                                ": expected a duration from 0s to 168h such as \"10m\", got " +
                                spelled(node));
                    return;
                  }
                  e.config.metadata_ttl = *d;
                }},
    UpstreamKey{"page_timeout",
                [](const toml::node& node, const std::string& key, Entry& e, ProblemList& p) {
                  const std::optional<seconds> d = duration_of(node);
                  if (!d || *d < seconds{1} || *d > seconds{3600}) {
                    p.push_back(key + ": expected a duration from 1s to 1h such as \"60s\", got " +
                                spelled(node));
                    return;
                  }
                  e.config.page_timeout = *d;
                }},
    UpstreamKey{"projects",
                [](const toml::node& node, const std::string& key, Entry& e, ProblemList& p) {
                  if (const auto s = node.value_exact<std::string>()) {
                    if (*s != "all") {
                      p.push_back(key + ": expected \"all\" or a list of project names, got " +
                                  spelled(node));
                      return;
                    }
                    e.config.all_projects = true;
                    return;
                  }
                  auto names = read_names(node, key, p);
                  if (!names) return;
                  e.config.all_projects = false;
                  e.config.projects = std::move(*names);
                }},
    UpstreamKey{"cooldown_days",
                [](const toml::node& node, const std::string& key, Entry& e, ProblemList& p) {
                  if (const auto n = read_count(node, key, 0, 3650, p)) {
                    e.config.cooldown_days = static_cast<std::uint32_t>(*n);
                  }
                }},
    UpstreamKey{"serve_local",
                [](const toml::node& node, const std::string& key, Entry& e, ProblemList& p) {
                  if (auto names = read_names(node, key, p))
                    e.config.serve_local = std::move(*names);
                }},
};

}  // namespace

void read_upstream_tables(const toml::table& root, std::vector<core::UpstreamConfig>& upstreams,
                          ProblemList& problems) {
  const auto* node = root.get("upstream");
  if (node == nullptr) return;
  const auto* array = node->as_array();
  if (array == nullptr || !array->is_array_of_tables()) {
    problems.push_back("upstream: expected [[upstream]] tables, got " + spelled(*node));
    return;
  }
  std::vector<std::string> names;
  for (std::size_t i = 0; i < array->size(); ++i) {
    const auto* table = (*array)[i].as_table();
    Entry e;
    std::string where = "upstream[" + std::to_string(i) + "]";
    if (const auto* n = table->get("name"); n != nullptr && n->is_string()) {
      where = "upstream." + clean(*n->value<std::string>());
    }
    const std::size_t before = problems.size();
    for (const auto& [k, value] : *table) {
      const std::string name(k.str());
      const auto row = std::find_if(kUpstreamKeys.begin(), kUpstreamKeys.end(),
                                    [&](const UpstreamKey& r) { return r.name == name; });
      if (row == kUpstreamKeys.end()) {
        problems.push_back(unknown_key(name, "[[upstream]] " + where, row_names(kUpstreamKeys)));
      } else {
        row->read(value, where + "." + name, e, problems);
      }
    }
    if (table->get("name") == nullptr) problems.push_back(where + ".name: required");
    if (table->get("url") == nullptr) problems.push_back(where + ".url: required");
    if (e.password_sources.size() > 1) {
      problems.push_back(where + ": give one of password, password_file and password_env");
    }
    if (!e.password_sources.empty() && e.config.username.empty()) {
      problems.push_back(where + ".username: required with a password");
    }
    if (!e.config.username.empty() && e.password_sources.empty()) {
      problems.push_back(where +
                         ": username without a password (password, password_file or "
                         "password_env)");
    }
    if (e.has_name) {
      if (std::find(names.begin(), names.end(), e.config.name) != names.end()) {
        problems.push_back(where + ".name: another [[upstream]] has this name");
      }
      names.push_back(e.config.name);
    }
    if (problems.size() == before) upstreams.push_back(std::move(e.config));
  }
}

std::vector<std::string> upstream_keys() {
  std::vector<std::string> keys;
  keys.reserve(kUpstreamKeys.size());
  for (const auto& row : kUpstreamKeys) keys.push_back("upstream." + std::string(row.name));
  return keys;
}

}  // namespace wf::app::detail

namespace wf::app {

std::string upstream_summary(const std::vector<core::UpstreamConfig>& upstreams) {
  std::string out;
  for (const auto& u : upstreams) {
    out += "# upstream " + u.name + ": " + u.url;
    out += u.all_projects ? ", all projects"
                          : ", " + std::to_string(u.projects.size()) + " project(s)";
    out += ", metadata_ttl " + std::to_string(u.metadata_ttl.count()) + "s";
    out += ", page_timeout " + std::to_string(u.page_timeout.count()) + "s";
    if (u.cooldown_days) out += ", cooldown " + std::to_string(*u.cooldown_days) + " day(s)";
    if (!u.serve_local.empty()) {
      out += ", serves local " + std::to_string(u.serve_local.size()) + " name(s)";
    }
    if (!u.username.empty()) out += ", credentials of '" + sanitize_for_log(u.username) + "'";
    out += "\n";
  }
  return out;
}

}  // namespace wf::app
