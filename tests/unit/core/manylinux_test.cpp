#include "wheelforge/core/manylinux.hpp"

#include <elf.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace wf::core {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

WheelBinary elf_binary(std::string path, std::vector<std::string> needed,
                       std::vector<VersionNeed> needs = {}, std::uint16_t machine = EM_X86_64) {
  WheelBinary b;
  b.path = std::move(path);
  ElfInfo elf;
  elf.machine = machine;
  elf.has_dynamic = true;
  elf.needed = std::move(needed);
  elf.version_needs = std::move(needs);
  b.elf = std::move(elf);
  return b;
}

// A typical extension: libc, libm, libstdc++, libgcc_s, with the given versions.
WheelBinary extension(std::vector<std::string> glibc, std::vector<std::string> cxx = {},
                      std::uint16_t machine = EM_X86_64) {
  std::vector<VersionNeed> needs{{"libc.so.6", std::move(glibc)}};
  if (!cxx.empty()) needs.push_back({"libstdc++.so.6", std::move(cxx)});
  return elf_binary("pkg/_C.cpython-312-x86_64-linux-gnu.so",
                    {"libstdc++.so.6", "libm.so.6", "libgcc_s.so.1", "libc.so.6"}, std::move(needs),
                    machine);
}

ManylinuxAssessment assess(const std::vector<WheelBinary>& binaries) {
  return assess_manylinux(binaries, torch_extension_provided(binaries));
}

std::string tag_of(const std::vector<WheelBinary>& binaries) {
  const auto a = assess(binaries);
  return a.outcome == ManylinuxOutcome::tagged ? a.policy->tag() : "refused: " + a.summary();
}

TEST(ManylinuxTest, TheLowestPolicyIsManylinux2014WithItsAlias) {
  const std::vector<WheelBinary> wheel{extension({"GLIBC_2.2.5", "GLIBC_2.14"})};
  const auto a = assess(wheel);
  ASSERT_EQ(a.outcome, ManylinuxOutcome::tagged) << a.summary();
  EXPECT_EQ(a.arch, "x86_64");
  EXPECT_EQ(a.policy->name, "manylinux_2_17");
  EXPECT_THAT(a.platform_tags(), ElementsAre("manylinux_2_17_x86_64", "manylinux2014_x86_64"));
  EXPECT_EQ(a.glibc_floor, "2.14");
  EXPECT_EQ(a.deciding, "");
  EXPECT_EQ(a.summary(), "manylinux_2_17_x86_64 (glibc floor 2.14)");
}

TEST(ManylinuxTest, TheHighestRequirementDecides) {
  EXPECT_EQ(tag_of({extension({"GLIBC_2.17"}, {"GLIBCXX_3.4.19", "CXXABI_1.3.7"})}),
            "manylinux_2_17_x86_64");
  // std::string's C++11 ABI (GLIBCXX_3.4.21) is newer than CentOS 7's libstdc++.
  EXPECT_EQ(tag_of({extension({"GLIBC_2.14"}, {"GLIBCXX_3.4.21", "CXXABI_1.3.9"})}),
            "manylinux_2_24_x86_64");
  EXPECT_EQ(tag_of({extension({"GLIBC_2.28"})}), "manylinux_2_28_x86_64");
  EXPECT_EQ(tag_of({extension({"GLIBC_2.29"})}), "manylinux_2_31_x86_64");
  EXPECT_EQ(tag_of({extension({"GLIBC_2.34"}, {"GLIBCXX_3.4.29"})}), "manylinux_2_34_x86_64");
  // A glibc 2.28 binary built with GCC 12's libstdc++ needs a 2_35 system.
  EXPECT_EQ(tag_of({extension({"GLIBC_2.28"}, {"GLIBCXX_3.4.30"})}), "manylinux_2_35_x86_64");
  EXPECT_EQ(tag_of({extension({"GLIBC_2.39"}, {"GLIBCXX_3.4.33", "CXXABI_1.3.15"})}),
            "manylinux_2_39_x86_64");

  const std::vector<WheelBinary> wheel{extension({"GLIBC_2.14"}, {"GLIBCXX_3.4.30"})};
  const auto a = assess(wheel);
  EXPECT_EQ(a.glibc_floor, "2.14");
  EXPECT_EQ(a.deciding,
            "GLIBCXX_3.4.30 (libstdc++.so.6) needed by pkg/_C.cpython-312-x86_64-linux-gnu.so");
}

