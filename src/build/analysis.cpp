// Step 7, analyze binaries: what the wheel's ELF binaries need, judged against the manylinux
// policies (core/manylinux.hpp, docs/manylinux.md) with torch's and CUDA's libraries counted as
// provided; a `linux_<arch>` wheel gets the lowest honest manylinux tag, and no wheel may need
// more than the recipe's manylinux ceiling (by default, what the cell's torch wheel needs).

#include <algorithm>

#include "steps.hpp"
#include "wheelforge/archive/elf.hpp"
#include "wheelforge/core/binding.hpp"
#include "wheelforge/core/filename.hpp"
#include "wheelforge/core/manylinux.hpp"
#include "wheelforge/core/toolchain.hpp"

namespace wf::build {

namespace {

std::string joined(const std::vector<std::string>& items, std::string_view separator) {
  std::string out;
  for (const auto& item : items) {
    if (!out.empty()) out += separator;
    out += item;
  }
  return out;
}

// "pkg/_C.so (x86_64): NEEDED libc10.so, libc.so.6; glibc floor 2.34, GLIBCXX_3.4.30; torch
// binding series; CUDA runtime 12".
std::string describe(const core::WheelBinary& b) {
  if (!b.elf) return b.path + ": cannot be read: " + b.problem;
  const core::ElfInfo& elf = *b.elf;
  std::string line = b.path + " (" + elf.arch() + "): NEEDED " +
                     (elf.needed.empty() ? std::string("nothing") : joined(elf.needed, ", "));
  const auto glibc = core::highest_needed_version(elf, "GLIBC");
  line += "; glibc floor " +
          (glibc ? glibc->substr(std::string_view("GLIBC_").size()) : std::string("none"));
  if (const auto cxx = core::highest_needed_version(elf, "GLIBCXX")) line += ", " + *cxx;
  // What ingest checks the label against (core/binding.hpp).
  const core::BinaryFindings findings = core::find_binary(b);
  line += "; torch binding " + std::string(core::binding_name(findings.binding));
  if (findings.cuda_major) line += "; CUDA runtime " + std::to_string(*findings.cuda_major);
  return line;
}

// The highest manylinux tag the wheel may need, and where that figure comes from.
struct Ceiling {
  core::ManylinuxCeiling ceiling;
  std::string source;  // "the recipe's manylinux = \"2_28\"", "the platform tag of torch ..."
};

// The recipe's ceiling, else the platform tag of the torch wheel in the build environment, as
// step 3's probe found it (read from the work directory: a resumed job has it too); nullopt
// when the recipe sets none and torch came from no manylinux wheel.
std::optional<Ceiling> ceiling_of(const JobContext& ctx) {
  if (ctx.recipe.manylinux) {
    return Ceiling{
        *ctx.recipe.manylinux,
        "the recipe's manylinux = \"2_" + std::to_string(ctx.recipe.manylinux->glibc_minor) + "\""};
  }
  const std::string text =
      ctx.executor.read_log(ctx.work_dir / kEnvironmentProbeFile, 0, 64U * 1024U);
  const auto probe = core::parse_environment_probe(text);
  if (!probe) return std::nullopt;
  const auto ceiling = core::ceiling_of_platform_tags(probe->torch_platform_tags);
  if (!ceiling) return std::nullopt;
  return Ceiling{*ceiling, "the platform tag of torch " + probe->torch_version +
                               " in the build environment (" +
                               joined(probe->torch_platform_tags, ".") + ")"};
}

// At most `shown` items joined with "; ", then how many more there are.
std::string first_of(const std::vector<std::string>& items, std::size_t shown) {
  std::string out;
  for (std::size_t i = 0; i < items.size() && i < shown; ++i) {
    out += (i == 0 ? "" : "; ") + items[i];
  }
  if (items.size() > shown) out += "; and " + std::to_string(items.size() - shown) + " more";
  return out;
}

bool starts_with_linux(const std::vector<std::string>& tags) {
  return !tags.empty() && std::all_of(tags.begin(), tags.end(),
                                      [](const std::string& t) { return t.starts_with("linux_"); });
}

}  // namespace

Status analyze_binaries(JobContext& ctx) {
  auto binaries = archive::inspect_wheel_binaries(ctx.wheel);
  if (!binaries) {
    return make_error(binaries.error().code, "analyze binaries: " + binaries.error().message);
  }
  for (const auto& b : *binaries) ctx.note("[retagging] " + describe(b));
  const core::ManylinuxAssessment assessment =
      core::assess_manylinux(*binaries, core::torch_extension_provided(*binaries));
  ctx.glibc_floor = assessment.glibc_floor;
  ctx.keep(ctx.services.jobs.record_glibc_floor(ctx.job.id, ctx.glibc_floor), "the glibc floor");
  ctx.note("[retagging] manylinux: " + assessment.summary());
  if (assessment.outcome == core::ManylinuxOutcome::refused) {
    return make_error(Errc::invalid, "analyze binaries: " + assessment.summary());
  }
  const std::optional<Ceiling> ceiling = ceiling_of(ctx);
  if (ceiling && assessment.outcome == core::ManylinuxOutcome::tagged) {
    const auto above = core::above_ceiling(assessment, ceiling->ceiling);
    if (!above.empty()) {
      return make_error(Errc::invalid, "analyze binaries: the wheel needs " +
                                           assessment.policy->tag() + ", above the ceiling " +
                                           ceiling->ceiling.name() + " (" + ceiling->source +
                                           "): " + first_of(above, 5) +
                                           "; build on an older system (a container of an "
                                           "older image) or raise the recipe's manylinux key");
    }
    ctx.note("[retagging] within the ceiling " + ceiling->ceiling.name() + " (" + ceiling->source +
             ")");
  }

  auto name = core::parse_dist_filename(ctx.wheel.filename().string());
  if (!name) return make_error(Errc::internal, "built wheel: " + name.error().message);
  const std::vector<std::string> tags = name->tags.platform_tags();
  if (assessment.outcome == core::ManylinuxOutcome::tagged) {
    const std::vector<std::string> honest = assessment.platform_tags();
    if (starts_with_linux(tags)) {
      const std::string expected = "linux_" + assessment.arch;
      if (tags.size() != 1 || tags.front() != expected) {
        return make_error(Errc::invalid, "analyze binaries: the wheel is tagged " +
                                             name->tags.platform_tag + ", but its binaries are " +
                                             assessment.arch);
      }
      ctx.changes.platform_tags = honest;
    } else if (const auto claimed = core::glibc_of_platform_tags(tags)) {
      // Tagged manylinux by the build itself (auditwheel, cibuildwheel): it must not promise
      // an older glibc than its binaries need (docs/manylinux.md, "In the build runner").
      const auto numbers = [](const std::string& glibc) {
        return core::SymbolVersion::parse("GLIBC_" + glibc)
            .numbers.value_or(std::vector<std::uint32_t>{});
      };
      const std::string needed =
          core::glibc_of_platform_tag(assessment.policy->tag()).value_or(std::string());
      if (std::is_lt(core::compare_dotted(numbers(*claimed), numbers(needed)))) {
        return make_error(Errc::invalid,
                          "analyze binaries: the wheel is tagged " + name->tags.platform_tag +
                              " (glibc " + *claimed + "), but its binaries need " +
                              assessment.policy->tag() + ": " + assessment.summary());
      }
      // Honest, but it must not promise less than the ceiling either: a tag above it keeps
      // the users the ceiling is for from installing the wheel.
      if (ceiling) {
        const auto claimed_minor =
            core::ceiling_of_platform_tags(tags).value_or(core::ManylinuxCeiling{}).glibc_minor;
        if (claimed_minor > ceiling->ceiling.glibc_minor) {
          return make_error(Errc::invalid, "analyze binaries: the wheel is tagged " +
                                               name->tags.platform_tag + ", above the ceiling " +
                                               ceiling->ceiling.name() + " (" + ceiling->source +
                                               "); its binaries need only " +
                                               assessment.policy->tag());
        }
      }
      ctx.note("[retagging] the wheel's own tag " + name->tags.platform_tag + " is honest; kept");
    }
  }
  archive::WheelChanges changes = ctx.changes;
  ctx.changes = {};
  return rewrite_job_wheel(ctx, changes, "tagged");
}

}  // namespace wf::build
