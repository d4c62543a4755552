#pragma once
// Which variant view fits an installed torch (GET /api/resolve). Pure functions, no I/O.
//
// What an installed torch tells about itself, from Python (docs/torch-labels.md, "What an
// installed torch says about itself"):
//   torch.__version__             "2.8.0+cu128" from download.pytorch.org, but "2.9.0" from PyPI:
//                                 PyPI's wheels carry no local label, so the version alone
//                                 does not say which CUDA the build uses;
//   torch.version.cuda            "12.8", "13.0"; None (printed "None") on CPU and ROCm builds;
//   torch.version.hip             "6.4.43482-0f2d60242"; None on CUDA and CPU builds;
//   torch._C._GLIBCXX_USE_CXX11_ABI  True or False.
//
// Rules (resolve_torch), in order:
//   1. The torch series comes from torch.__version__ (2.9.0 → torch2.9); it is required.
//   2. The backend: an explicit cuda= value wins (12.8 → cu128), then an explicit hip=/rocm=
//      value (6.4.43482 → rocm6.4), then the local label of the torch version (+cu128, +cpu,
//      +rocm6.4). A CUDA value and a ROCm value together, or an explicit value that
//      contradicts the label (cuda=12.6 with +cu128, cuda=None with +cu128, cuda=12.8 with
//      +cpu), are refused: a real torch reports one build, so the values were taken from two
//      environments and any answer would be a guess. A major-only label (+cu12) agrees with
//      any minor of its major and the explicit minor is used.
//   3. cuda=None (or empty) and hip=None without a backend label: a CPU build (macOS wheels
//      from PyPI, or a CPU build without label).
//   4. Nothing given and no label: the CUDA of PyTorch's own PyPI wheels for Linux x86_64 of
//      that series (pypi_default_cuda, docs/pypi-torch-cuda.md), with a note saying it was
//      assumed. That is what a `pip install torch` from PyPI brings, which is how a version
//      without label comes about.
//   5. A series the table does not know (a release newer than this build of wheelforge): the
//      view names the torch series only, with a note. The index cannot know the default CUDA of
//      a release made after it; the series-only view still never lists another torch series
//      (the ABI that breaks at import), and the note asks for cuda=.
//   The C++ ABI comes from abi= (1/0/true/false) when given; otherwise the view names none and
//   the view's own rule prefers PyTorch's default ABI of the series.

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "wheelforge/core/build.hpp"  // CudaVersion
#include "wheelforge/core/variant.hpp"
#include "wheelforge/util/result.hpp"

namespace wf::core {

/// One row of the table of PyTorch's PyPI defaults, with where it was read.
struct PypiDefaultCuda {
  TorchSeries series;
  CudaVersion cuda;
};

/// The CUDA version of PyTorch's own wheels of a series on PyPI for Linux x86_64 (what
/// `pip install torch==X.Y.*` installs there), or nullopt for a series not in the table.
/// Sources for every row are listed in docs/pypi-torch-cuda.md.
[[nodiscard]] std::optional<CudaVersion> pypi_default_cuda(TorchSeries series);

/// Every row of that table, oldest series first.
[[nodiscard]] std::span<const PypiDefaultCuda> pypi_default_cuda_table();

/// What a backend value given by a client says (torch.version.cuda or torch.version.hip).
struct BackendValue {
  bool none = false;  ///< "None", "none" or "": the build has no such backend
  int major = 0;
  std::optional<int> minor;  ///< absent for a major-only value ("12")
};

/// Parses torch.version.cuda: "12.8", "13.0", "12.8.1" (the patch is ignored), "12", or a view
/// spelling "cu128"; "None"/"none"/"" mean no CUDA. Errc::invalid naming the value and the
/// accepted forms otherwise, and for a CUDA version no view can name (majors 1-19 only).
[[nodiscard]] Result<BackendValue> parse_cuda_value(std::string_view value);

/// Parses torch.version.hip: "6.4.43482-0f2d60242", "6.4", or "rocm6.4"; "None"/"none"/"" mean
/// no ROCm. Errc::invalid otherwise.
[[nodiscard]] Result<BackendValue> parse_hip_value(std::string_view value);

/// What a client sent about its torch; a parameter that was not sent is nullopt (an empty
/// value is sent, and means None).
struct TorchQuery {
  std::string_view version;              ///< torch.__version__, required
  std::optional<std::string_view> cuda;  ///< torch.version.cuda
  std::optional<std::string_view> hip;   ///< torch.version.hip (also accepted as rocm=)
  std::optional<std::string_view> abi;   ///< torch._C._GLIBCXX_USE_CXX11_ABI
};

/// Where the backend of a resolution came from.
enum class BackendSource {
  cuda,          ///< the cuda= value
  hip,           ///< the hip=/rocm= value
  label,         ///< the local label of the torch version
  none_given,    ///< cuda=None (and no label): a CPU build
  pypi_default,  ///< pypi_default_cuda of the series
  unknown,       ///< nothing known: the view names no backend
};

/// "cuda", "hip", "label", "none", "pypi-default", "unknown".
[[nodiscard]] std::string_view backend_source_name(BackendSource source);

struct TorchResolution {
  ViewSelector selector;  ///< backend, torch series and (when given) ABI
  BackendSource source = BackendSource::unknown;
  std::vector<std::string> notes;  ///< what was assumed, for people
};

/// Applies the rules at the top of this file. Errc::invalid, naming the parameter and the
/// value, for a missing or unparsable torch version, a bad cuda/hip/abi value, or values that
/// contradict each other.
[[nodiscard]] Result<TorchResolution> resolve_torch(const TorchQuery& query);

/// Orders existing cells of a project (each a view selector naming what its builds were made
/// for) by how near they are to `wanted`, nearest first, and returns their indices. Nearness,
/// most important first: the same torch series; the same backend kind and major; the
/// smallest distance in CUDA/ROCm minor; the nearest torch series; the same C++ ABI; then the
/// newer cell. Deterministic.
[[nodiscard]] std::vector<std::size_t> nearest_cells(const ViewSelector& wanted,
                                                     std::span<const ViewSelector> cells);

}  // namespace wf::core
