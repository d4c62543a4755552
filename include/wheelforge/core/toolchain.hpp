#pragma once
// What a build cell claims about its toolchain, checked against what the build host actually
// has, before anything is built: a `+cu128torch2.8` label must mean that nvcc 12.8 compiled
// the wheel against a torch 2.8 built for CUDA 12, under the cell's Python. Pure functions
// over the text the tools print; the runner runs the tools.
//
// Facts relied on (docs/torch-labels.md, "What an installed torch says about itself" and "CUDA
// compatibility"):
// - `nvcc --version` ends with "Cuda compilation tools, release 12.8, V12.8.93"; the release is
//   the toolkit's major.minor.
// - `torch.__version__` is the release plus a local label ("2.8.0+cu128"); its series is the
//   release's major.minor. `torch.version.cuda` is the CUDA version torch was built with
//   ("12.8"), or None for a CPU build.
// - An extension built with CUDA 12.x runs with any torch built for CUDA 12 (torch loads the
//   newer runtime), never across majors; so the cell's CUDA major must equal torch's, while
//   the minors may differ.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "wheelforge/core/build.hpp"
#include "wheelforge/util/result.hpp"

namespace wf::core {

/// The CUDA version `nvcc --version` reports.
struct NvccVersion {
  CudaVersion release;  ///< from "release 12.8"
  std::string full;     ///< from "V12.8.93" ("12.8.93"); the release when no V-number is printed
};

/// Reads `nvcc --version` output: the last "release X.Y" (with the V-number that follows it on
/// the same line, if any). nullopt when there is none or it is malformed.
[[nodiscard]] std::optional<NvccVersion> parse_nvcc_version(std::string_view output);

/// What a build environment's interpreter reports about itself and its torch.
struct EnvironmentProbe {
  std::string python_version;  ///< platform.python_version(), e.g. "3.12.1"
  std::string python_executable;
  std::string torch_version;  ///< torch.__version__; empty when torch cannot be imported
  std::optional<std::string> torch_cuda;  ///< torch.version.cuda; nullopt for None (CPU torch)
  std::string torch_error;                ///< why `import torch` failed, when it did
  /// The platform tags of the torch wheel installed ("manylinux_2_28_x86_64"), from the `Tag:`
  /// lines of its WHEEL file, each once; empty when torch was not installed from a wheel.
  std::vector<std::string> torch_platform_tags;
};

/// The Python program whose output parse_environment_probe() reads: `key=value` lines
/// (python_version, python_executable, torch_version, torch_cuda, torch_error,
/// torch_wheel_tags: the WHEEL file's tags, "cp312-cp312-manylinux_2_28_x86_64", blank-separated).
[[nodiscard]] std::string_view environment_probe_script();

/// Parses the probe script's output. Unknown keys and lines without '=' are ignored (a
/// sitecustomize may print); a later line of the same key wins. Fails with Errc::invalid when
/// python_version is missing.
[[nodiscard]] Result<EnvironmentProbe> parse_environment_probe(std::string_view output);

/// Ok when the interpreter's major.minor is the cell's Python; otherwise Errc::invalid saying
/// both ("Python 3.12 cell, but the interpreter is Python 3.11.7").
[[nodiscard]] Status check_python(const Cell& cell, std::string_view python_version);

/// Ok when torch could be imported, its version is of the cell's torch series and it was
/// built for the cell's CUDA major. Errc::invalid otherwise, naming what was found: torch
/// missing (with the import error), another series ("torch 2.9.0+cu130 is not of series
/// 2.8"), a CPU torch (torch.version.cuda is None) for a CUDA cell, or another CUDA major
/// ("built for CUDA 13.0, the cell is CUDA 12.8").
[[nodiscard]] Status check_torch(const Cell& cell, const EnvironmentProbe& probe);

/// Ok when nvcc's release is the cell's CUDA major.minor; otherwise Errc::invalid naming both
/// (`nvcc` is the path shown in the message).
[[nodiscard]] Status check_nvcc(const Cell& cell, const NvccVersion& found, std::string_view nvcc);

}  // namespace wf::core
