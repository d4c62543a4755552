// The compile cache: ccache's statistics log counted per job, the summary kept in the work
// directory, the compiler wrappers, and the order that lets the Pythons of a torch x CUDA
// combination share compiled objects.

#include "wheelforge/build/compile_cache.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

namespace wf::build {
namespace {

namespace fs = std::filesystem;
using State = catalog::CompileCacheStats::State;

// What ccache 4.7 wrote for a CUDA compile that hit, a C compile that missed, a C compile that
// hit directly and a link.
constexpr std::string_view kLog =
    "# kernel.cu\n"
    "direct_cache_miss\n"
    "local_storage_hit\n"
    "preprocessed_cache_hit\n"
    "# other.cu\n"
    "cache_miss\n"
    "direct_cache_miss\n"
    "preprocessed_cache_miss\n"
    "# c.c\n"
    "cache_miss\n"
    "direct_cache_miss\n"
    "local_storage_write\n"
    "# c.c\n"
    "direct_cache_hit\n"
    "local_storage_read_hit\n"
    "#\n"
    "called_for_link\n";

TEST(CompileCache, CountsEachCallOfTheStatisticsLog) {
  const catalog::CompileCacheStats s = parse_ccache_stats_log(kLog);
  EXPECT_EQ(s.hits, 2U);
  EXPECT_EQ(s.misses, 2U);
  EXPECT_EQ(s.uncacheable, 1U);
  EXPECT_EQ(s.cuda_hits, 1U);
  EXPECT_EQ(s.cuda_misses, 1U);
  EXPECT_EQ(parse_ccache_stats_log("").hits, 0U);
}

TEST(CompileCache, SummaryReadsBackAndDescribesItself) {
  catalog::CompileCacheStats s = parse_ccache_stats_log(kLog);
  s.directory = "/data/builds/ccache/demo";
  s.size_bytes = 3U << 20U;
  s.bound_bytes = 10ULL << 30U;
  auto back = parse_compile_cache_stats(format_compile_cache_stats(s));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back.value(), s);
  EXPECT_EQ(describe_compile_cache(s),
            "2 hits, 2 misses (CUDA: 1 hit, 1 miss), 1 uncacheable; /data/builds/ccache/demo "
            "holds 3.0 MiB of 10.0 GiB");
  catalog::CompileCacheStats off;
  off.state = State::off;
  off.reason = "the build request said \"cache\": false\nsecond line";
  back = parse_compile_cache_stats(format_compile_cache_stats(off));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back.value().state, State::off);
  EXPECT_EQ(back.value().reason, "the build request said \"cache\": false second line");
  EXPECT_FALSE(parse_compile_cache_stats("hits=3\n").ok());
}

TEST(CompileCache, WrappersRunTheRealCompilerThroughCcacheOnce) {
  const fs::path dir = fs::temp_directory_path() / ("wf-cc-test-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "bin");
  // A stand-in for ccache that says how it was called, and a "compiler" that calls gcc from
  // PATH as nvcc calls its host compiler.
  {
    std::ofstream(dir / "bin" / "ccache") << "#!/bin/sh\necho \"ccache $*\"\nexec \"$@\"\n";
    std::ofstream(dir / "bin" / "nvcc") << "#!/bin/sh\necho \"nvcc $*\"\nexec gcc inner\n";
    std::ofstream(dir / "bin" / "gcc") << "#!/bin/sh\necho \"gcc $*\"\n";
  }
  for (const char* name : {"ccache", "nvcc", "gcc"})
    fs::permissions(dir / "bin" / name, fs::perms::owner_all);
  ASSERT_TRUE(
      write_compiler_wrappers(dir / "wrap", dir / "bin" / "ccache",
                              {{"nvcc", dir / "bin" / "nvcc"}, {"gcc", dir / "bin" / "gcc"}})
          .ok());
  EXPECT_EQ(find_executable("gcc", (dir / "wrap").string() + ":" + (dir / "bin").string()),
            dir / "wrap" / "gcc");
  EXPECT_EQ(find_executable("nope", (dir / "bin").string()), fs::path());
  const std::string command = "env -u WHEELFORGE_UNDER_CCACHE PATH=" + (dir / "wrap").string() +
                              ":" + (dir / "bin").string() + ":/usr/bin:/bin " +
                              (dir / "wrap" / "nvcc").string() + " -c k.cu > " +
                              (dir / "out.txt").string();
  ASSERT_EQ(std::system(command.c_str()), 0);
  std::ifstream in(dir / "out.txt");
  const std::string out((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // Once through ccache, at the outermost call; nvcc's own gcc runs directly.
  EXPECT_EQ(out,
            "ccache " + (dir / "bin" / "nvcc").string() + " -c k.cu\nnvcc -c k.cu\ngcc inner\n");
  fs::remove_all(dir);
}

catalog::JobRecord job(std::int64_t id, const std::string& python, const std::string& torch) {
  catalog::JobRecord j;
  j.id = id;
  j.recipe = "demo";
  j.cell.python = python;
  j.cell.torch = *core::parse_torch_series(torch);
  j.cell.cuda = *core::parse_cuda_version("13.0");
  return j;
}

std::vector<std::int64_t> ids(const std::vector<catalog::JobRecord>& jobs) {
  std::vector<std::int64_t> out;
  for (const auto& j : jobs) out.push_back(j.id);
  return out;
}

TEST(CompileCache, TheFirstPythonOfEachCombinationGoesFirst) {
  // Queued Python-innermost: 3.11/2.8, 3.12/2.8, 3.11/2.9, 3.12/2.9.
  std::vector<catalog::JobRecord> queued{job(1, "3.11", "2.8"), job(2, "3.12", "2.8"),
                                         job(3, "3.11", "2.9"), job(4, "3.12", "2.9")};
  order_to_share_compiles(queued, {});
  EXPECT_EQ(ids(queued), (std::vector<std::int64_t>{1, 3, 2, 4}));
  // With 2.8's first job running, 2.9's first comes before 2.8's second.
  std::vector<catalog::JobRecord> rest{job(2, "3.12", "2.8"), job(3, "3.11", "2.9"),
                                       job(4, "3.12", "2.9")};
  order_to_share_compiles(rest, {compile_share_key(job(1, "3.11", "2.8"))});
  EXPECT_EQ(ids(rest), (std::vector<std::int64_t>{3, 2, 4}));
}

TEST(CompileCache, ABuildRequestTurnsItOffForItsBuildOnly) {
  const fs::path dir = fs::temp_directory_path() / ("wf-cc-opt-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  EXPECT_FALSE(compile_cache_refused(dir, 7));
  ASSERT_TRUE(refuse_compile_cache(dir, 7).ok());
  EXPECT_TRUE(compile_cache_refused(dir, 7));
  EXPECT_FALSE(compile_cache_refused(dir, 8));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace wf::build
