#pragma once
// Variant hints and variant views (docs/views.md; the label conventions
// they read: docs/torch-labels.md): what a wheel's local version label and METADATA say about
// the CUDA/ROCm/CPU backend, torch series and C++ ABI it was built for, and which wheels a view
// such as /cu128/torch2.8/simple/ lists. Pure functions, no I/O.
//
// Label rules (parse_local_label). The label is lower-cased; '-', '_' and any character outside
// [a-z0-9.] count as '.'. Keywords are recognised at the start of the label, after a '.', right
// after another recognised part, or where a letter follows a digit (`cu130sm89torch2.10.0`).
//   cuXY.. / cudaXY..  A digit run starting with '1' is a two-digit major followed by the minor
//                      (cu12 → 12, cu118 → 11.8, cu130 → 13.0, cu1210 → 12.10); one starting
//                      with 2–9 is a one-digit major (cu92 → 9.2, an old spelling).
//                      `cu12.8`/`cuda12.8` also mean 12.8. Majors of 20 and above cannot be
//                      written this way. Runs longer than 4 digits or starting with 0: not CUDA.
//   torchX.Y[.Z]       Dotted: major.minor, patch ignored (torch2.10.0 → 2.10).
//   torchXY / XYZ / XYYZ  Undotted: digits are major, minor, patch concatenated, as in
//                      torch280 = 2.8.0; so torch28 → 2.8, torch280 → 2.8, torch210 → 2.1 (the
//                      patch-0 reading of 2.1.0; write torch2.10 for 2.10), torch2100 → 2.10.
//   ptXY / ptXYY       First digit major, the rest minor, never a patch (pt28 → 2.8, pt211 → 2.11).
//   rocmX.Y[.Z] / rocmX / rocmXY / rocmXYZ  Like torch with a one-digit major (rocm63 → 6.3).
//   cpu                CPU build.
//   cxx11abi[VALUE], cxx11.abi  VALUE true/1 or false/0, absent means true (`cpu.cxx11.abi`).
// Everything else (git hashes, dates, sm89, post2, andhigher, cudnn86) goes to `extra` in
// label order. A kind that appears twice with different values (cu128.rocm6.4, torch2.7.torch2.8)
// is dropped and its parts go to `extra`. A label the parser does not understand yields no
// hints; parsing never fails.
//
// Selection rules (select_for_view), applied per project to the candidate wheels:
//   Eligibility. A wheel without selecting hints (generic) is always eligible. Otherwise:
//   - a wheel of another torch series than the view's is never eligible;
//   - CUDA view: CUDA wheels of the same major with a minor ≤ the view's (any minor when the
//     view is major-only) and major-only CUDA wheels; never a higher minor, another major,
//     CPU or ROCm. ROCm views likewise. CPU view: CPU wheels. Wheels without a backend hint
//     are eligible in every view;
//   - a stable-ABI wheel without a series (Candidate::torch_from) is not eligible in a view of
//     a series below its minimum;
//   - ABI named by the view: a wheel with the other ABI is not eligible; unknown ABI is. A
//     Linux binary wheel for torch 2.7 or later whose label names no ABI has the C++11 ABI
//     (effective_cxx11_abi), as PyTorch's own Linux wheels of those series do.
//   Ranking inside one group_key (public version, python, abi and platform tags); the single
//   best wheel of each group is listed. Earlier criteria dominate later ones:
//   1. not yanked over yanked (a yanked exact build must not hide a working fallback);
//   2. torch: an explicit series over none (a series-bound build over a stable-ABI one that
//      spans the series); when the view names no torch, the higher series;
//   3. ABI: a match with the view's ABI over unknown; when the view names none, the default
//      ABI of PyTorch's own wheels of the series (view's torch, else the wheel's; FALSE up to
//      2.6, TRUE from 2.7) over unknown over the other; the ABI compared is the effective one,
//      so `+cu128torch2.8` and `+cu12torch2.8cxx11abiTRUE` tie here. ABI outranks the CUDA minor
//      because an ABI mismatch fails at import while a lower CUDA minor loads fine
//      (docs/torch-labels.md, "The C++ ABI" and "CUDA compatibility");
//   4. backend: CUDA/ROCm view with a minor: exact minor > highest lower minor > major-only >
//      no backend hint; major-only view: major-only > lowest minor (safest for an unknown
//      runtime minor) > no backend hint; CPU view: CPU > no backend hint; a view naming no
//      backend: CUDA (newest first) > ROCm (newest first) > no backend hint > CPU;
//   5. ties: the higher build tag (numeric prefix, then text), the later upload, the greater
//      file name. The result is deterministic and independent of input order.