TEST(ManylinuxTest, TheFloorIsTheHighestOverEveryBinary) {
  std::vector<WheelBinary> wheel{extension({"GLIBC_2.14"})};
  wheel.push_back(
      elf_binary("pkg/tool", {"libc.so.6", "ld-linux-x86-64.so.2"},
                 {{"libc.so.6", {"GLIBC_2.3"}}, {"ld-linux-x86-64.so.2", {"GLIBC_2.35"}}}));
  wheel.back().elf->type = ElfType::executable;
  const auto a = assess(wheel);
  ASSERT_EQ(a.outcome, ManylinuxOutcome::tagged) << a.summary();
  // Versions needed from the dynamic loader count: _dl_find_object@GLIBC_2.35 does not load on
  // glibc 2.34.
  EXPECT_EQ(a.glibc_floor, "2.35");
  EXPECT_EQ(a.policy->tag(), "manylinux_2_35_x86_64");
}

TEST(ManylinuxTest, NamedVersions) {
  EXPECT_EQ(tag_of({extension({"GLIBC_2.14"}, {"CXXABI_TM_1"})}), "manylinux_2_17_x86_64");
  EXPECT_EQ(tag_of({extension({"GLIBC_2.14"}, {"CXXABI_FLOAT128"})}), "manylinux_2_24_x86_64");
  EXPECT_EQ(tag_of({extension({"GLIBC_2.14", "GLIBC_ABI_DT_RELR"})}), "manylinux_2_36_x86_64");

  const std::vector<WheelBinary> wheel{extension({"GLIBC_PRIVATE"})};
  const auto a = assess(wheel);
  ASSERT_EQ(a.outcome, ManylinuxOutcome::refused);
  ASSERT_EQ(a.too_new.size(), 1U);
  EXPECT_EQ(a.too_new[0].version, "GLIBC_PRIVATE");
  EXPECT_EQ(a.too_new[0].library, "libc.so.6");
}

TEST(ManylinuxTest, VersionsOfOtherPrefixesAreNotJudged) {
  std::vector<WheelBinary> wheel{extension({"GLIBC_2.17"})};
  wheel[0].elf->needed.push_back("libcudart.so.13");
  wheel[0].elf->version_needs.push_back({"libcudart.so.13", {"libcudart.so.13"}});
  wheel[0].elf->version_needs.push_back({"libQt5Core.so.5", {"Qt_5"}});
  EXPECT_EQ(tag_of(wheel), "manylinux_2_17_x86_64");
}

TEST(ManylinuxTest, TooNewForEveryPolicy) {
  const std::vector<WheelBinary> wheel{extension({"GLIBC_2.17", "GLIBC_2.99"}, {"GLIBCXX_3.4.99"})};
  const auto a = assess(wheel);
  ASSERT_EQ(a.outcome, ManylinuxOutcome::refused);
  EXPECT_TRUE(a.platform_tags().empty());
  ASSERT_EQ(a.too_new.size(), 2U);
  EXPECT_EQ(a.too_new[0].version, "GLIBC_2.99");
  EXPECT_EQ(a.too_new[0].needed_by, "pkg/_C.cpython-312-x86_64-linux-gnu.so");
  EXPECT_EQ(a.too_new[1].version, "GLIBCXX_3.4.99");
  EXPECT_EQ(a.glibc_floor, "2.99");
  EXPECT_THAT(a.summary(),
              HasSubstr("GLIBC_2.99 (libc.so.6, needed by pkg/_C.cpython-312-x86_64-linux-gnu.so)"
                        " is allowed by no manylinux policy for x86_64"));
}

