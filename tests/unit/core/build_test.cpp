#include "wheelforge/core/build.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <csignal>
#include <cstdint>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

namespace wf::core {

// Readable failure output for EXPECT_EQ on cells and parallelism.
void PrintTo(const Cell& c, std::ostream* os) {
  *os << c.key();
}
void PrintTo(const Parallelism& p, std::ostream* os) {
  *os << "{max_jobs " << p.max_jobs << ", nvcc_threads " << p.nvcc_threads << ", memory "
      << p.memory_bytes << "}";
}

namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr std::uint64_t kGiB = std::uint64_t{1} << 30U;

constexpr TorchSeries t27{2, 7};
constexpr TorchSeries t28{2, 8};
constexpr TorchSeries t211{2, 11};
constexpr CudaVersion kCu126{12, 6};
constexpr CudaVersion kCu128{12, 8};
constexpr CudaVersion cu130{13, 0};

std::vector<std::string> keys(const std::vector<Cell>& cells) {
  std::vector<std::string> out;
  out.reserve(cells.size());
  for (const auto& c : cells) out.push_back(c.key());
  return out;
}

// ---------------------------------------------------------------------------------------------
// Recipes

Recipe flash_attn() {
  Recipe r;
  r.name = "flash-attn";
  r.project = "Flash_Attn";
  r.source = {SourceSpec::Kind::index_sdist, "", ""};
  r.env = {{"FLASH_ATTENTION_FORCE_BUILD", "TRUE"}, {"BUILD_TARGET", "cuda"}};
  r.arch_variable = "FLASH_ATTN_CUDA_ARCHS";
  r.arch_value = "80;90;100;120";
  r.local_version_variable = "FLASH_ATTN_LOCAL_VERSION";
  r.import_check = "import flash_attn";
  return r;
}

TEST(Recipe, DefaultsMatchTheIssue) {
  const Recipe r;
  EXPECT_EQ(r.build_command, "{python} -m pip wheel --no-build-isolation --no-deps -w {out} {src}");
  EXPECT_EQ(r.gb_per_job, 4.0);
  EXPECT_EQ(r.timeout, std::chrono::seconds(7200));
}

TEST(Recipe, ValidRecipeIsReturnedWithNormalizedProject) {
  const auto r = validate_recipe(flash_attn());
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->project, "flash-attn");
  EXPECT_EQ(r->env.size(), 2U);
}

TEST(Recipe, GitSourceWithRef) {
  Recipe r = flash_attn();
  r.source = {SourceSpec::Kind::git, "https://example.invalid/flash-attention.git", "v2.8.3"};
  EXPECT_TRUE(validate_recipe(r).ok());
}

TEST(Recipe, EveryProblemIsReportedTogether) {
  Recipe r = flash_attn();
  r.name = "-bad name";
  r.project = "not a project!";
  r.source = {SourceSpec::Kind::path, "", "main"};
  r.build_command = "{python} setup.py bdist_wheel -d {outdir}";
  r.env = {{"1BAD", "x"}, {"A", "1"}, {"A", "2"}};
  r.arch_variable = "FLASH-ARCHS";
  r.arch_value = " ";
  r.local_version_variable = "A B";
  r.gb_per_job = 0.0;
  r.timeout = std::chrono::seconds(0);
  r.build_requires = {"ninja", ""};
  r.cpus = 0U;
  const auto result = validate_recipe(r);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().code, Errc::invalid);
  const std::string& m = result.error().message;
  EXPECT_THAT(m, HasSubstr("recipe name \"-bad name\""));
  EXPECT_THAT(m, HasSubstr("not a valid project name"));
  EXPECT_THAT(m, HasSubstr("the source has no location"));
  EXPECT_THAT(m, HasSubstr("only a git source takes a ref"));
  EXPECT_THAT(m, HasSubstr("unknown placeholder \"{outdir}\""));
  EXPECT_THAT(m, HasSubstr("environment name \"1BAD\""));
  EXPECT_THAT(m, HasSubstr("environment variable A is set twice"));
  EXPECT_THAT(m, HasSubstr("arch variable \"FLASH-ARCHS\""));
  EXPECT_THAT(m, HasSubstr("has no value"));
  EXPECT_THAT(m, HasSubstr("local version variable \"A B\""));
  EXPECT_THAT(m, HasSubstr("gb_per_job"));
  EXPECT_THAT(m, HasSubstr("timeout"));
  EXPECT_THAT(m, HasSubstr("build requirement is empty"));
  EXPECT_THAT(m, HasSubstr("cpus must be at least 1"));
}

