#include "wheelforge/core/name.hpp"

#include <algorithm>
#include <utility>

namespace wf::core {
namespace {

bool is_ascii_alnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

bool is_name_separator(char c) {
  return c == '-' || c == '_' || c == '.';
}

}  // namespace

std::string normalize_name(std::string_view name) {
  std::string out;
  out.reserve(name.size());
  bool in_separator_run = false;
  for (const char c : name) {
    if (is_name_separator(c)) {
      if (!in_separator_run) out.push_back('-');
      in_separator_run = true;
      continue;
    }
    in_separator_run = false;
    out.push_back((c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c);
  }
  return out;
}

bool is_valid_project_name(std::string_view name) {
  if (name.empty() || !is_ascii_alnum(name.front()) || !is_ascii_alnum(name.back())) {
    return false;
  }
  for (const char c : name) {
    if (!is_ascii_alnum(c) && !is_name_separator(c)) return false;
  }
  return true;
}

bool is_normalized_name(std::string_view name) {
  return is_valid_project_name(name) && normalize_name(name) == name;
}

}  // namespace wf::core

namespace wf::core {

std::size_t edit_distance(std::string_view a, std::string_view b, std::size_t limit) {
  if (a.size() > b.size()) std::swap(a, b);
  if (b.size() - a.size() > limit) return limit + 1;
  // The optimal string alignment distance, row by row over the shorter string: `prev2` and
  // `prev` are the rows of b[j-2] and b[j-1].
  std::vector<std::size_t> prev2(a.size() + 1);
  std::vector<std::size_t> prev(a.size() + 1);
  std::vector<std::size_t> row(a.size() + 1);
  for (std::size_t i = 0; i <= a.size(); ++i) prev[i] = i;
  for (std::size_t j = 1; j <= b.size(); ++j) {
    row[0] = j;
    std::size_t best = row[0];
    for (std::size_t i = 1; i <= a.size(); ++i) {
      row[i] =
          std::min({prev[i] + 1, row[i - 1] + 1, prev[i - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        row[i] = std::min(row[i], prev2[i - 2] + 1);  // two neighbours swapped
      }
      best = std::min(best, row[i]);
    }
    if (best > limit && j > 1) return limit + 1;
    std::swap(prev2, prev);
    std::swap(prev, row);
  }
  return std::min(prev[a.size()], limit + 1);
}

std::vector<std::string> similar_names(std::string_view name,
                                       std::span<const std::string> candidates, std::size_t max) {
  const std::string wanted = normalize_name(name);
  std::vector<std::pair<std::size_t, const std::string*>> hits;
  // A part of a name: "flash" in "flash-attn", "flash-attn" in "flash-attn-3".
  const auto holds_part = [](std::string_view longer, std::string_view part) {
    if (part.size() < 3 || longer.size() <= part.size()) return false;
    return (longer.starts_with(part) && longer[part.size()] == '-') ||
           (longer.ends_with(part) && longer[longer.size() - part.size() - 1] == '-');
  };
  for (const auto& candidate : candidates) {
    if (candidate == wanted) continue;
    const std::size_t longer = std::max(candidate.size(), wanted.size());
    const std::size_t limit = std::clamp<std::size_t>(longer / 3, 1, 3);
    std::size_t d = edit_distance(wanted, candidate, limit);
    if (d > limit) {
      if (!holds_part(candidate, wanted) && !holds_part(wanted, candidate)) continue;
      d = limit + 1;  // after the close spellings
    }
    hits.emplace_back(d, &candidate);
  }
  std::sort(hits.begin(), hits.end(), [](const auto& x, const auto& y) {
    return x.first != y.first ? x.first < y.first : *x.second < *y.second;
  });
  std::vector<std::string> out;
  for (std::size_t i = 0; i < hits.size() && i < max; ++i) out.push_back(*hits[i].second);
  return out;
}

}  // namespace wf::core
