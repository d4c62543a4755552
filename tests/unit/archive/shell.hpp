#pragma once
// Running the real tools the archive tests compare against (readelf, objdump, gcc, pip).

#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <utility>

namespace wf::archive::fixtures {

/// Runs a shell command; returns its exit status (-1 when it did not exit) and its output,
/// stdout and stderr together.
inline std::pair<int, std::string> shell(const std::string& command) {
  std::string output;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return {-1, "popen failed"};
  char buffer[4096];
  std::size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) output.append(buffer, n);
  const int status = ::pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

/// A path quoted for the shell (paths in tests have no single quotes).
inline std::string quote(const std::filesystem::path& p) {
  return "'" + p.string() + "'";
}

/// Whether a program is on PATH.
inline bool have_tool(const std::string& name) {
  return shell("command -v " + name + " >/dev/null").first == 0;
}

}  // namespace wf::archive::fixtures