TEST(Recipe, BuildCommandChecks) {
  Recipe r = flash_attn();
  r.build_command = "  ";
  EXPECT_THAT(validate_recipe(r).error().message, HasSubstr("build command is empty"));
  r.build_command = "{python} -m build {src";
  EXPECT_THAT(validate_recipe(r).error().message, HasSubstr("unclosed"));
  r.build_command = "make";  // placeholders are optional
  EXPECT_TRUE(validate_recipe(r).ok());
}

TEST(Recipe, ArchValueNeedsVariable) {
  Recipe r = flash_attn();
  r.arch_variable.clear();
  EXPECT_THAT(validate_recipe(r).error().message, HasSubstr("without an arch variable"));
  r.arch_value.clear();
  EXPECT_TRUE(validate_recipe(r).ok());
}

TEST(Recipe, IndexSdistTakesNoLocation) {
  Recipe r = flash_attn();
  r.source.location = "/src";
  EXPECT_THAT(validate_recipe(r).error().message, HasSubstr("takes no location"));
}

TEST(Recipe, NonFiniteMemoryPerJob) {
  Recipe r = flash_attn();
  r.gb_per_job = std::numeric_limits<double>::quiet_NaN();
  EXPECT_FALSE(validate_recipe(r).ok());
  r.gb_per_job = -1.0;
  EXPECT_FALSE(validate_recipe(r).ok());
  r.gb_per_job = 0.5;
  EXPECT_TRUE(validate_recipe(r).ok());
}

TEST(CountArchs, Separators) {
  EXPECT_EQ(count_archs(""), 0U);
  EXPECT_EQ(count_archs(" ; "), 0U);
  EXPECT_EQ(count_archs("80"), 1U);
  EXPECT_EQ(count_archs("80;90;100;120"), 4U);
  EXPECT_EQ(count_archs("8.0 9.0+PTX"), 2U);
  EXPECT_EQ(count_archs("8.0;;9.0, 10.0 "), 3U);
}

// ---------------------------------------------------------------------------------------------
// Matrix values

TEST(MatrixValues, CudaVersion) {
  EXPECT_EQ(parse_cuda_version("12.8"), kCu128);
  EXPECT_EQ(parse_cuda_version("13.0"), cu130);
  EXPECT_EQ(parse_cuda_version("11.8"), (CudaVersion{11, 8}));
  EXPECT_EQ(parse_cuda_version("12.10"), (CudaVersion{12, 10}));
  for (const char* bad : {"", "12", "12.", ".8", "12.8.1", "012.8", "12.08", "20.1", "0.1", "a.b",
                          "12,8", "-1.0", "12.100"}) {
    EXPECT_EQ(parse_cuda_version(bad), std::nullopt) << bad;
  }
  EXPECT_EQ(kCu128.str(), "12.8");
  EXPECT_EQ(kCu128.tag(), "cu128");
  EXPECT_EQ(cu130.tag(), "cu130");
}

TEST(MatrixValues, TorchSeries) {
  EXPECT_EQ(parse_torch_series("2.8"), t28);
  EXPECT_EQ(parse_torch_series("2.11"), t211);
  for (const char* bad : {"", "2", "2.8.0", "02.8", "2.08", "0.4", "v2.8"}) {
    EXPECT_EQ(parse_torch_series(bad), std::nullopt) << bad;
  }
}

TEST(MatrixValues, PythonVersion) {
  for (const char* good : {"3.8", "3.11", "3.14", "4.0"}) {
    EXPECT_TRUE(is_valid_python_version(good)) << good;
  }
  for (const char* bad :
       {"", "3", "3.11.2", "311", "3.011", "03.11", "3.11t", " 3.11", "0.1", "py3.11", "cp311"}) {
    EXPECT_FALSE(is_valid_python_version(bad)) << bad;
  }
}

// ---------------------------------------------------------------------------------------------
// Cells and labels