TEST(ManylinuxTest, UnsatisfiedLibrariesAreNamedWithWhoNeedsThem) {
  std::vector<WheelBinary> wheel{extension({"GLIBC_2.14"})};
  wheel[0].elf->needed.push_back("libfoo.so.1");
  wheel.push_back(elf_binary("pkg/_D.so", {"libfoo.so.1", "libbar.so", "libc.so.6"}));
  const auto a = assess(wheel);
  ASSERT_EQ(a.outcome, ManylinuxOutcome::refused);
  ASSERT_EQ(a.unsatisfied.size(), 2U);
  EXPECT_EQ(a.unsatisfied[0].library, "libfoo.so.1");
  EXPECT_THAT(a.unsatisfied[0].needed_by,
              ElementsAre("pkg/_C.cpython-312-x86_64-linux-gnu.so", "pkg/_D.so"));
  EXPECT_EQ(a.unsatisfied[1].library, "libbar.so");
  EXPECT_THAT(a.unsatisfied[1].needed_by, ElementsAre("pkg/_D.so"));
  EXPECT_EQ(a.summary(),
            "not manylinux: pkg/_C.cpython-312-x86_64-linux-gnu.so, pkg/_D.so need libfoo.so.1, "
            "which neither the wheel, torch, CUDA nor any manylinux policy provides; pkg/_D.so "
            "needs libbar.so, which neither the wheel, torch, CUDA nor any manylinux policy "
            "provides");
}

TEST(ManylinuxTest, TorchAndCudaLibrariesAreProvided) {
  std::vector<WheelBinary> wheel{extension({"GLIBC_2.14"})};
  for (const char* lib :
       {"libc10.so",          "libc10_cuda.so",     "libtorch.so",        "libtorch_cpu.so",
        "libtorch_cuda.so",   "libtorch_python.so", "libshm.so",          "libcudart.so.12",
        "libcudart.so.13",    "libcublas.so.12",    "libcublasLt.so.12",  "libcudnn.so.9",
        "libnccl.so.2",       "libnvrtc.so.12",     "libnvJitLink.so.12", "libcusparse.so.12",
        "libcufft.so.11",     "libcurand.so.10",    "libcusolver.so.11",  "libcupti.so.12",
        "libnvToolsExt.so.1", "libcuda.so.1"}) {
    wheel[0].elf->needed.emplace_back(lib);
  }
  EXPECT_EQ(tag_of(wheel), "manylinux_2_17_x86_64");

  // Without the torch/CUDA list, only the wheel's own libraries are provided.
  const auto a = assess_manylinux(wheel, wheel_libraries(wheel));
  ASSERT_EQ(a.outcome, ManylinuxOutcome::refused);
  EXPECT_EQ(a.unsatisfied.size(), 22U);

  // An unversioned libcudart.so is not what the CUDA wheels ship.
  std::vector<WheelBinary> unversioned{extension({"GLIBC_2.14"})};
  unversioned[0].elf->needed.emplace_back("libcudart.so");
  EXPECT_THAT(tag_of(unversioned), HasSubstr("needs libcudart.so,"));
}

TEST(ManylinuxTest, TheWheelsOwnLibrariesAreProvidedBySonameOrFileName) {
  std::vector<WheelBinary> wheel{extension({"GLIBC_2.14"})};
  wheel[0].elf->needed.insert(wheel[0].elf->needed.end(),
                              {"libfoo.so.1", "libbar-3f2a1b.so", "libpython3.12.so.1.0"});
  wheel.push_back(elf_binary("pkg.libs/libfoo-8d0c2e1f.so.1.2", {"libc.so.6"}));
  wheel.back().elf->soname = "libfoo.so.1";
  wheel.push_back(elf_binary("pkg.libs/libbar-3f2a1b.so", {"libc.so.6"}));
  const auto a = assess(wheel);
  ASSERT_EQ(a.outcome, ManylinuxOutcome::refused);
  ASSERT_EQ(a.unsatisfied.size(), 1U);
  EXPECT_EQ(a.unsatisfied[0].library, "libpython3.12.so.1.0");

  const auto provided = wheel_libraries(wheel);
  EXPECT_TRUE(provided.provides("libfoo.so.1"));
  EXPECT_TRUE(provided.provides("libfoo-8d0c2e1f.so.1.2"));
  EXPECT_TRUE(provided.provides("libbar-3f2a1b.so"));
  EXPECT_FALSE(provided.provides("libfoo.so"));
}

