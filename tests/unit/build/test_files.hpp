// Small file helpers shared by the build module's unit tests.
#pragma once

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace wf::build::testing_files {

/// The whole content of `p` (empty when it cannot be opened).
inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

}  // namespace wf::build::testing_files