TEST(Cell, LabelAndKey) {
  const Cell c{"3.11", t28, kCu128};
  EXPECT_EQ(c.label(), "cu128torch2.8");
  EXPECT_EQ(local_label(c), "cu128torch2.8");
  EXPECT_EQ(c.key(), "py3.11-torch2.8-cu128");
  EXPECT_EQ(local_label(Cell{"3.12", t211, cu130}), "cu130torch2.11");
  EXPECT_EQ(local_label(Cell{"3.9", t27, CudaVersion{11, 8}}), "cu118torch2.7");
}

TEST(Cell, LabelsRoundTripThroughTheVariantParser) {
  for (const auto cuda :
       {kCu126, kCu128, cu130, CudaVersion{11, 8}, CudaVersion{12, 10}, CudaVersion{9, 2}}) {
    for (const auto torch : {t27, t28, t211, TorchSeries{2, 10}}) {
      const Cell c{"3.11", torch, cuda};
      const VariantHints h = parse_local_label(c.label());
      EXPECT_EQ(h.cuda_major, cuda.major) << c.label();
      EXPECT_EQ(h.cuda_minor, cuda.minor) << c.label();
      EXPECT_EQ(h.torch, torch) << c.label();
      EXPECT_TRUE(label_matches(c.label(), c)) << c.label();
    }
  }
}

TEST(Cell, LabelMatches) {
  const Cell c{"3.11", t28, kCu128};
  EXPECT_TRUE(label_matches("cu128torch2.8", c));
  EXPECT_TRUE(label_matches("+cu128torch2.8", c));
  EXPECT_TRUE(label_matches("cu128.torch2.8", c));
  EXPECT_TRUE(label_matches("cu128torch2.8.0", c));
  EXPECT_TRUE(label_matches("cu128torch280", c));
  EXPECT_TRUE(label_matches("pt28cu128", c));
  EXPECT_TRUE(label_matches("cu128torch2.8cxx11abiTRUE", c));
  EXPECT_TRUE(label_matches("cu128torch2.8gite2743ab", c));

  EXPECT_FALSE(label_matches("", c));
  EXPECT_FALSE(label_matches("cu126torch2.8", c));  // other minor
  EXPECT_FALSE(label_matches("cu130torch2.8", c));  // other major
  EXPECT_FALSE(label_matches("cu12torch2.8", c));   // major only
  EXPECT_FALSE(label_matches("cu128torch2.7", c));  // other torch
  EXPECT_FALSE(label_matches("cu128", c));          // no torch
  EXPECT_FALSE(label_matches("torch2.8", c));       // no cuda
  EXPECT_FALSE(label_matches("rocm6.4torch2.8", c));
  EXPECT_FALSE(label_matches("cpu.torch2.8", c));
  EXPECT_FALSE(label_matches("cu128.cu126torch2.8", c));  // contradictory
}

// ---------------------------------------------------------------------------------------------
// Matrix expansion and validation

Matrix sample_matrix() {
  Matrix m;
  m.python = {"3.10", "3.11"};
  m.torch = {t28, t211};
  m.cuda = {kCu128, cu130};
  return m;
}

TEST(ExpandMatrix, CrossProductInListedOrder) {
  EXPECT_THAT(
      keys(expand_matrix(sample_matrix())),
      ElementsAre("py3.10-torch2.8-cu128", "py3.10-torch2.8-cu130", "py3.10-torch2.11-cu128",
                  "py3.10-torch2.11-cu130", "py3.11-torch2.8-cu128", "py3.11-torch2.8-cu130",
                  "py3.11-torch2.11-cu128", "py3.11-torch2.11-cu130"));
}

TEST(ExpandMatrix, OrderFollowsTheConfigNotSorting) {
  Matrix m;
  m.python = {"3.12", "3.10"};
  m.torch = {t28};
  m.cuda = {cu130, kCu126};
  EXPECT_THAT(keys(expand_matrix(m)),
              ElementsAre("py3.12-torch2.8-cu130", "py3.12-torch2.8-cu126", "py3.10-torch2.8-cu130",
                          "py3.10-torch2.8-cu126"));
}