TEST(ManylinuxTest, LibrariesOnlyNewerPoliciesAllowRaiseTheTag) {
  std::vector<WheelBinary> wheel{extension({"GLIBC_2.14"})};
  wheel[0].elf->needed.emplace_back("libmvec.so.1");
  const auto a = assess(wheel);
  ASSERT_EQ(a.outcome, ManylinuxOutcome::tagged) << a.summary();
  EXPECT_EQ(a.policy->tag(), "manylinux_2_24_x86_64");
  EXPECT_EQ(a.deciding, "libmvec.so.1 needed by pkg/_C.cpython-312-x86_64-linux-gnu.so");
  EXPECT_EQ(
      tag_of({elf_binary("x.so", {"libGL.so.1", "libX11.so.6", "libz.so.1", "ld-linux-x86-64.so.2",
                                  "libpthread.so.0", "libdl.so.2", "librt.so.1"})}),
      "manylinux_2_17_x86_64");
}

TEST(ManylinuxTest, BlacklistedSymbolsRuleOutThePoliciesThatListThem) {
  std::vector<WheelBinary> wheel{extension({"GLIBC_2.14"})};
  ElfSymbol symbol;
  symbol.name = "__cxa_thread_atexit_impl";
  wheel[0].elf->symbols.push_back(symbol);
  EXPECT_EQ(tag_of(wheel), "manylinux_2_24_x86_64");
  // Defined, it is the binary's own.
  wheel[0].elf->symbols[0].defined = true;
  EXPECT_EQ(tag_of(wheel), "manylinux_2_17_x86_64");

  // zlib internals are forbidden by every policy.
  std::vector<WheelBinary> zlib{elf_binary("z.so", {"libz.so.1", "libc.so.6"})};
  symbol.name = "inflate_fast";
  zlib[0].elf->symbols.push_back(symbol);
  const auto a = assess(zlib);
  ASSERT_EQ(a.outcome, ManylinuxOutcome::refused);
  EXPECT_THAT(a.summary(), HasSubstr("inflate_fast (libz.so.1) used by z.so is forbidden"));
}

TEST(ManylinuxTest, Aarch64HasItsOwnNumbers) {
  // CentOS 7's aarch64 glibc already defines GLIBC_2.18; x86_64 needs manylinux_2_24 for it.
  EXPECT_EQ(tag_of({extension({"GLIBC_2.17", "GLIBC_2.18"}, {}, EM_AARCH64)}),
            "manylinux_2_17_aarch64");
  EXPECT_EQ(tag_of({extension({"GLIBC_2.17", "GLIBC_2.18"})}), "manylinux_2_24_x86_64");
  // aarch64's manylinux_2_26 already has GCC 7's libstdc++.
  EXPECT_EQ(tag_of({extension({"GLIBC_2.17"}, {"GLIBCXX_3.4.24"}, EM_AARCH64)}),
            "manylinux_2_26_aarch64");
  EXPECT_EQ(tag_of({extension({"GLIBC_2.17"}, {"GLIBCXX_3.4.24"})}), "manylinux_2_27_x86_64");
  const std::vector<WheelBinary> wheel{extension({"GLIBC_2.17"}, {}, EM_AARCH64)};
  EXPECT_THAT(assess(wheel).platform_tags(),
              ElementsAre("manylinux_2_17_aarch64", "manylinux2014_aarch64"));
}

