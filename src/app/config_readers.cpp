#include "config_readers.hpp"

#include <algorithm>
#include <sstream>

#include "wheelforge/util/strings.hpp"

namespace wf::app::detail {

namespace fs = std::filesystem;

namespace {

/// Optimal string alignment distance (Levenshtein with adjacent transpositions).
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

}  // namespace

std::string spelled(const toml::node& node) {
  if (const auto s = node.value_exact<std::string>()) return "'" + sanitize_for_log(*s) + "'";
  if (const auto i = node.value_exact<std::int64_t>()) return std::to_string(*i);
  if (const auto d = node.value_exact<double>()) {
    std::ostringstream out;
    out << *d;
    return out.str();
  }
  if (const auto b = node.value_exact<bool>()) return *b ? "true" : "false";
  if (node.is_table()) return "a table";
  if (node.is_array()) return "a list";
  return "a date or time";
}

std::string clean(std::string_view text) {
  return sanitize_for_log(text);
}

void add_split(ProblemList& problems, const std::string& key, const std::string& message) {
  std::size_t start = 0;
  while (start <= message.size()) {
    const std::size_t end = std::min(message.find("; ", start), message.size());
    if (end > start) problems.push_back(key + ": " + message.substr(start, end - start));
    start = end + 2;
  }
}

std::optional<std::string> read_string(const toml::node& node, const std::string& key,
                                       ProblemList& problems) {
  if (auto v = node.value_exact<std::string>()) return std::move(*v);
  problems.push_back(key + ": expected a string, got " + spelled(node));
  return std::nullopt;
}

std::optional<bool> read_bool(const toml::node& node, const std::string& key,
                              ProblemList& problems) {
  if (const auto v = node.value_exact<bool>()) return *v;
  problems.push_back(key + ": expected true or false, got " + spelled(node));
  return std::nullopt;
}

std::optional<std::int64_t> read_count(const toml::node& node, const std::string& key,
                                       std::int64_t min, std::int64_t max, ProblemList& problems) {
  if (const auto v = node.value_exact<std::int64_t>(); v && *v >= min && *v <= max) return *v;
  problems.push_back(key + ": expected a whole number from " + std::to_string(min) + " to " +
                     std::to_string(max) + ", got " + spelled(node));
  return std::nullopt;
}

std::optional<std::vector<std::string>> read_strings(const toml::node& node, const std::string& key,
                                                     std::string_view what, ProblemList& problems) {
  const auto* array = node.as_array();
  if (array == nullptr) {
    problems.push_back(key + ": expected " + std::string(what) + ", got " + spelled(node));
    return std::nullopt;
  }
  std::vector<std::string> out;
  for (const auto& item : *array) {
    auto v = item.value_exact<std::string>();
    if (!v) {
      problems.push_back(key + ": expected " + std::string(what) + ", got a list with " +
                         spelled(item));
      return std::nullopt;
    }
    out.push_back(std::move(*v));
  }
  return out;
}

std::optional<fs::path> read_absolute_path(const toml::node& node, const std::string& key,
                                           ProblemList& problems) {
  auto text = node.value_exact<std::string>();
  if (!text) {
    problems.push_back(key + ": expected a path, got " + spelled(node));
    return std::nullopt;
  }
  if (text->empty() || text->front() != '/') {
    problems.push_back(key + ": expected an absolute path, got '" + clean(*text) + "'");
    return std::nullopt;
  }
  return fs::path(*text);
}

std::string did_you_mean(std::string_view key, const std::vector<std::string_view>& known) {
  const std::string lower = to_lower(key);
  std::string_view best;
  std::size_t best_distance = SIZE_MAX;
  for (const auto candidate : known) {
    std::size_t distance = edit_distance(lower, candidate);
    const std::size_t shorter = std::min(lower.size(), candidate.size());
    // "listen_address" for "listen", "memory" for "memory_reserve".
    if (shorter >= 4 && (lower.starts_with(candidate) || candidate.starts_with(lower))) {
      distance = std::min(distance, std::size_t{2});
    }
    if (distance < best_distance) {
      best_distance = distance;
      best = candidate;
    }
  }
  if (best.empty() || best_distance > std::max<std::size_t>(2, best.size() / 3)) return "";
  return " (did you mean '" + std::string(best) + "'?)";
}

std::string unknown_key(std::string_view key, std::string_view where,
                        const std::vector<std::string_view>& known) {
  return "unknown setting '" + clean(key) + "' in " + std::string(where) + did_you_mean(key, known);
}

std::optional<std::string_view> http_url_rest(std::string_view url) {
  const std::size_t scheme = url.starts_with("http://") ? 7 : url.starts_with("https://") ? 8 : 0;
  const bool clean_text = std::all_of(url.begin(), url.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u > 0x20 && u != 0x7f && c != '?' && c != '#' && c != '"' && c != '\\';
  });
  const std::string_view rest = url.substr(scheme);
  if (scheme == 0 || rest.empty() || rest.front() == '/' || !clean_text) return std::nullopt;
  return rest;
}

}  // namespace wf::app::detail