TEST(ExpandMatrix, ExclusionsOfOneTwoAndThreeAxes) {
  Matrix m = sample_matrix();
  m.exclude = {
      {std::nullopt, t28, cu130},    // torch 2.8 was never built for CUDA 13
      {"3.10", t211, std::nullopt},  // one python × torch pair
      {"3.11", t211, kCu128},        // a single cell
  };
  EXPECT_THAT(keys(expand_matrix(m)), ElementsAre("py3.10-torch2.8-cu128", "py3.11-torch2.8-cu128",
                                                  "py3.11-torch2.11-cu130"));
  m.exclude = {{"3.10", std::nullopt, std::nullopt}};
  EXPECT_EQ(expand_matrix(m).size(), 4U);
}

TEST(ExpandMatrix, SubsetIntersects) {
  const Matrix m = sample_matrix();
  Matrix subset;
  subset.cuda = {cu130};
  EXPECT_THAT(keys(expand_matrix(m, subset)),
              ElementsAre("py3.10-torch2.8-cu130", "py3.10-torch2.11-cu130",
                          "py3.11-torch2.8-cu130", "py3.11-torch2.11-cu130"));
  subset.python = {"3.11"};
  subset.torch = {t211};
  EXPECT_THAT(keys(expand_matrix(m, subset)), ElementsAre("py3.11-torch2.11-cu130"));
  // The subset's order does not matter; the matrix's does.
  Matrix reordered;
  reordered.python = {"3.11", "3.10"};
  EXPECT_EQ(keys(expand_matrix(m, reordered)),
            keys(expand_matrix(m, Matrix{{"3.10", "3.11"}, {}, {}, {}})));
}

TEST(ExpandMatrix, EmptySubsetMeansAll) {
  EXPECT_EQ(expand_matrix(sample_matrix(), Matrix{}), expand_matrix(sample_matrix()));
}

TEST(ExpandMatrix, SubsetCannotBringBackExcludedCells) {
  Matrix m = sample_matrix();
  m.exclude = {{std::nullopt, t28, cu130}};
  Matrix subset;
  subset.torch = {t28};
  subset.cuda = {cu130};
  EXPECT_TRUE(expand_matrix(m, subset).empty());
}

TEST(ExpandMatrix, SubsetExclusionsApply) {
  Matrix subset;
  subset.python = {"3.11"};
  subset.exclude = {{std::nullopt, std::nullopt, kCu128}};
  EXPECT_THAT(keys(expand_matrix(sample_matrix(), subset)),
              ElementsAre("py3.11-torch2.8-cu130", "py3.11-torch2.11-cu130"));
}

TEST(ExpandMatrix, DuplicatesYieldOneCell) {
  Matrix m;
  m.python = {"3.11", "3.11"};
  m.torch = {t28};
  m.cuda = {kCu128, kCu128};
  EXPECT_THAT(keys(expand_matrix(m)), ElementsAre("py3.11-torch2.8-cu128"));
}

TEST(ValidateMatrix, AcceptsAValidMatrix) {
  Matrix m = sample_matrix();
  m.exclude = {{std::nullopt, t28, cu130}};
  const auto r = validate_matrix(m);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(*r, m);
}

TEST(ValidateMatrix, EmptyAxes) {
  const auto r = validate_matrix(Matrix{});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::invalid);
  EXPECT_THAT(r.error().message, AllOf(HasSubstr("no python version"), HasSubstr("no torch series"),
                                       HasSubstr("no cuda version")));
}

TEST(ValidateMatrix, EveryProblemTogether) {
  Matrix m;
  m.python = {"3.11", "3.11", "311", "3.11.2"};
  m.torch = {t28, t28, TorchSeries{0, 4}};
  m.cuda = {kCu128, CudaVersion{20, 1}, kCu128};
  m.exclude = {
      {},
      {"3.9", std::nullopt, std::nullopt},
      {std::nullopt, t27, std::nullopt},
      {std::nullopt, std::nullopt, kCu126},
      {std::nullopt, t28, kCu128},
      {std::nullopt, t28, kCu128},
  };
  const auto r = validate_matrix(m);
  ASSERT_FALSE(r.ok());
  const std::string& msg = r.error().message;
  EXPECT_THAT(msg, HasSubstr("python \"3.11\" is listed twice"));
  EXPECT_THAT(msg, HasSubstr("python \"311\" is not a version"));
  EXPECT_THAT(msg, HasSubstr("python \"3.11.2\" is not a version"));
  EXPECT_THAT(msg, HasSubstr("torch 2.8 is listed twice"));
  EXPECT_THAT(msg, HasSubstr("torch 0.4 is not a valid torch series"));
  EXPECT_THAT(msg, HasSubstr("cuda 20.1 is out of range"));
  EXPECT_THAT(msg, HasSubstr("cuda 12.8 is listed twice"));
  EXPECT_THAT(msg, HasSubstr("exclusion 1 {} names no axis"));
  EXPECT_THAT(msg, HasSubstr("exclusion 2 {python 3.9}: python \"3.9\" is not in the matrix"));
  EXPECT_THAT(msg, HasSubstr("exclusion 3 {torch 2.7}: torch 2.7 is not in the matrix"));
  EXPECT_THAT(msg, HasSubstr("exclusion 4 {cuda 12.6}: cuda 12.6 is not in the matrix"));
  EXPECT_THAT(msg, HasSubstr("exclusion 6 {torch 2.8 cuda 12.8} repeats exclusion 5"));
}

