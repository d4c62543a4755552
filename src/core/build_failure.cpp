#include "wheelforge/core/build_failure.hpp"

#include <array>
#include <optional>

#include "wheelforge/util/strings.hpp"

namespace wf::core {
namespace {

constexpr std::size_t kMaxCause = 300;

bool contains(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// Terminal colour and cursor sequences (ESC '[' parameters letter), which compilers emit when
// they believe they talk to a terminal.
std::string strip_escapes(std::string_view line) {
  std::string out;
  out.reserve(line.size());
  for (std::size_t i = 0; i < line.size(); ++i) {
    if (line[i] == '\x1b' && i + 1 < line.size() && line[i + 1] == '[') {
      i += 2;
      while (i < line.size() && !(line[i] >= '@' && line[i] <= '~')) ++i;
      continue;
    }
    out += line[i];
  }
  return out;
}

// Summaries that tools print after the real error: they say that something failed, not why.
bool is_summary(std::string_view line) {
  constexpr std::array<std::string_view, 10> kSummaries = {
      "error: subprocess-exited-with-error",
      "error: metadata-generation-failed",
      "ERROR: Failed building wheel",
      "ERROR: Failed to build",
      "ERROR: Could not build wheels",
      "error: command '",
      "collect2: error: ld returned",
      "FAILED: ",
      "ninja: build stopped",
      "ERROR: Command errored out",
  };
  for (const auto s : kSummaries) {
    if (starts_with(line, s)) return true;
  }
  return false;
}

bool is_identifier_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.';
}

// "ModuleNotFoundError: No module named 'x'", "subprocess.CalledProcessError: ...",
// "AssertionError": the last line of a Python traceback.
bool is_python_exception(std::string_view line) {
  std::size_t n = 0;
  while (n < line.size() && is_identifier_char(line[n])) ++n;
  if (n == 0 || line[0] == '.' || (line[0] >= '0' && line[0] <= '9')) return false;
  const std::string_view name = line.substr(0, n);
  const bool exception_name = (name.size() > 5 && name.substr(name.size() - 5) == "Error") ||
                              (name.size() > 9 && name.substr(name.size() - 9) == "Exception");
  if (!exception_name) return false;
  return n == line.size() || line.substr(n, 2) == ": ";
}

enum class Tier { specific, generic };

std::optional<Tier> classify(std::string_view line) {
  if (line.empty() || starts_with(line, "==> ") || is_summary(line)) return std::nullopt;
  // Compilers and linkers.
  if (contains(line, ": error: ") || contains(line, "): error: ") ||
      contains(line, ": fatal error: ") || starts_with(line, "fatal error: ") ||
      starts_with(line, "nvcc fatal") || starts_with(line, "nvcc error") ||
      starts_with(line, "ptxas fatal") || starts_with(line, "ptxas error") ||
      contains(line, "undefined reference to") || contains(line, "ld: cannot find") ||
      contains(line, "error while loading shared libraries")) {
    return Tier::specific;
  }
  if (contains(line, "Killed signal terminated program") ||
      contains(line, "internal compiler error: Killed")) {
    return Tier::specific;
  }
  // pip.
  if (contains(line, "No matching distribution found for") ||
      contains(line, "Could not install packages due to")) {
    return Tier::specific;
  }
  if (is_python_exception(line)) return Tier::specific;
  if (starts_with(line, "error: ") || starts_with(line, "ERROR: ") ||
      starts_with(line, "Error: ") || contains(line, "No such file or directory") ||
      contains(line, "Permission denied") || contains(line, "No space left on device")) {
    return Tier::generic;
  }
  return std::nullopt;
}

std::string shorten(std::string line) {
  if (starts_with(line, "ERROR: ")) line.erase(0, 7);
  if (line.size() <= kMaxCause) return line;
  std::size_t cut = kMaxCause;
  while (cut > 0 && (static_cast<unsigned char>(line[cut]) & 0xC0U) == 0x80U) --cut;
  line.resize(cut);
  return line + "…";
}

}  // namespace

std::string failure_cause(std::string_view output) {
  std::string generic;
  for (const std::string_view raw : split(output, '\n')) {
    const std::string line = strip_escapes(raw);
    const std::string_view text = trim(line);
    const auto tier = classify(text);
    if (!tier) continue;
    if (*tier == Tier::specific) return shorten(std::string(text));
    if (generic.empty()) generic = std::string(text);
  }
  return generic.empty() ? std::string() : shorten(std::move(generic));
}

}  // namespace wf::core