#include <compare>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "wheelforge/util/result.hpp"

namespace wf::core {

/// A torch major.minor series: one C++ ABI, so one extension build per series.
struct TorchSeries {
  int major = 0;
  int minor = 0;
  friend bool operator==(const TorchSeries&, const TorchSeries&) = default;
  // NOLINTNEXTLINE(modernize-use-nullptr): clang-tidy 14 misreads a defaulted <=>
  friend auto operator<=>(const TorchSeries&, const TorchSeries&) = default;
  /// "2.8".
  [[nodiscard]] std::string str() const;
};

enum class Backend { none, cuda, cpu, rocm };

struct VariantHints {
  Backend backend = Backend::none;
  std::optional<int> cuda_major;  ///< set exactly when backend == cuda
  std::optional<int> cuda_minor;  ///< absent for major-only tags (cu12)
  std::optional<int> rocm_major;  ///< set exactly when backend == rocm
  std::optional<int> rocm_minor;
  std::optional<TorchSeries> torch;
  std::optional<bool> cxx11_abi;   ///< true: _GLIBCXX_USE_CXX11_ABI=1; absent: unknown
  std::vector<std::string> extra;  ///< label parts that do not select, lower-case, label order

  /// True when any hint a view filters on is present (backend, torch series or ABI).
  [[nodiscard]] bool selects() const;
  /// Selecting hints in canonical view spelling, space-separated, e.g. "cu128 torch2.8
  /// cxx11abi1"; empty when there are none.
  [[nodiscard]] std::string describe() const;
  /// The backend as a view segment spells it: "cu128", "cu12", "cpu", "rocm6.4"; "" for none.
  [[nodiscard]] std::string backend_label() const;