TEST(ValidateMatrix, ExclusionsThatLeaveNothing) {
  Matrix m;
  m.python = {"3.11"};
  m.torch = {t28};
  m.cuda = {kCu128, cu130};
  m.exclude = {{std::nullopt, std::nullopt, kCu128}, {"3.11", std::nullopt, cu130}};
  EXPECT_THAT(validate_matrix(m).error().message, HasSubstr("leave no cell"));
}

TEST(ValidateMatrixSubset, AcceptsValuesOfTheFullMatrix) {
  Matrix subset;
  subset.python = {"3.11"};
  subset.cuda = {cu130, kCu128};
  EXPECT_TRUE(validate_matrix_subset(subset, sample_matrix()).ok());
  EXPECT_TRUE(validate_matrix_subset(Matrix{}, sample_matrix()).ok());
}

TEST(ValidateMatrixSubset, RejectsUnknownMalformedAndDuplicateValues) {
  Matrix subset;
  subset.python = {"3.9", "3.11", "3.11", "three"};
  subset.torch = {t27};
  subset.cuda = {kCu126};
  subset.exclude = {{std::nullopt, std::nullopt, CudaVersion{11, 8}}};
  const auto r = validate_matrix_subset(subset, sample_matrix());
  ASSERT_FALSE(r.ok());
  const std::string& msg = r.error().message;
  EXPECT_THAT(msg, HasSubstr("python \"3.9\" is not in the recipe's matrix"));
  EXPECT_THAT(msg, HasSubstr("python \"3.11\" is listed twice"));
  EXPECT_THAT(msg, HasSubstr("python \"three\" is not a version"));
  EXPECT_THAT(msg, Not(HasSubstr("python \"three\" is not in the recipe's matrix")));
  EXPECT_THAT(msg, HasSubstr("torch 2.7 is not in the recipe's matrix"));
  EXPECT_THAT(msg, HasSubstr("cuda 12.6 is not in the recipe's matrix"));
  EXPECT_THAT(msg, HasSubstr("cuda 11.8 is not in the matrix"));
}

TEST(ValidateMatrixSubset, SelectingOnlyExcludedCellsFails) {
  Matrix full = sample_matrix();
  full.exclude = {{std::nullopt, t28, cu130}};
  Matrix subset;
  subset.torch = {t28};
  subset.cuda = {cu130};
  EXPECT_THAT(validate_matrix_subset(subset, full).error().message, HasSubstr("selects no cell"));
}

// ---------------------------------------------------------------------------------------------
// Parallelism

Resources host(unsigned cores, std::uint64_t available_gib, std::uint64_t reserve_gib) {
  return {available_gib * kGiB, reserve_gib * kGiB, cores};
}

Parallelism expect(unsigned jobs, unsigned threads, double gb) {
  return {jobs, threads,
          static_cast<std::uint64_t>(gb * static_cast<double>(kGiB) * jobs * threads)};
}

