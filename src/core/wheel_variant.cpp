#include "wheelforge/core/wheel_variant.hpp"

#include <algorithm>
#include <charconv>

#include "wheelforge/util/strings.hpp"

namespace wf::core {
namespace {

constexpr std::string_view kStoredHeader = "wfvariant1";
constexpr std::string_view kSeparator = " :: ";
constexpr std::string_view kNvidia = "nvidia";
constexpr std::string_view kCudaLowerBound = "cuda_version_lower_bound";
// Enough of a definition to recognise it in a message.
constexpr std::size_t kShownLength = 300;

bool is_key_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
}

std::optional<int> small_number(std::string_view s) {
  if (s.empty() || s.size() > 3) return std::nullopt;
  int n = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return n;
}

std::string shown(std::string_view s) {
  return sanitize_for_log(s, kShownLength);
}

std::string cuda_text(int major, std::optional<int> minor) {
  std::string out = std::to_string(major);
  if (minor) out += "." + std::to_string(*minor);
  return out;
}

}  // namespace

bool is_valid_variant_key(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), is_key_char);
}

bool is_valid_variant_value(std::string_view s) {
  return !s.empty() &&
         std::all_of(s.begin(), s.end(), [](char c) { return is_key_char(c) || c == '.'; });
}

std::string describe_properties(const VariantProperties& properties) {
  std::string out;
  for (const auto& [ns, features] : properties) {
    for (const auto& [feature, values] : features) {
      for (const auto& value : values) {
        if (!out.empty()) out += ", ";
        out += ns;
        out += kSeparator;
        out += feature;
        out += kSeparator;
        out += value;
      }
    }
  }
  return out.empty() ? std::string("no properties") : out;
}

std::string encode_variant(const WheelVariant& variant) {
  std::string out(kStoredHeader);
  for (const std::string* line :
       {&variant.label, &variant.schema, &variant.priorities, &variant.providers}) {
    out += '\n';
    out += *line;
  }
  for (const auto& [ns, features] : variant.properties) {
    for (const auto& [feature, values] : features) {
      for (const auto& value : values) {
        out += '\n';
        out += ns;
        out += kSeparator;
        out += feature;
        out += kSeparator;
        out += value;
      }
    }
  }
  return out;
}

std::optional<WheelVariant> decode_variant(std::string_view text) {
  const auto lines = split(text, '\n');
  if (lines.size() < 5 || lines[0] != kStoredHeader) return std::nullopt;
  WheelVariant v;
  v.label = std::string(lines[1]);
  v.schema = std::string(lines[2]);
  v.priorities = std::string(lines[3]);
  v.providers = std::string(lines[4]);
  for (std::size_t i = 5; i < lines.size(); ++i) {
    const std::string_view line = lines[i];
    const auto first = line.find(kSeparator);
    if (first == std::string_view::npos) return std::nullopt;
    const auto second = line.find(kSeparator, first + kSeparator.size());
    if (second == std::string_view::npos) return std::nullopt;
    const std::string ns(line.substr(0, first));
    const std::string feature(
        line.substr(first + kSeparator.size(), second - first - kSeparator.size()));
    const std::string value(line.substr(second + kSeparator.size()));
    if (!is_valid_variant_key(ns) || !is_valid_variant_key(feature) ||
        !is_valid_variant_value(value)) {
      return std::nullopt;
    }
    v.properties[ns][feature].push_back(value);
  }
  for (auto& [ns, features] : v.properties) {
    for (auto& [feature, values] : features) {
      std::sort(values.begin(), values.end());
      values.erase(std::unique(values.begin(), values.end()), values.end());
    }
  }
  return v;
}

std::optional<VariantCuda> variant_cuda(const VariantProperties& properties) {
  const auto ns = properties.find(std::string(kNvidia));
  if (ns == properties.end()) return std::nullopt;
  const auto feature = ns->second.find(std::string(kCudaLowerBound));
  if (feature == ns->second.end()) return std::nullopt;
  std::optional<VariantCuda> best;
  for (const auto& value : feature->second) {
    const auto parts = split(value, '.');
    if (parts.empty() || parts.size() > 3) continue;
    const auto major = small_number(parts[0]);
    if (!major) continue;
    std::optional<int> minor;
    if (parts.size() > 1) {
      minor = small_number(parts[1]);
      if (!minor) continue;
    }
    const auto key = [](int a, std::optional<int> b) { return std::pair(a, b.value_or(-1)); };
    if (!best || key(*major, minor) < key(best->major, best->minor)) {
      best = VariantCuda{*major, minor,
                         std::string(kNvidia) + std::string(kSeparator) +
                             std::string(kCudaLowerBound) + std::string(kSeparator) + value};
    }
  }
  return best;
}

