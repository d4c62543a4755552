#pragma once
// manylinux policies (`manylinux_x_y` tags) and the assessment of a wheel's binaries against them:
// the lowest honest `manylinux_2_XX_<arch>` tag, or why there is none. Pure, no I/O; the facts
// and their sources are in docs/manylinux.md.
//
// A policy says which system libraries a wheel may link (its library list) and, per
// symbol-version prefix (GLIBC, GLIBCXX, CXXABI, GCC, LIBATOMIC, ZLIB), the highest numeric
// version it may need plus the named versions it may need (CXXABI_TM_1, GLIBC_ABI_DT_RELR...).
// The numbers are the tables of docs/manylinux.md, "Symbol-version ceilings": the source lists
// every allowed version one by one, and for each architecture that list is exactly the
// versions up to the highest one, so a ceiling decides the same (docs/manylinux.md, "Sources").
//
// Assessment rules (assess_manylinux):
//   - Binaries are the wheel's ELF shared objects and executables; relocatable objects are
//     ignored. A binary that could not be read refuses the wheel (nothing can be proven).
//   - All binaries must be of one architecture, and wheelforge must know its policies (x86_64,
//     aarch64).
//   - Each NEEDED library must be the dynamic loader (`ld-linux*`, `ld64.so.*`), provided
//     (the wheel's own libraries, torch's and CUDA's: ProvidedLibraries), or on the policy's
//     library list. A library that is none of these refuses the wheel, with its name and the
//     binaries that need it.
//   - Every version needed (from any library, the dynamic loader included, which common tools
//     skip: `_dl_find_object@GLIBC_2.35` does not load on glibc 2.34; docs/manylinux.md, "The
//     assessment") whose prefix the policy table knows must be allowed. Versions of other
//     prefixes (a library's own `libcudart.so.13`, `Qt_5`) are not judged.
//   - Undefined symbols on a policy's symbol blacklist for a NEEDED library rule that policy out.
//   - The result is the lowest policy satisfying all of this for every binary (policies only
//     grow with their glibc), and the glibc floor: the highest GLIBC_x.y any binary needs.
//   - The lowest policy is manylinux_2_17 (manylinux2014): no supported torch or CUDA runs on
//     the older glibc of manylinux1/2010, so a wheel that would qualify for those is tagged
//     2_17. For 2_17 the tags are `manylinux_2_17_<arch>` and its legacy alias
//     `manylinux2014_<arch>`, so that installers that do not know `manylinux_x_y` names still
//     install it (docs/manylinux.md, "The lowest tag, and the legacy alias").

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "wheelforge/core/elf.hpp"
#include "wheelforge/util/result.hpp"

namespace wf::core {

/// What one policy allows of one symbol-version prefix.
struct VersionCeiling {
  std::string_view prefix;                  ///< "GLIBC"
  std::string_view highest;                 ///< "2.17"; empty when no numeric version is allowed
  std::span<const std::string_view> named;  ///< allowed named suffixes ("TM_1", "ABI_DT_RELR")
};

/// Undefined symbols a policy forbids from one library (functions missing from, or private to,
/// the library on that policy's reference distribution).
struct SymbolBlacklist {
  std::string_view library;                   ///< "libc.so.6"
  std::span<const std::string_view> symbols;  ///< "__cxa_thread_atexit_impl"
};

struct ManylinuxPolicy {
  std::string_view name;      ///< "manylinux_2_17"
  std::string_view alias;     ///< legacy name ("manylinux2014"), empty when none
  std::uint32_t glibc_minor;  ///< 17: the policy is glibc 2.17
  std::string_view arch;      ///< "x86_64"
  std::span<const VersionCeiling> ceilings;
  std::span<const std::string_view> libraries;  ///< system libraries a wheel may link
  std::span<const SymbolBlacklist> blacklist;

