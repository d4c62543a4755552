#pragma once
// The compile cache that the cells and rebuilds of a recipe share (`[build] compile_cache`,
// default DATA_DIR/builds/ccache/<recipe>): every build command runs with ccache in front of
// its compilers, so that an object whose inputs are identical (compiler, flags, preprocessed
// source) is compiled once. ccache finds a result only for identical inputs, whatever the
// cell: a CUDA kernel that includes no Python header compiles to the same object for every
// Python of a torch x CUDA cell, and a rebuild after a Python-only change compiles nothing.
//
// The build gets wrapper scripts named like the compilers (nvcc, gcc, g++, cc, c++) first on
// PATH and PYTORCH_NVCC (torch's cpp_extension); each runs ccache with the real compiler, and
// the real one directly when called under ccache (nvcc's own host compiles). Per job, ccache
// writes a statistics log in the work directory; what it says is kept in compile-cache.txt.

#include <cstdint>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "wheelforge/catalog/jobs.hpp"
#include "wheelforge/util/result.hpp"

namespace wf::build {

/// The cache directory of `recipe` under `root` (`[build] compile_cache`, or
/// DATA_DIR/builds/ccache when that is not set).
[[nodiscard]] std::filesystem::path compile_cache_dir(const std::filesystem::path& root,
                                                      std::string_view recipe);

/// Where a job's ccache statistics log and the summary kept after the job are written.
inline constexpr std::string_view kCompileCacheLog = "ccache-stats.log";
inline constexpr std::string_view kCompileCacheFile = "compile-cache.txt";

/// Counts what a ccache statistics log (CCACHE_STATSLOG) says: one "# <source>" line per
/// compiler call followed by its counters. A call is a hit when it has direct_cache_hit or
/// preprocessed_cache_hit, a miss when it has cache_miss, else uncacheable; calls of a .cu
/// source are counted again as CUDA hits and misses. Only the counts are set.
[[nodiscard]] catalog::CompileCacheStats parse_ccache_stats_log(std::string_view log);

/// The summary file's text and back (key=value lines). Reading fails on text without a state.
[[nodiscard]] std::string format_compile_cache_stats(const catalog::CompileCacheStats& stats);
[[nodiscard]] Result<catalog::CompileCacheStats> parse_compile_cache_stats(std::string_view text);

/// "3 hits, 1 miss (CUDA: 2 hits, 1 miss), 4 uncacheable; <dir> holds 1.2 MiB of 10.0 GiB", or
/// "off: <reason>", "unavailable: <reason>": the line the job's log gets.
[[nodiscard]] std::string describe_compile_cache(const catalog::CompileCacheStats& stats);

/// The compilers the wrappers stand for, in the order they are written.
inline constexpr std::string_view kWrappedCompilers[] = {"nvcc", "gcc", "g++", "cc", "c++"};

/// Writes one wrapper script per entry of `compilers` (name -> real compiler's absolute path)
/// into `dir` (created), each running `ccache` (an absolute path) with the real compiler; a
/// wrapper that exists with the same text is not written again.
[[nodiscard]] Status write_compiler_wrappers(
    const std::filesystem::path& dir, const std::filesystem::path& ccache,
    const std::map<std::string, std::filesystem::path>& compilers);

/// Writes one wrapper script per kWrappedCompilers name into `dir` (created) for builds that
/// run on other machines or in images (containers, Slurm nodes): each finds its real compiler
/// where it runs (nvcc under CUDA_HOME, the others on PATH after `dir`) and runs it through the
/// `ccache` on PATH there, or directly when there is none. A wrapper that exists with the same
/// text is not written again.
[[nodiscard]] Status write_portable_compiler_wrappers(const std::filesystem::path& dir);

/// The marker a remote build's check leaves in its work directory when the compile cache
/// cannot be used where it runs; it holds the reason.
inline constexpr std::string_view kCompileCacheUnavailable = "compile-cache-unavailable";

/// Where the wrappers of this set of compilers live: DATA_DIR/builds/compilers/<hash of the
/// paths>, shared by every job with the same compilers. ccache hashes the host compiler that
/// nvcc runs (a wrapper) by size and modification time, so the wrappers must stay unchanged
/// from job to job (write_compiler_wrappers leaves a wrapper that says the same alone).
[[nodiscard]] std::filesystem::path compiler_wrappers_dir(
    const std::filesystem::path& builds_dir, const std::filesystem::path& ccache,
    const std::map<std::string, std::filesystem::path>& compilers);

/// The first executable `name` in a PATH-like list of directories; empty when none.
[[nodiscard]] std::filesystem::path find_executable(std::string_view name, std::string_view path);

/// The disk a directory's files take (allocated blocks); 0 when it is missing.
[[nodiscard]] std::uint64_t directory_bytes(const std::filesystem::path& dir);

/// A request's `"cache": false` for build `build_id`, kept in the builds directory (a job reads
/// it when its build starts, also after a restart). Remembered by a small file
/// (DATA_DIR/builds/build-<id>.options).
[[nodiscard]] Status refuse_compile_cache(const std::filesystem::path& builds_dir,
                                          std::int64_t build_id);
[[nodiscard]] bool compile_cache_refused(const std::filesystem::path& builds_dir,
                                         std::int64_t build_id);

/// The cells that share compiled objects: one recipe's torch x CUDA combination (any Python).
[[nodiscard]] std::string compile_share_key(const catalog::JobRecord& job);

/// Orders queued jobs (oldest first) so that the first of each torch x CUDA combination comes
/// before the others of it: a job's rank is the number of jobs of its combination running
/// (`running`, keys of compile_share_key) or queued before it, and jobs are stably sorted by
/// rank. When admission cannot run all of them at once, the later Pythons of a combination
/// wait for the first and find its objects in the compile cache.
void order_to_share_compiles(std::vector<catalog::JobRecord>& queued,
                             const std::multiset<std::string>& running);

}  // namespace wf::build