Result<VariantHints> hints_with_variant(VariantHints hints, std::string_view local_label,
                                        const WheelVariant& variant) {
  const auto cuda = variant_cuda(variant.properties);
  if (!cuda) return hints;
  const std::string said =
      "variant property '" + cuda->property + "' of variant label '" + shown(variant.label) + "'";
  if (local_label.starts_with('+')) local_label.remove_prefix(1);
  const std::string label = "local version label '+" + shown(local_label) + "'";
  switch (hints.backend) {
    case Backend::none:
      hints.backend = Backend::cuda;
      hints.cuda_major = cuda->major;
      hints.cuda_minor = cuda->minor;
      return hints;
    case Backend::cuda:
      if (hints.cuda_major != cuda->major ||
          (hints.cuda_minor && cuda->minor && *hints.cuda_minor != *cuda->minor)) {
        return make_error(Errc::invalid,
                          said + " says CUDA " + cuda_text(cuda->major, cuda->minor) +
                              ", but the " + label + " says CUDA " +
                              cuda_text(hints.cuda_major.value_or(0), hints.cuda_minor) +
                              ": the two must name the same CUDA");
      }
      if (!hints.cuda_minor) hints.cuda_minor = cuda->minor;
      return hints;
    case Backend::cpu:
    case Backend::rocm:
      return make_error(Errc::invalid, said + " says CUDA, but the " + label + " says " +
                                           hints.backend_label() + ": the two must agree");
  }
  return hints;
}

Status check_variant_against_binaries(const WheelVariant& variant, const WheelFindings& findings) {
  const auto cuda = variant_cuda(variant.properties);
  const BinaryFindings* linked = findings.cuda_evidence();
  if (!cuda || linked == nullptr || !linked->cuda_major || *linked->cuda_major == cuda->major) {
    return ok_status();
  }
  return make_error(Errc::invalid, "variant property '" + cuda->property + "' of variant label '" +
                                       shown(variant.label) + "' says CUDA " +
                                       cuda_text(cuda->major, cuda->minor) + ", but " +
                                       linked->path + " links " + linked->cuda_library + " (CUDA " +
                                       std::to_string(*linked->cuda_major) +
                                       "): the properties must name the CUDA the binary links");
}

std::optional<std::string> variant_conflict(const WheelVariant& incoming,
                                            const WheelVariant& existing,
                                            std::string_view existing_file) {
  const std::string other = "'" + shown(existing_file) + "'";
  const auto differs = [&](const std::string& label,
                           const VariantProperties& props) -> std::optional<std::string> {
    if (label != existing.label || props == existing.properties) return std::nullopt;
    return "variant label '" + shown(label) + "' is defined as {" +
           shown(describe_properties(props)) + "} here, but as {" +
           shown(describe_properties(existing.properties)) + "} by " + other +
           " of the same release: a label means the same properties in every file of a release";
  };
  if (auto d = differs(incoming.label, incoming.properties)) return d;
  for (const auto& [label, props] : incoming.others) {
    if (auto d = differs(label, props)) return d;
  }
  const auto same = [&](std::string_view what, const std::string& a,
                        const std::string& b) -> std::optional<std::string> {
    if (a == b) return std::nullopt;
    return "variant.json " + std::string(what) + " " + shown(a.empty() ? "(none)" : a) +
           " differs from " + shown(b.empty() ? "(none)" : b) + " in " + other +
           " of the same release: the release's variants.json needs one";
  };
  if (auto d = same("$schema", incoming.schema, existing.schema)) return d;
  if (auto d = same("default-priorities", incoming.priorities, existing.priorities)) return d;
  return same("providers", incoming.providers, existing.providers);
}

}  // namespace wf::core