// A hosted CI runner: 2 cores, 24 GiB available, 4 GiB reserved; the whole rest granted.
TEST(Parallelism, SmallRunner) {
  const Resources r = host(2, 24, 4);
  const std::uint64_t all = 20 * kGiB;
  EXPECT_EQ(compute_parallelism(r, 4.0, 1, all), expect(2, 1, 4.0));  // cores limit
  // Two cores run two compiler processes: one job of two threads, not 2 × 2 (or 1 × 4).
  EXPECT_EQ(compute_parallelism(r, 4.0, 2, all), expect(1, 2, 4.0));
  EXPECT_EQ(compute_parallelism(r, 4.0, 4, all), expect(1, 2, 4.0));
  // flash-attn's heavier kernels: 5 GB per thread.
  EXPECT_EQ(compute_parallelism(r, 5.0, 4, all), expect(1, 2, 5.0));
  EXPECT_EQ(compute_parallelism(r, 5.0, 2, all), expect(1, 2, 5.0));
}

// A workstation: 16 cores, 128 GiB available, 8 GiB reserved.
TEST(Parallelism, Workstation) {
  const Resources r = host(16, 128, 8);
  const std::uint64_t all = 120 * kGiB;
  EXPECT_EQ(compute_parallelism(r, 4.0, 1, all), expect(16, 1, 4.0));  // 64 GiB, cores limit
  EXPECT_EQ(compute_parallelism(r, 4.0, 2, all), expect(8, 2, 4.0));   // 16 cores / 2 threads
  EXPECT_EQ(compute_parallelism(r, 4.0, 4, all), expect(4, 4, 4.0));   // 16 cores / 4 threads
  // Upstream's formula would run min(16/2, 128/(5×4)) = 6 jobs × 4 threads × 5 GB = 120 GB of
  // 128 GiB with nothing held back for the host, and 24 compilers on 16 cores; ours plans
  // within the 120 GiB grant and the cores.
  const Parallelism p = compute_parallelism(r, 5.0, 4, all);
  EXPECT_EQ(p, expect(4, 4, 5.0));
  EXPECT_LE(p.memory_bytes, all);
  // Memory decides where it is shorter than the cores.
  EXPECT_EQ(compute_parallelism(r, 4.0, 4, 48 * kGiB), expect(3, 4, 4.0));
}

TEST(Parallelism, CompilerProcessesNeverExceedTheCores) {
  for (unsigned cores = 1; cores <= 17; ++cores) {
    for (unsigned archs = 0; archs <= 6; ++archs) {
      for (const std::uint64_t gib : {1ULL, 7ULL, 64ULL, 512ULL}) {
        const Parallelism p = compute_parallelism(host(cores, 1024, 0), 1.0, archs, gib * kGiB);
        EXPECT_LE(p.max_jobs * p.nvcc_threads, cores) << cores << " " << archs << " " << gib;
        EXPECT_GE(p.max_jobs, 1U);
        EXPECT_GE(p.nvcc_threads, 1U);
      }
    }
  }
}

TEST(Parallelism, TwoConcurrentBuildsShareTheHost) {
  const Resources r = host(16, 128, 8);
  const Parallelism a = compute_parallelism(r, 4.0, 4, 60 * kGiB);
  const Parallelism b = compute_parallelism(r, 4.0, 4, 60 * kGiB);
  EXPECT_EQ(a, expect(3, 4, 4.0));
  EXPECT_LE(a.memory_bytes + b.memory_bytes, 120 * kGiB);
}

TEST(Parallelism, GrantIsCappedByAvailableMinusReserve) {
  const Resources r = host(16, 40, 8);  // only 32 GiB usable, whatever the grant says
  EXPECT_EQ(compute_parallelism(r, 4.0, 1, 120 * kGiB), expect(8, 1, 4.0));
  const Resources none = host(16, 4, 8);  // reserve above what is available
  EXPECT_EQ(compute_parallelism(none, 4.0, 4, 120 * kGiB), expect(1, 1, 4.0));
}

TEST(Parallelism, ThreadsAreReducedBeforeJobsFallToOne) {
  const Resources r = host(16, 128, 0);
  EXPECT_EQ(compute_parallelism(r, 4.0, 4, 12 * kGiB), expect(1, 3, 4.0));
  EXPECT_EQ(compute_parallelism(r, 4.0, 4, 8 * kGiB), expect(1, 2, 4.0));
  EXPECT_EQ(compute_parallelism(r, 4.0, 4, 7 * kGiB), expect(1, 1, 4.0));
}

TEST(Parallelism, AtLeastOneByOneEvenOverBudget) {
  const Resources r = host(2, 24, 4);
  const Parallelism p = compute_parallelism(r, 4.0, 4, 2 * kGiB);
  EXPECT_EQ(p, expect(1, 1, 4.0));
  EXPECT_GT(p.memory_bytes, 2 * kGiB);  // the caller sees that it does not fit
}

