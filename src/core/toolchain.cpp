#include "wheelforge/core/toolchain.hpp"

#include <algorithm>

#include "core/label_scan.hpp"
#include "wheelforge/core/variant.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::core {
namespace {

using label_scan::is_digit;

// The digits and dots that start `s` ("12.8.93, more" -> "12.8.93").
std::string_view leading_version(std::string_view s) {
  std::size_t n = 0;
  while (n < s.size() && (is_digit(s[n]) || s[n] == '.')) ++n;
  while (n > 0 && s[n - 1] == '.') --n;
  return s.substr(0, n);
}

std::string shown_output(std::string_view s) {
  return sanitize_for_log(s, 120);
}

}  // namespace

std::optional<NvccVersion> parse_nvcc_version(std::string_view output) {
  std::optional<NvccVersion> found;
  for (const std::string_view line : split(output, '\n')) {
    const std::size_t at = line.find("release ");
    if (at == std::string_view::npos) continue;
    const std::string_view release = leading_version(line.substr(at + 8));
    const auto cuda = parse_cuda_version(release);
    if (!cuda) continue;
    NvccVersion v{*cuda, std::string(release)};
    if (const std::size_t vpos = line.find(", V", at); vpos != std::string_view::npos) {
      const std::string_view full = leading_version(line.substr(vpos + 3));
      if (!full.empty()) v.full = std::string(full);
    }
    found = std::move(v);
  }
  return found;
}

std::string_view environment_probe_script() {
  // Printed as key=value lines: no JSON parser is needed on our side, and values never hold a
  // newline (versions, a path, one exception line).
  return "import platform, sys\n"
         "print('python_version=' + platform.python_version())\n"
         "print('python_executable=' + sys.executable)\n"
         "try:\n"
         "    import torch\n"
         "except BaseException as e:\n"
         "    print('torch_error=' + (type(e).__name__ + ': ' + str(e)).replace('\\n', ' '))\n"
         "else:\n"
         "    print('torch_version=' + str(torch.__version__))\n"
         "    cuda = getattr(getattr(torch, 'version', None), 'cuda', None)\n"
         "    print('torch_cuda=' + ('None' if cuda is None else str(cuda)))\n"
         "    try:\n"
         "        from importlib import metadata\n"
         "        wheel = metadata.distribution('torch').read_text('WHEEL') or ''\n"
         "    except BaseException:\n"
         "        wheel = ''\n"
         "    print('torch_wheel_tags=' + ' '.join(line[4:].strip() for line in "
         "wheel.splitlines() if line.startswith('Tag:')))\n";
}

Result<EnvironmentProbe> parse_environment_probe(std::string_view output) {
  EnvironmentProbe p;
  bool torch_cuda_seen = false;
  for (std::string_view line : split(output, '\n')) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const std::size_t eq = line.find('=');
    if (eq == std::string_view::npos) continue;
    const std::string_view key = line.substr(0, eq);
    const std::string value(line.substr(eq + 1));
    if (key == "python_version") {
      p.python_version = value;
    } else if (key == "python_executable") {
      p.python_executable = value;
    } else if (key == "torch_version") {
      p.torch_version = value;
    } else if (key == "torch_cuda") {
      torch_cuda_seen = true;
      p.torch_cuda = value == "None" ? std::nullopt : std::optional<std::string>(value);
    } else if (key == "torch_error") {
      p.torch_error = value;
    } else if (key == "torch_wheel_tags") {
      // "cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64": the platform part is the
      // third, and may be compressed.
      p.torch_platform_tags.clear();
      for (const auto tag : split(value, ' ')) {
        const auto parts = split(tag, '-');
        if (parts.size() != 3) continue;
        for (const auto platform : split(parts[2], '.')) {
          if (platform.empty()) continue;
          if (std::find(p.torch_platform_tags.begin(), p.torch_platform_tags.end(), platform) ==
              p.torch_platform_tags.end()) {
            p.torch_platform_tags.emplace_back(platform);
          }
        }
      }
    }
  }
  if (p.python_version.empty()) {
    return make_error(Errc::invalid, "the environment probe printed no python_version");
  }
  if (!p.torch_version.empty() && !torch_cuda_seen) p.torch_cuda.reset();
  return p;
}

Status check_python(const Cell& cell, std::string_view python_version) {
  const auto parts = split(python_version, '.');
  if (parts.size() >= 2 && std::string(parts[0]) + "." + std::string(parts[1]) == cell.python) {
    return ok_status();
  }
  return make_error(Errc::invalid, "Python " + cell.python +
                                       " cell, but the interpreter is Python " +
                                       shown_output(python_version));
}

Status check_torch(const Cell& cell, const EnvironmentProbe& probe) {
  if (probe.torch_version.empty()) {
    return make_error(Errc::invalid, "torch cannot be imported in the build environment" +
                                         (probe.torch_error.empty()
                                              ? std::string()
                                              : " (" + shown_output(probe.torch_error) + ")"));
  }
  const auto series = torch_series_of_version(probe.torch_version);
  if (!series || *series != cell.torch) {
    return make_error(Errc::invalid, "torch " + shown_output(probe.torch_version) +
                                         " is not of the cell's series " + cell.torch.str());
  }
  if (!probe.torch_cuda) {
    return make_error(Errc::invalid, "torch " + shown_output(probe.torch_version) +
                                         " is a CPU build (torch.version.cuda is None), the "
                                         "cell is CUDA " +
                                         cell.cuda.str());
  }
  const std::string_view cuda = *probe.torch_cuda;
  const std::string_view major = cuda.substr(0, cuda.find('.'));
  if (major != std::to_string(cell.cuda.major)) {
    return make_error(Errc::invalid, "torch " + shown_output(probe.torch_version) +
                                         " was built for CUDA " + shown_output(cuda) +
                                         ", the cell is CUDA " + cell.cuda.str() +
                                         " (the CUDA major must match)");
  }
  return ok_status();
}

Status check_nvcc(const Cell& cell, const NvccVersion& found, std::string_view nvcc) {
  if (found.release == cell.cuda) return ok_status();
  return make_error(Errc::invalid, "CUDA " + cell.cuda.str() + " cell, but " + shown_output(nvcc) +
                                       " is CUDA " + found.release.str() + " (V" +
                                       shown_output(found.full) + ")");
}

}  // namespace wf::core