  /// "manylinux_2_17_x86_64".
  [[nodiscard]] std::string tag() const;
  /// The tags a wheel of this policy carries: tag(), then the legacy alias tag if any
  /// ("manylinux2014_x86_64").
  [[nodiscard]] std::vector<std::string> platform_tags() const;
  /// Whether the policy allows needing `version` (a full name like "GLIBCXX_3.4.21"). Versions
  /// whose prefix has no ceiling are allowed (not judged).
  [[nodiscard]] bool allows_version(std::string_view version) const;
  /// Whether `library` is on the policy's library list.
  [[nodiscard]] bool allows_library(std::string_view library) const;
};

/// Every policy wheelforge knows, grouped by architecture, lowest glibc first within one.
[[nodiscard]] std::span<const ManylinuxPolicy> manylinux_policies();

/// The policies of one architecture, lowest first; empty when unknown.
[[nodiscard]] std::vector<const ManylinuxPolicy*> manylinux_policies_for(std::string_view arch);

/// True for the dynamic loader's names (`ld-linux-x86-64.so.2`, `ld-linux-aarch64.so.1`,
/// `ld-linux.so.2`, `ld64.so.1`, `ld64.so.2`), which every policy allows.
[[nodiscard]] bool is_dynamic_loader(std::string_view library);

/// A library that another wheel installs next to ours, with why.
struct ProvidedLibrary {
  std::string_view pattern;   ///< a glob: '*' any run of characters, '?' one character
  std::string_view provider;  ///< "torch", "nvidia-cuda-runtime-cu12/cu13", "the NVIDIA driver"
};

/// torch's and CUDA's libraries: what an extension built against torch may link without the
/// wheel carrying it, because installing torch (and the nvidia-* wheels torch depends on)
/// or the GPU driver puts it there. docs/manylinux.md explains each line.
[[nodiscard]] std::span<const ProvidedLibrary> torch_cuda_libraries();

/// NEEDED names satisfied other than by the system.
struct ProvidedLibraries {
  std::vector<std::string> names;     ///< exact names (the wheel's own sonames and file names)
  std::vector<std::string> patterns;  ///< globs ('*', '?')

  [[nodiscard]] bool provides(std::string_view library) const;
};

/// The wheel's own libraries: each readable binary's SONAME and its file name (the last path
/// component), so that `NEEDED libfoo.so.1` is satisfied by `pkg.libs/libfoo.so.1`.
[[nodiscard]] ProvidedLibraries wheel_libraries(std::span<const WheelBinary> binaries);

/// wheel_libraries() plus torch_cuda_libraries(): what the build runner passes for an
/// extension built against torch.
[[nodiscard]] ProvidedLibraries torch_extension_provided(std::span<const WheelBinary> binaries);

/// Whether `text` matches `pattern` ('*' any run, '?' one character, everything else itself).
[[nodiscard]] bool glob_match(std::string_view pattern, std::string_view text);

enum class ManylinuxOutcome {
  no_binaries,  ///< no ELF shared object or executable: nothing to tag
  tagged,       ///< `policy` is set
  refused,      ///< see unsatisfied, too_new and problems
};

/// A NEEDED library nothing provides, and the binaries (member paths) that need it.
struct UnsatisfiedLibrary {
  std::string library;
  std::vector<std::string> needed_by;
};

/// A symbol version, where it comes from, and the first binary that needs it.
struct VersionRequirement {
  std::string version;    ///< "GLIBC_2.42"
  std::string library;    ///< "libc.so.6"
  std::string needed_by;  ///< member path
};

/// One requirement that rules out the lowest policy: the lowest policy that allows it, and what
/// it is, e.g. "GLIBC_2.34 (libc.so.6: pthread_create) needed by pkg/_C.so".
struct PolicyRequirement {
  const ManylinuxPolicy* lowest = nullptr;
  std::string what;
};

struct ManylinuxAssessment {
  ManylinuxOutcome outcome = ManylinuxOutcome::no_binaries;
  std::string arch;  ///< the binaries' architecture ("x86_64"); empty without binaries
  /// The lowest policy every binary satisfies (tagged only).
  const ManylinuxPolicy* policy = nullptr;
  /// The highest GLIBC_x.y any binary needs ("2.34"); empty when none needs a GLIBC version.
  std::string glibc_floor;
  /// What raised the policy above the lowest one, e.g. "GLIBCXX_3.4.30 (libstdc++.so.6) needed
  /// by pkg/_C.so"; empty when nothing did.
  std::string deciding;
  std::vector<UnsatisfiedLibrary> unsatisfied;  ///< in order of first appearance
  std::vector<VersionRequirement> too_new;      ///< versions no policy allows
  std::vector<std::string> problems;  ///< unreadable binaries, architectures, forbidden symbols
  /// Every requirement that only a policy above the lowest one allows (tagged only), in order
  /// of appearance: a library, a symbol version (with the symbols that need it) or a symbol a
  /// lower policy forbids, each once per binary.
  std::vector<PolicyRequirement> requirements;

