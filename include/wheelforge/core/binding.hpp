#pragma once
// What a wheel's binaries say about the torch, CUDA and system they were built for, read from
// the ELF facts of its members (elf.hpp): the findings every wheel gets at ingest, the checks
// of its label against them, and their stored form. Pure functions, no I/O. The conventions
// relied on are in docs/torch-labels.md, "What the binaries say".
//
// Torch binding. An extension that calls torch's C++ API imports mangled C++ symbols of the
// namespaces c10, at or torch (`_ZN3c10...`, `_ZNK2at...`, `_ZTVN5torch...`): those change
// with every torch series, so the binary is bound to the series it was compiled against. An
// extension built on torch's stable ABI imports only C functions (`aoti_torch_*`, `torch_*`),
// which later series keep: it loads into every series from the one it targets on. A binary
// importing both is series-bound.
//
// CUDA. A binary that lists a CUDA library in DT_NEEDED links CUDA; the runtime-versioned ones
// (libcudart.so.N, libnvrtc.so.N, libcublas.so.N, libcublasLt.so.N) name the CUDA major N it
// was built with. A binary that links the runtime statically (nvcc's default) names none.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "wheelforge/core/elf.hpp"
#include "wheelforge/core/variant.hpp"
#include "wheelforge/util/result.hpp"

namespace wf::core {

enum class TorchBinding : std::uint8_t {
  none,        ///< imports nothing of torch
  stable_abi,  ///< only torch's stable C ABI (aoti_torch_*, torch_*)
  series,      ///< torch's C++ API: one torch series
};

/// "none", "stable-abi", "series".
[[nodiscard]] std::string_view binding_name(TorchBinding binding);

/// The findings of one ELF member of a wheel.
struct BinaryFindings {
  std::string path;                 ///< member name
  std::uint64_t size = 0;           ///< uncompressed size
  bool extension_module = false;    ///< exports a PyInit_* function: a Python extension module
  std::string arch;                 ///< "x86_64"; empty when unreadable
  std::vector<std::string> needed;  ///< DT_NEEDED in order (at most kMaxNeeded)
  std::string glibc;                ///< highest GLIBC_ version needed, "2.17"; empty: none
  std::string glibcxx;              ///< highest GLIBCXX_ version needed, "3.4.21"; empty: none
  std::optional<int> cuda_major;    ///< from a runtime-versioned CUDA library (libcudart.so.12)
  std::string cuda_library;         ///< the CUDA library that shows it links CUDA; empty: none
  TorchBinding binding = TorchBinding::none;
  std::string binding_symbol;  ///< the imported symbol that shows the binding
  std::string problem;         ///< why the member could not be read as ELF; empty: read

  friend bool operator==(const BinaryFindings&, const BinaryFindings&) = default;
};

/// What all binaries of one wheel say.
struct WheelFindings {
  std::vector<BinaryFindings> binaries;  ///< in file order
  /// A stable-ABI wheel without a torch series of its own: the lowest series its
  /// Requires-Dist admits (`torch>=2.9` → 2.9). It fits every series from there on.
  std::optional<TorchSeries> torch_from;

  /// series when any binary is series-bound, else stable_abi when any is, else none.
  [[nodiscard]] TorchBinding binding() const;
  /// The binary (and symbol) that decides binding(); nullptr for none.
  [[nodiscard]] const BinaryFindings* binding_evidence() const;
  /// The first binary that names a CUDA major, or that links CUDA at all; nullptr for none.
  [[nodiscard]] const BinaryFindings* cuda_evidence() const;
  /// Highest glibc / glibcxx any binary needs ("2.34"); empty when none.
  [[nodiscard]] std::string glibc() const;
  [[nodiscard]] std::string glibcxx() const;

  friend bool operator==(const WheelFindings&, const WheelFindings&) = default;
};

inline constexpr std::size_t kMaxNeeded = 256;
inline constexpr std::size_t kMaxSymbolShown = 300;

/// The findings of one binary (an unreadable one keeps its path, size and problem).
[[nodiscard]] BinaryFindings find_binary(const WheelBinary& binary);

/// The findings of a wheel's binaries; torch_from is set from `requires_dist` (its lower bound
/// on torch) when the wheel is stable-ABI and `hints` name no torch series.
[[nodiscard]] WheelFindings find_wheel(std::span<const WheelBinary> binaries,
                                       const VariantHints& hints,
                                       std::span<const std::string> requires_dist);

/// Checks a wheel's label against its binaries. Fails with Errc::invalid, naming the label,
/// the binary and the library, when a CUDA label's major differs from the CUDA major a binary
/// links (`+cu128` and libcudart.so.13), or a CPU or ROCm label comes with a binary that links
/// CUDA. A torch series label is never contradicted: series-bound and stable-ABI binaries both
/// load into the series they name.
[[nodiscard]] Status check_label_against_binaries(const VariantHints& hints, std::string_view label,
                                                  const WheelFindings& findings);

/// The stored form of findings (one line per binary, tab-separated); decode_findings reads it
/// back, nullopt when it is not such a text.
[[nodiscard]] std::string encode_findings(const WheelFindings& findings);
[[nodiscard]] std::optional<WheelFindings> decode_findings(std::string_view text);

// ---- the wheel inspector (GET /api/files/<sha256>/contents and its page) --------------------

/// One zip member as the central directory declares it.
struct WheelMember {
  std::string name;
  std::uint64_t size = 0;             ///< uncompressed
  std::uint64_t compressed_size = 0;  ///< as stored
};

/// A symbol a binary exports (defined, global or weak, default or protected visibility).
struct ExportedSymbol {
  std::string name;     ///< as stored (C++ names mangled)
  std::string kind;     ///< "function", "object", "tls" or "other"
  std::string version;  ///< its version definition, empty when unversioned
};

struct InspectedBinary {
  BinaryFindings findings;
  std::vector<ExportedSymbol> exported;  ///< the first kMaxExportedShown, .dynsym order
  std::size_t exported_total = 0;        ///< how many it exports in all
};

/// What the inspector shows of one wheel.
struct WheelInspection {
  std::vector<WheelMember> members;  ///< the first kMaxMembersShown, central directory order
  std::size_t members_total = 0;
  std::uint64_t inflated_total = 0;  ///< sum of every member's uncompressed size
  std::vector<InspectedBinary> binaries;
};

inline constexpr std::size_t kMaxMembersShown = 5000;
inline constexpr std::size_t kMaxExportedShown = 500;

/// The inspection of a wheel from its members and its binaries (archive::list_wheel_members,
/// archive::inspect_wheel_binaries), cut to the bounds above.
[[nodiscard]] WheelInspection inspect_contents(std::vector<WheelMember> members,
                                               std::span<const WheelBinary> binaries);

/// True when an undefined symbol name belongs to torch's C++ API (c10::, at::, torch::).
[[nodiscard]] bool is_torch_cxx_symbol(std::string_view name);
/// True when an undefined symbol name is one of torch's stable C ABI functions.
[[nodiscard]] bool is_torch_stable_symbol(std::string_view name);

}  // namespace wf::core