  friend bool operator==(const VariantHints&, const VariantHints&) = default;
};

/// Parses a local version label, raw (`+cu128torch2.8`, `CU12_torch2.8`) or normalized
/// (`cu128torch2.8`, separators '.'). A leading '+' is ignored. Never fails: a label it does
/// not understand yields no selecting hints, with its parts in `extra`. Linear in the length.
[[nodiscard]] VariantHints parse_local_label(std::string_view label);

/// The series of a torch release version ("2.8.0" → 2.8, "2.10.0rc1" → 2.10, "2.8.0+cu128" →
/// 2.8); nullopt when the version has no numeric major.minor or has an epoch.
[[nodiscard]] std::optional<TorchSeries> torch_series_of_version(std::string_view version);

/// The C++ ABI of PyTorch's own pip wheels of a series: false up to 2.6, true from 2.7
/// (docs/torch-labels.md, "The C++ ABI").
[[nodiscard]] bool default_cxx11_abi(TorchSeries series);

/// A torch series pinned by a distribution's requirements, with the requirement text that pins
/// it (for messages).
struct TorchPin {
  TorchSeries series;
  std::string requirement;  ///< e.g. "torch==2.9.*"; several requirements joined with ", "
};

/// Reads Requires-Dist values (`torch==2.8.*`, `torch (==2.8.0)`, `torch>=2.8,<2.9`,
/// `torch~=2.8.0`, `Torch[extra]==2.8.0`) and returns the torch series they allow when that is
/// exactly one. Requirements with an environment marker (`; ...`) are conditional and ignored,
/// as are URL requirements, `!=` clauses and clauses whose version is not purely numeric.
/// Several unconditional torch requirements are intersected. nullopt when no single series.
[[nodiscard]] std::optional<TorchPin> torch_pin_from_requirements(
    std::span<const std::string> requires_dist);

/// The lowest torch series Requires-Dist values admit when they bound torch from below
/// (`torch>=2.9`, `torch>=2.9.1,<3`, `torch~=2.9`), read as torch_pin_from_requirements reads
/// them (markers, URLs and non-numeric clauses ignored); nullopt without such a bound.
[[nodiscard]] std::optional<TorchSeries> torch_minimum_from_requirements(
    std::span<const std::string> requires_dist);

/// For a Linux binary wheel (`platform_tag` linux_* or manylinux*) built for torch 2.7 or later
/// whose label does not name the C++ ABI: true, the ABI of PyTorch's own Linux wheels of those
/// series (docs/torch-labels.md, "The C++ ABI"); otherwise the label's ABI (or none).
[[nodiscard]] std::optional<bool> effective_cxx11_abi(const VariantHints& hints,
                                                      std::string_view platform_tag);

/// The hints of one distribution: its label parsed; for the project `torch` itself the series
/// of its version; otherwise the torch series pinned by its requirements when the label names
/// none. Fails with Errc::invalid, naming both sides, when the label's torch series contradicts
/// the pin (or, for `torch`, its own version).
[[nodiscard]] Result<VariantHints> hints_for_distribution(
    std::string_view normalized_project, std::string_view public_version,
    std::string_view local_label, std::span<const std::string> requires_dist);

/// What a variant view selects: the path segments before /simple/.
struct ViewSelector {
  Backend backend = Backend::none;
  std::optional<int> cuda_major;
  std::optional<int> cuda_minor;
  std::optional<int> rocm_major;
  std::optional<int> rocm_minor;
  std::optional<TorchSeries> torch;
  std::optional<bool> cxx11_abi;

  /// Canonical path, backend then torch then ABI: "cu128/torch2.8/cxx11abi1"; empty when empty.
  [[nodiscard]] std::string path() const;
  /// True when the selector names nothing (the plain /simple/ index).
  [[nodiscard]] bool empty() const;

  friend bool operator==(const ViewSelector&, const ViewSelector&) = default;
};

/// Parses view path segments in any order: cuXY or cuXYZ (cu12, cu128, cu130), cpu, rocmX.Y,
/// torchX.Y, cxx11abi0 or cxx11abi1. Only canonical spellings (those path() produces) are
/// accepted, so every view has one URL. Fails with Errc::not_found when a segment is invalid or
/// not canonical, a kind repeats, or several of cpu/cu/rocm are given; the message names every
/// bad segment and lists the valid forms. No segments: an empty selector.
[[nodiscard]] Result<ViewSelector> parse_view_selector(std::span<const std::string_view> segments);

/// One wheel offered to select_for_view.
struct Candidate {
  VariantHints hints;
  /// Wheels compete only within the same key; the caller builds it from the public version and
  /// the python, abi and platform tags.
  std::string group_key;
  std::string build_tag;  ///< the wheel's build tag, empty when none
  std::int64_t upload_time = 0;
  std::string filename;
  bool yanked = false;
  /// A Linux binary wheel (linux_* or manylinux* platform tag): a torch 2.7+ label without an
  /// ABI means the C++11 ABI (effective_cxx11_abi).
  bool linux_binary = false;
  /// A stable-ABI wheel without a torch series of its own: the lowest series it fits
  /// (WheelFindings::torch_from); it is not eligible in views of earlier series.
  std::optional<TorchSeries> torch_from;
};

/// Indices (ascending, i.e. input order) of the candidates the view lists: the best eligible
/// candidate of each group_key, by the rules at the top of this file.
[[nodiscard]] std::vector<std::size_t> select_for_view(const ViewSelector& view,
                                                       std::span<const Candidate> candidates);

}  // namespace wf::core