TEST(ManylinuxTest, WhatCannotBeAssessed) {
  EXPECT_EQ(assess({}).outcome, ManylinuxOutcome::no_binaries);
  EXPECT_EQ(assess({}).summary(), "no ELF binaries");

  // Relocatable objects are not loaded; they do not count.
  std::vector<WheelBinary> objects{elf_binary("pkg/x.o", {})};
  objects[0].elf->type = ElfType::relocatable;
  EXPECT_EQ(assess(objects).outcome, ManylinuxOutcome::no_binaries);

  std::vector<WheelBinary> unreadable{extension({"GLIBC_2.14"})};
  unreadable.push_back({"pkg/broken.so", 100, std::nullopt, "the ELF header is truncated"});
  auto a = assess(unreadable);
  ASSERT_EQ(a.outcome, ManylinuxOutcome::refused);
  EXPECT_EQ(a.summary(), "not manylinux: cannot read pkg/broken.so: the ELF header is truncated");

  const std::vector<WheelBinary> mixed{extension({"GLIBC_2.14"}),
                                       elf_binary("pkg/arm.so", {}, {}, EM_AARCH64)};
  a = assess(mixed);
  ASSERT_EQ(a.outcome, ManylinuxOutcome::refused);
  EXPECT_THAT(a.summary(),
              HasSubstr("binaries of several architectures: x86_64 "
                        "(pkg/_C.cpython-312-x86_64-linux-gnu.so), aarch64 (pkg/arm.so)"));

  const std::vector<WheelBinary> ppc{elf_binary("pkg/p.so", {"libc.so.6"}, {}, EM_PPC64)};
  a = assess(ppc);
  ASSERT_EQ(a.outcome, ManylinuxOutcome::refused);
  EXPECT_EQ(a.arch, "ppc64le");
  EXPECT_THAT(a.summary(), HasSubstr("knows no manylinux policy for ppc64le"));
}

TEST(ManylinuxTest, PolicyTableIsOrderedAndMonotonic) {
  for (const char* arch : {"x86_64", "aarch64"}) {
    const auto policies = manylinux_policies_for(arch);
    ASSERT_GE(policies.size(), 8U) << arch;
    EXPECT_EQ(policies.front()->name, "manylinux_2_17");
    for (const char* name :
         {"manylinux_2_17", "manylinux_2_24", "manylinux_2_27", "manylinux_2_28", "manylinux_2_31",
          "manylinux_2_34", "manylinux_2_35", "manylinux_2_39"}) {
      EXPECT_TRUE(std::any_of(policies.begin(), policies.end(),
                              [&](const ManylinuxPolicy* p) { return p->name == name; }))
          << arch << " " << name;
    }
    // PEP 600: what a policy allows, every later one allows too.
    for (std::size_t i = 1; i < policies.size(); ++i) {
      const auto& lower = *policies[i - 1];
      const auto& higher = *policies[i];
      EXPECT_LT(lower.glibc_minor, higher.glibc_minor);
      for (const auto& lib : lower.libraries) EXPECT_TRUE(higher.allows_library(lib)) << lib;
      for (const auto& ceiling : lower.ceilings) {
        if (!ceiling.highest.empty()) {
          const std::string version =
              std::string(ceiling.prefix) + "_" + std::string(ceiling.highest);
          EXPECT_TRUE(higher.allows_version(version)) << higher.tag() << " " << version;
        }
        for (const auto& named : ceiling.named) {
          EXPECT_TRUE(
              higher.allows_version(std::string(ceiling.prefix) + "_" + std::string(named)));
        }
      }
      // Each policy allows its own glibc.
      EXPECT_TRUE(higher.allows_version("GLIBC_2." + std::to_string(higher.glibc_minor)) ||
                  higher.glibc_minor == 37)
          << higher.tag();
    }
  }
}