TEST(Parallelism, ThreadsCappedAtFourAndAtLeastOne) {
  const Resources r = host(64, 1024, 0);
  EXPECT_EQ(compute_parallelism(r, 4.0, 8, 1024 * kGiB).nvcc_threads, 4U);
  EXPECT_EQ(compute_parallelism(r, 4.0, 0, 1024 * kGiB).nvcc_threads, 1U);
  EXPECT_EQ(compute_parallelism(r, 4.0, 3, 1024 * kGiB).nvcc_threads, 3U);
}

TEST(Parallelism, DegenerateInputs) {
  EXPECT_EQ(compute_parallelism(host(0, 64, 0), 4.0, 1, 64 * kGiB), expect(1, 1, 4.0));
  EXPECT_EQ(compute_parallelism(host(4, 64, 0), 0.0, 1, 64 * kGiB), expect(4, 1, 4.0));
  EXPECT_EQ(
      compute_parallelism(host(4, 64, 0), std::numeric_limits<double>::infinity(), 1, 64 * kGiB),
      expect(4, 1, 4.0));
  EXPECT_EQ(compute_parallelism(host(4, 64, 0), 1.5, 1, 3 * kGiB), expect(2, 1, 1.5));
}

TEST(Parallelism, HalveForOomRetry) {
  const Parallelism p{7, 4, 112 * kGiB};
  const Parallelism h1 = halve(p);
  EXPECT_EQ(h1, (Parallelism{3, 4, 112 * kGiB}));
  const Parallelism h2 = halve(h1);
  EXPECT_EQ(h2, (Parallelism{1, 4, 112 * kGiB}));
  const Parallelism h3 = halve(h2);
  EXPECT_EQ(h3, (Parallelism{1, 2, 112 * kGiB}));
  const Parallelism h4 = halve(h3);
  EXPECT_EQ(h4, (Parallelism{1, 1, 112 * kGiB}));
  EXPECT_EQ(halve(h4), h4);  // nothing left to reduce: no retry
  EXPECT_EQ(halve(Parallelism{1, 3, 0}), (Parallelism{1, 1, 0}));
  EXPECT_EQ(halve(Parallelism{2, 1, 0}), (Parallelism{1, 1, 0}));
}

// ---------------------------------------------------------------------------------------------
// OOM detection

TEST(LooksLikeOom, ExitStatusAndSignal) {
  EXPECT_TRUE(looks_like_oom(137, false, 0, ""));
  EXPECT_TRUE(looks_like_oom(0, true, SIGKILL, ""));
  EXPECT_TRUE(looks_like_oom(SIGKILL, true, SIGKILL, ""));
  EXPECT_FALSE(looks_like_oom(0, false, 0, "Killed signal terminated program cicc"));
  EXPECT_FALSE(looks_like_oom(1, false, 0, "error: expected ';' before '}' token"));
  EXPECT_FALSE(looks_like_oom(0, true, SIGTERM, ""));
  EXPECT_FALSE(looks_like_oom(0, true, SIGSEGV, "Segmentation fault"));
  EXPECT_FALSE(looks_like_oom(143, false, 0, ""));
}

TEST(LooksLikeOom, CompilerMessages) {
  const std::vector<std::string> oom = {
      "g++: fatal error: Killed signal terminated program cc1plus",
      "nvcc: Killed signal terminated program cicc",
      "gcc: fatal error: Killed signal terminated program cicc\ncompilation terminated.",
      "csrc/flash_attn/src/flash_fwd_hdim128.cu: internal compiler error: Killed (program cc1plus)",
      "nvcc error   : 'cicc' died due to signal 9 (Kill signal)",
      "collect2: fatal error: ld terminated with signal 9 [Killed]",
      "terminate called after throwing an instance of 'std::bad_alloc'\n  what():  std::bad_alloc",
      "cc1plus: out of memory allocating 65536 bytes after a total of 1234 bytes",
      "virtual memory exhausted: Cannot allocate memory",
      "ninja: build stopped: subcommand failed.\nFAILED: a.o\nOut Of Memory",
  };
  for (const auto& log : oom) {
    EXPECT_TRUE(looks_like_oom(1, false, 0, "[1/8] building\n" + log + "\nerror: exit 1")) << log;
    EXPECT_TRUE(looks_like_oom(0, true, SIGTERM, log)) << log;
  }
}

