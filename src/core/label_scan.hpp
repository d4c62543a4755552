#pragma once
// The small scanners that both the label parser (variant.cpp) and the view selectors
// (view_selector.cpp) read labels and view segments with; private to core.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "wheelforge/core/variant.hpp"

namespace wf::core::label_scan {

inline bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
inline bool is_lower_alpha(char c) {
  return c >= 'a' && c <= 'z';
}

// Digit runs in labels are short; anything longer than 9 digits would not fit an int and is
// never a version component, so it is simply "not a number".
inline std::optional<int> to_int(std::string_view digits) {
  if (digits.empty() || digits.size() > 9) return std::nullopt;
  int v = 0;
  for (const char c : digits) {
    if (!is_digit(c)) return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return v;
}

inline std::size_t digit_run_end(std::string_view s, std::size_t i) {
  while (i < s.size() && is_digit(s[i])) ++i;
  return i;
}

inline bool has_at(std::string_view s, std::size_t i, std::string_view word) {
  return i <= s.size() && s.substr(i).starts_with(word);
}

struct MajorMinor {
  int major = 0;
  std::optional<int> minor;
};

// CUDA majors 10-19 are written with two digits and 1-9 with one (cu92, cu102, cu118, cu128),
// so the first digit tells where the major ends (docs/torch-labels.md, "CUDA in labels").
inline std::optional<MajorMinor> cuda_from_digits(std::string_view d) {
  if (d.empty() || d.size() > 4 || d[0] == '0') return std::nullopt;
  const std::size_t major_len = d[0] == '1' ? 2 : 1;
  if (d.size() < major_len || d.size() - major_len > 2) return std::nullopt;
  MajorMinor mm{*to_int(d.substr(0, major_len)), std::nullopt};
  if (d.size() > major_len) mm.minor = to_int(d.substr(major_len));
  return mm;
}

inline std::string cuda_tag(int major, std::optional<int> minor) {
  std::string out = "cu" + std::to_string(major);
  if (minor) out += std::to_string(*minor);
  return out;
}

inline std::string rocm_tag(int major, std::optional<int> minor) {
  std::string out = "rocm" + std::to_string(major);
  if (minor) out += "." + std::to_string(*minor);
  return out;
}

inline std::string torch_tag(TorchSeries t) {
  return "torch" + t.str();
}
inline std::string abi_tag(bool abi) {
  return abi ? "cxx11abi1" : "cxx11abi0";
}

// What a label token or a view segment names.
enum class Kind { cuda, cpu, rocm, torch, abi };

// A dotted version `X.Y[.Z]` at p: X and Y of at most two digits, a patch of at most three.
// Returns (major, minor, end) or nullopt when p does not start one.
struct Dotted {
  int major = 0;
  int minor = 0;
  std::size_t end = 0;
};
inline std::optional<Dotted> match_dotted(std::string_view s, std::size_t p) {
  const std::size_t e1 = digit_run_end(s, p);
  if (e1 == p || e1 - p > 2 || e1 + 1 >= s.size() || s[e1] != '.' || !is_digit(s[e1 + 1])) {
    return std::nullopt;
  }
  const std::size_t e2 = digit_run_end(s, e1 + 1);
  if (e2 - (e1 + 1) > 2) return std::nullopt;
  Dotted d{*to_int(s.substr(p, e1 - p)), *to_int(s.substr(e1 + 1, e2 - (e1 + 1))), e2};
  if (e2 + 1 < s.size() && s[e2] == '.' && is_digit(s[e2 + 1])) {
    const std::size_t e3 = digit_run_end(s, e2 + 1);
    if (e3 - (e2 + 1) <= 3) d.end = e3;
  }
  return d;
}

}  // namespace wf::core::label_scan