TEST(ManylinuxTest, GlobMatching) {
  EXPECT_TRUE(glob_match("libcudart.so.*", "libcudart.so.13"));
  EXPECT_FALSE(glob_match("libcudart.so.*", "libcudart.so"));
  EXPECT_TRUE(glob_match("libtorch*.so", "libtorch.so"));
  EXPECT_TRUE(glob_match("libtorch*.so", "libtorch_cuda.so"));
  EXPECT_FALSE(glob_match("libtorch*.so", "libtorch_cuda.so.1"));
  EXPECT_TRUE(glob_match("lib?.so", "libz.so"));
  EXPECT_FALSE(glob_match("lib?.so", "lib.so"));
  EXPECT_TRUE(glob_match("*", ""));
  EXPECT_TRUE(glob_match("a*b*c", "aXXbYYbc"));
  EXPECT_FALSE(glob_match("a*b*c", "aXXbYYb"));
  // Long texts with many stars stay linear.
  EXPECT_FALSE(glob_match("*a*a*a*a*a*a*a*a*b", std::string(100000, 'a')));
}

TEST(ManylinuxTest, GlibcOfPlatformTags) {
  EXPECT_EQ(glibc_of_platform_tag("manylinux_2_34_x86_64"), "2.34");
  EXPECT_EQ(glibc_of_platform_tag("manylinux_2_17_aarch64"), "2.17");
  EXPECT_EQ(glibc_of_platform_tag("manylinux2014_x86_64"), "2.17");
  EXPECT_EQ(glibc_of_platform_tag("manylinux2010_x86_64"), "2.12");
  EXPECT_EQ(glibc_of_platform_tag("manylinux1_x86_64"), "2.5");
  for (const auto tag :
       {"linux_x86_64", "musllinux_1_2_x86_64", "any", "manylinux_2_x86_64", "manylinux_2_34_",
        "manylinux__34_x86_64", "manylinux2014_", "macosx_11_0_arm64"}) {
    EXPECT_EQ(glibc_of_platform_tag(tag), std::nullopt) << tag;
  }
  const std::vector<std::string> both = {"manylinux_2_28_x86_64", "manylinux_2_17_x86_64",
                                         "manylinux2014_x86_64"};
  EXPECT_EQ(glibc_of_platform_tags(both), "2.17");
  const std::vector<std::string> tens = {"manylinux_2_9_x86_64", "manylinux_2_10_x86_64"};
  EXPECT_EQ(glibc_of_platform_tags(tens), "2.9") << "compared as numbers";
  const std::vector<std::string> none = {"linux_x86_64"};
  EXPECT_EQ(glibc_of_platform_tags(none), std::nullopt);
}

TEST(ManylinuxCeilingTest, ParsesTheSpellingsARecipeWrites) {
  EXPECT_EQ(parse_manylinux_ceiling("2_28")->glibc_minor, 28U);
  EXPECT_EQ(parse_manylinux_ceiling("manylinux_2_34")->glibc_minor, 34U);
  EXPECT_EQ(parse_manylinux_ceiling("manylinux2014")->glibc_minor, 17U);
  EXPECT_EQ(parse_manylinux_ceiling("2_17")->name(), "manylinux_2_17");
  const auto forms = [](std::string_view text) {
    const auto r = parse_manylinux_ceiling(text);
    return r ? std::string("accepted") : r.error().message;
  };
  for (const auto text : {"", "2.28", "228", "2_", "_28", "2_28_x86_64", "manylinux_2_28_x86_64",
                          "manylinux", "2_2x", "linux_2_28"}) {
    EXPECT_EQ(forms(text), "'" + std::string(text) +
                               "' is not a manylinux ceiling: expected \"2_28\", "
                               "\"manylinux_2_28\" or \"manylinux2014\"");
  }
  EXPECT_EQ(forms("3_1"), "'3_1' names glibc 3, not glibc 2");
  for (const auto text : {"2_12", "manylinux1", "manylinux2010", "2_5"}) {
    EXPECT_EQ(forms(text), "'" + std::string(text) +
                               "' is below manylinux_2_17, the lowest tag wheelforge gives a "
                               "wheel with binaries");
  }
}

