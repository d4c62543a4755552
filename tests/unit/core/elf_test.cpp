#include "wheelforge/core/elf.hpp"

#include <elf.h>
#include <gtest/gtest.h>

#include <vector>

namespace wf::core {
namespace {

TEST(SymbolVersionTest, SplitsAtTheFirstUnderscore) {
  const auto glibc = SymbolVersion::parse("GLIBC_2.2.5");
  EXPECT_EQ(glibc.prefix, "GLIBC");
  EXPECT_EQ(glibc.suffix, "2.2.5");
  EXPECT_EQ(glibc.numbers, (std::vector<std::uint32_t>{2, 2, 5}));

  const auto tm = SymbolVersion::parse("CXXABI_TM_1");
  EXPECT_EQ(tm.prefix, "CXXABI");
  EXPECT_EQ(tm.suffix, "TM_1");
  EXPECT_FALSE(tm.numbers);

  const auto relr = SymbolVersion::parse("GLIBC_ABI_DT_RELR");
  EXPECT_EQ(relr.prefix, "GLIBC");
  EXPECT_EQ(relr.suffix, "ABI_DT_RELR");
  EXPECT_FALSE(relr.numbers);

  const auto plain = SymbolVersion::parse("libcudart.so.13");
  EXPECT_EQ(plain.prefix, "libcudart.so.13");
  EXPECT_EQ(plain.suffix, "");
  EXPECT_FALSE(plain.numbers);
}

TEST(SymbolVersionTest, NumbersAreDottedDecimalOnly) {
  for (const char* name : {"GLIBC_2.", "GLIBC_.2", "GLIBC_2..3", "GLIBC_2.x", "GLIBC_",
                           "GLIBC_PRIVATE", "GLIBC_1234567890"}) {
    EXPECT_FALSE(SymbolVersion::parse(name).numbers) << name;
  }
  EXPECT_EQ(SymbolVersion::parse("GCC_14.0.0").numbers, (std::vector<std::uint32_t>{14, 0, 0}));
  EXPECT_EQ(SymbolVersion::parse("ZLIB_1.2.5.2").numbers, (std::vector<std::uint32_t>{1, 2, 5, 2}));
}

TEST(SymbolVersionTest, DottedVersionsCompareNumerically) {
  const std::vector<std::uint32_t> v2_9{2, 9};
  const std::vector<std::uint32_t> v2_14{2, 14};
  const std::vector<std::uint32_t> v2_14_0{2, 14, 0};
  const std::vector<std::uint32_t> v2_14_1{2, 14, 1};
  EXPECT_TRUE(compare_dotted(v2_9, v2_14) < 0);
  EXPECT_TRUE(compare_dotted(v2_14_1, v2_14) > 0);
  EXPECT_TRUE(compare_dotted(v2_14, v2_14_0) == 0);
  EXPECT_EQ(dotted_str(v2_14_1), "2.14.1");
}

TEST(ElfFactsTest, HighestNeededVersionPerPrefix) {
  ElfInfo info;
  info.version_needs = {
      {"libc.so.6", {"GLIBC_2.2.5", "GLIBC_2.14", "GLIBC_PRIVATE", "GLIBC_2.4"}},
      {"libstdc++.so.6", {"GLIBCXX_3.4.9", "CXXABI_1.3.9", "GLIBCXX_3.4.21", "CXXABI_TM_1"}},
      {"libm.so.6", {"GLIBC_2.29"}},
  };
  EXPECT_EQ(highest_needed_version(info, "GLIBC"), "GLIBC_2.29");
  EXPECT_EQ(highest_needed_version(info, "GLIBCXX"), "GLIBCXX_3.4.21");
  EXPECT_EQ(highest_needed_version(info, "CXXABI"), "CXXABI_1.3.9");
  EXPECT_EQ(highest_needed_version(info, "GCC"), std::nullopt);
  EXPECT_EQ(glibc_floor(info), (std::vector<std::uint32_t>{2, 29}));
  EXPECT_EQ(glibc_floor(ElfInfo{}), std::nullopt);
}

TEST(ElfFactsTest, MachineNamesAreThoseOfPlatformTags) {
  using C = ElfClass;
  using E = ElfEndian;
  EXPECT_EQ(machine_name(EM_X86_64, C::elf64, E::little), "x86_64");
  EXPECT_EQ(machine_name(EM_386, C::elf32, E::little), "i686");
  EXPECT_EQ(machine_name(EM_AARCH64, C::elf64, E::little), "aarch64");
  EXPECT_EQ(machine_name(EM_PPC64, C::elf64, E::little), "ppc64le");
  EXPECT_EQ(machine_name(EM_PPC64, C::elf64, E::big), "ppc64");
  EXPECT_EQ(machine_name(EM_S390, C::elf64, E::big), "s390x");
  EXPECT_EQ(machine_name(EM_ARM, C::elf32, E::little), "armv7l");
  EXPECT_EQ(machine_name(EM_RISCV, C::elf64, E::little), "riscv64");
  EXPECT_EQ(machine_name(EM_MIPS, C::elf32, E::big), "mips");
  EXPECT_EQ(machine_name(4242, C::elf64, E::little), "machine-4242");
}

}  // namespace
}  // namespace wf::core