  /// The platform tags to give the wheel (policy->platform_tags()); empty unless tagged.
  [[nodiscard]] std::vector<std::string> platform_tags() const;
  /// One line for a job log or a failure reason: the tag and what decided it, or every reason
  /// for refusing ("pkg/_C.so needs libfoo.so.1, which neither the wheel, torch, CUDA nor any
  /// manylinux policy provides").
  [[nodiscard]] std::string summary() const;
};

/// The glibc a manylinux platform tag promises to run on: "2.34" for `manylinux_2_34_x86_64`,
/// "2.17" for `manylinux2014_*`, "2.12" for `manylinux2010_*`, "2.5" for `manylinux1_*`;
/// nullopt for any other tag (`linux_x86_64`, `musllinux_1_2_x86_64`, `any`).
[[nodiscard]] std::optional<std::string> glibc_of_platform_tag(std::string_view tag);

/// The lowest glibc_of_platform_tag() of a wheel's platform tags (a wheel tagged
/// `manylinux_2_17_x86_64.manylinux2014_x86_64` installs from glibc 2.17 on); nullopt when no
/// tag is a manylinux one.
[[nodiscard]] std::optional<std::string> glibc_of_platform_tags(std::span<const std::string> tags);

/// The highest manylinux tag a recipe's wheels may need (the recipe key `manylinux`): what its
/// users' glibc is at the least. A wheel whose binaries need a higher policy is not published
/// (docs/manylinux.md, "In the build runner").
struct ManylinuxCeiling {
  std::uint32_t glibc_minor = 17;  ///< 28 for manylinux_2_28 (the glibc major is always 2)

  /// "manylinux_2_28".
  [[nodiscard]] std::string name() const;
  friend bool operator==(const ManylinuxCeiling&, const ManylinuxCeiling&) = default;
};

/// Parses a ceiling as a recipe writes it: "2_28", "manylinux_2_28", or a legacy alias
/// ("manylinux2014" is 2_17). Errc::invalid naming the accepted forms for anything else (an
/// architecture suffix included: the ceiling holds for every architecture), for a glibc major
/// other than 2, and for a ceiling below manylinux_2_17, the lowest tag a wheel with binaries
/// gets (no such wheel could ever be published).
[[nodiscard]] Result<ManylinuxCeiling> parse_manylinux_ceiling(std::string_view text);

/// The ceiling a wheel's platform tags stand for: the lowest glibc among its manylinux tags
/// (glibc_of_platform_tags), raised to manylinux_2_17 (torch wheels up to 2.5 on PyPI are
/// tagged manylinux1, though they need glibc 2.17). nullopt when no tag is a manylinux one
/// (`linux_x86_64`, `any`).
[[nodiscard]] std::optional<ManylinuxCeiling> ceiling_of_platform_tags(
    std::span<const std::string> tags);

/// What makes a tagged assessment need more than `ceiling`: the `what` of every requirement
/// whose lowest policy is above it, in order. Empty when the assessment is not tagged or its
/// policy is within the ceiling.
[[nodiscard]] std::vector<std::string> above_ceiling(const ManylinuxAssessment& assessment,
                                                     const ManylinuxCeiling& ceiling);

/// Assesses a wheel's binaries (as archive::inspect_wheel_binaries returns them) against the
/// manylinux policies of their architecture, following the rules at the top of this file.
[[nodiscard]] ManylinuxAssessment assess_manylinux(std::span<const WheelBinary> binaries,
                                                   const ProvidedLibraries& provided);

}  // namespace wf::core