TEST(ManylinuxCeilingTest, OfATorchWheelsPlatformTags) {
  const std::vector<std::string> pypi28 = {"manylinux_2_28_x86_64"};
  EXPECT_EQ(ceiling_of_platform_tags(pypi28), ManylinuxCeiling{28});
  // torch up to 2.5 on PyPI: manylinux1 by its tag, glibc 2.17 in fact.
  const std::vector<std::string> old = {"manylinux1_x86_64"};
  EXPECT_EQ(ceiling_of_platform_tags(old), ManylinuxCeiling{17});
  const std::vector<std::string> both = {"manylinux_2_17_x86_64", "manylinux2014_x86_64"};
  EXPECT_EQ(ceiling_of_platform_tags(both), ManylinuxCeiling{17});
  const std::vector<std::string> local = {"linux_x86_64"};
  EXPECT_EQ(ceiling_of_platform_tags(local), std::nullopt);
  EXPECT_EQ(ceiling_of_platform_tags({}), std::nullopt);
}

TEST(ManylinuxCeilingTest, NamesWhatNeedsMoreThanTheCeilingWithItsSymbols) {
  std::vector<WheelBinary> wheel{
      extension({"GLIBC_2.2.5", "GLIBC_2.28", "GLIBC_2.34"}, {"GLIBCXX_3.4.30"})};
  auto& elf = *wheel.front().elf;
  const auto import = [&](std::string name, std::string version, std::string library) {
    ElfSymbol sym;
    sym.name = std::move(name);
    sym.version = std::move(version);
    sym.version_library = std::move(library);
    elf.symbols.push_back(std::move(sym));
  };
  import("memcpy", "GLIBC_2.2.5", "libc.so.6");
  import("fcntl64", "GLIBC_2.28", "libc.so.6");
  for (const auto name :
       {"pthread_create", "pthread_join", "dlsym", "dlopen", "__libc_start_main"}) {
    import(name, "GLIBC_2.34", "libc.so.6");
  }
  import("_ZSt28__throw_bad_array_new_lengthv", "GLIBCXX_3.4.29", "libstdc++.so.6");
  ElfSymbol exported;
  exported.name = "pthread_create";
  exported.defined = true;
  exported.version = "GLIBC_2.34";
  elf.symbols.push_back(exported);  // defined here: not a need

  const auto a = assess(wheel);
  ASSERT_EQ(a.outcome, ManylinuxOutcome::tagged) << a.summary();
  EXPECT_EQ(a.policy->tag(), "manylinux_2_35_x86_64");
  const std::string so = "pkg/_C.cpython-312-x86_64-linux-gnu.so";
  EXPECT_EQ(
      above_ceiling(a, ManylinuxCeiling{28}),
      (std::vector<std::string>{
          "GLIBC_2.34 (libc.so.6: pthread_create, pthread_join, dlsym and 2 more) needed by " + so,
          "GLIBCXX_3.4.30 (libstdc++.so.6) needed by " + so}));
  EXPECT_EQ(above_ceiling(a, ManylinuxCeiling{34}),
            (std::vector<std::string>{"GLIBCXX_3.4.30 (libstdc++.so.6) needed by " + so}));
  EXPECT_TRUE(above_ceiling(a, ManylinuxCeiling{35}).empty());
  EXPECT_TRUE(above_ceiling(a, ManylinuxCeiling{39}).empty());
  // GLIBC_2.28 alone: one symbol, named.
  std::vector<WheelBinary> older{extension({"GLIBC_2.28"})};
  ElfSymbol fcntl;
  fcntl.name = "fcntl64";
  fcntl.version = "GLIBC_2.28";
  fcntl.version_library = "libc.so.6";
  older.front().elf->symbols.push_back(fcntl);
  EXPECT_EQ(above_ceiling(assess(older), ManylinuxCeiling{17}),
            (std::vector<std::string>{"GLIBC_2.28 (libc.so.6: fcntl64) needed by " + so}));
  // A refused wheel has nothing above a ceiling: it fails for its own reasons.
  const std::vector<WheelBinary> refused{extension({"GLIBC_2.99"})};
  EXPECT_TRUE(above_ceiling(assess(refused), ManylinuxCeiling{17}).empty());
}

}  // namespace
}  // namespace wf::core