TEST(LooksLikeOom, OtherFailuresAreNot) {
  const std::vector<std::string> not_oom = {
      "error: identifier \"__hfma2\" is undefined",
      "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB",
      "torch.cuda.OutOfMemoryError: CUDA error: out of memory",
      "ModuleNotFoundError: No module named 'torch'",
      "nvcc fatal   : Unsupported gpu architecture 'compute_120'",
      "",
  };
  for (const auto& log : not_oom) EXPECT_FALSE(looks_like_oom(1, false, 0, log)) << log;
}

// ---------------------------------------------------------------------------------------------
// Job states

const std::vector<JobState> kAllStates = {
    JobState::queued,    JobState::preparing,   JobState::building,  JobState::retagging,
    JobState::testing,   JobState::ingesting,   JobState::succeeded, JobState::failed,
    JobState::cancelled, JobState::interrupted,
};

TEST(JobState, NamesRoundTrip) {
  std::vector<std::string> names;
  for (const auto s : kAllStates) {
    names.emplace_back(state_name(s));
    EXPECT_EQ(parse_job_state(state_name(s)), s);
  }
  EXPECT_THAT(names, ElementsAre("queued", "preparing", "building", "retagging", "testing",
                                 "ingesting", "succeeded", "failed", "cancelled", "interrupted"));
  EXPECT_EQ(parse_job_state("Queued"), std::nullopt);
  EXPECT_EQ(parse_job_state(""), std::nullopt);
  EXPECT_EQ(parse_job_state("done"), std::nullopt);
}

TEST(JobState, TerminalAndRunning) {
  for (const auto s : kAllStates) {
    const bool terminal =
        s == JobState::succeeded || s == JobState::failed || s == JobState::cancelled;
    const bool running = s == JobState::preparing || s == JobState::building ||
                         s == JobState::retagging || s == JobState::testing ||
                         s == JobState::ingesting;
    EXPECT_EQ(is_terminal(s), terminal) << state_name(s);
    EXPECT_EQ(is_running(s), running) << state_name(s);
  }
}

// The complete table: rows are `from`, columns `to`, in kAllStates order
// (q = queued, p = preparing, b = building, r = retagging, t = testing, i = ingesting,
// s = succeeded, f = failed, c = cancelled, x = interrupted).
TEST(JobState, FullTransitionTable) {
  const std::vector<std::string> table = {
      //         q p b r t i s f c x
      /* q */ "0100000110",
      /* p */ "0010000111",
      /* b */ "0011000111",
      /* r */ "0000101111",
      /* t */ "0001010111",
      /* i */ "0001001111",
      /* s */ "0000000000",
      /* f */ "1000000000",
      /* c */ "1000000000",
      /* x */ "1000000110",
  };
  for (std::size_t from = 0; from < kAllStates.size(); ++from) {
    for (std::size_t to = 0; to < kAllStates.size(); ++to) {
      EXPECT_EQ(can_transition(kAllStates[from], kAllStates[to]), table[from][to] == '1')
          << state_name(kAllStates[from]) << " -> " << state_name(kAllStates[to]);
    }
  }
}

TEST(JobState, HappyPathAndRecoveries) {
  const std::vector<JobState> path = {JobState::queued,    JobState::preparing, JobState::building,
                                      JobState::building,  JobState::retagging, JobState::testing,
                                      JobState::ingesting, JobState::succeeded};
  for (std::size_t i = 1; i < path.size(); ++i) EXPECT_TRUE(can_transition(path[i - 1], path[i]));
  EXPECT_TRUE(can_transition(JobState::testing, JobState::interrupted));
  EXPECT_TRUE(can_transition(JobState::interrupted, JobState::queued));
  EXPECT_TRUE(can_transition(JobState::failed, JobState::queued));
  EXPECT_FALSE(can_transition(JobState::succeeded, JobState::queued));
  EXPECT_FALSE(can_transition(JobState::queued, JobState::interrupted));
  EXPECT_FALSE(can_transition(JobState::building, JobState::testing));
}

}  // namespace
}  // namespace wf::core
