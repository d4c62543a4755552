#include "wheelforge/core/manylinux.hpp"

#include <algorithm>
#include <iterator>
#include <map>
#include <optional>
#include <set>

namespace wf::core {
namespace {

// ---------------------------------------------------------------------------------------------
// Policy data: auditwheel's src/auditwheel/policy/manylinux-policy.json (pypa/auditwheel 6.8.1;
// the file last changed on 2025-12-27), restated as ceilings per prefix. docs/manylinux.md has
// the same numbers as tables, and why a ceiling decides what auditwheel's lists decide.

constexpr std::string_view kNamed_TM_1[] = {"TM_1"};
constexpr std::string_view kNamed_FLOAT128_TM_1[] = {"FLOAT128", "TM_1"};
constexpr std::string_view kNamed_ABI_DT_RELR[] = {"ABI_DT_RELR"};
constexpr VersionCeiling kX86_64_2_17[] = {
    {"GLIBC", "2.17", {}}, {"GLIBCXX", "3.4.19", {}}, {"CXXABI", "1.3.7", kNamed_TM_1},
    {"GCC", "4.8.0", {}},  {"LIBATOMIC", "", {}},     {"ZLIB", "1.2.5.2", {}}};
constexpr VersionCeiling kX86_64_2_24[] = {
    {"GLIBC", "2.24", {}}, {"GLIBCXX", "3.4.22", {}}, {"CXXABI", "1.3.10", kNamed_FLOAT128_TM_1},
    {"GCC", "4.8.0", {}},  {"LIBATOMIC", "1.2", {}},  {"ZLIB", "1.2.5.2", {}}};
constexpr VersionCeiling kX86_64_2_26[] = {
    {"GLIBC", "2.26", {}}, {"GLIBCXX", "3.4.22", {}}, {"CXXABI", "1.3.10", kNamed_FLOAT128_TM_1},
    {"GCC", "4.8.0", {}},  {"LIBATOMIC", "1.2", {}},  {"ZLIB", "1.2.5.2", {}}};
constexpr VersionCeiling kX86_64_2_27[] = {
    {"GLIBC", "2.27", {}}, {"GLIBCXX", "3.4.24", {}}, {"CXXABI", "1.3.11", kNamed_FLOAT128_TM_1},
    {"GCC", "7.0.0", {}},  {"LIBATOMIC", "1.2", {}},  {"ZLIB", "1.2.9", {}}};
constexpr VersionCeiling kX86_64_2_28[] = {
    {"GLIBC", "2.28", {}}, {"GLIBCXX", "3.4.24", {}}, {"CXXABI", "1.3.11", kNamed_FLOAT128_TM_1},
    {"GCC", "7.0.0", {}},  {"LIBATOMIC", "1.2", {}},  {"ZLIB", "1.2.9", {}}};
constexpr VersionCeiling kX86_64_2_31[] = {
    {"GLIBC", "2.31", {}}, {"GLIBCXX", "3.4.28", {}}, {"CXXABI", "1.3.12", kNamed_FLOAT128_TM_1},
    {"GCC", "7.0.0", {}},  {"LIBATOMIC", "1.2", {}},  {"ZLIB", "1.2.9", {}}};
constexpr VersionCeiling kX86_64_2_34[] = {
    {"GLIBC", "2.34", {}}, {"GLIBCXX", "3.4.29", {}}, {"CXXABI", "1.3.13", kNamed_FLOAT128_TM_1},
    {"GCC", "7.0.0", {}},  {"LIBATOMIC", "1.2", {}},  {"ZLIB", "1.2.9", {}}};
constexpr VersionCeiling kX86_64_2_35[] = {
    {"GLIBC", "2.35", {}}, {"GLIBCXX", "3.4.30", {}}, {"CXXABI", "1.3.13", kNamed_FLOAT128_TM_1},
    {"GCC", "12.0.0", {}}, {"LIBATOMIC", "1.2", {}},  {"ZLIB", "1.2.9", {}}};
constexpr VersionCeiling kX86_64_2_36[] = {{"GLIBC", "2.36", kNamed_ABI_DT_RELR},
                                           {"GLIBCXX", "3.4.30", {}},
                                           {"CXXABI", "1.3.13", kNamed_FLOAT128_TM_1},
                                           {"GCC", "12.0.0", {}},
                                           {"LIBATOMIC", "1.2", {}},
                                           {"ZLIB", "1.2.9", {}}};
constexpr VersionCeiling kX86_64_2_37[] = {{"GLIBC", "2.36", kNamed_ABI_DT_RELR},
                                           {"GLIBCXX", "3.4.30", {}},
                                           {"CXXABI", "1.3.13", kNamed_FLOAT128_TM_1},
                                           {"GCC", "12.0.0", {}},
                                           {"LIBATOMIC", "1.2", {}},
                                           {"ZLIB", "1.2.12", {}}};
constexpr VersionCeiling kX86_64_2_38[] = {{"GLIBC", "2.38", kNamed_ABI_DT_RELR},
                                           {"GLIBCXX", "3.4.30", {}},
                                           {"CXXABI", "1.3.13", kNamed_FLOAT128_TM_1},
                                           {"GCC", "12.0.0", {}},
                                           {"LIBATOMIC", "1.2", {}},
                                           {"ZLIB", "1.2.12", {}}};
constexpr VersionCeiling kX86_64_2_39[] = {{"GLIBC", "2.39", kNamed_ABI_DT_RELR},
                                           {"GLIBCXX", "3.4.33", {}},
                                           {"CXXABI", "1.3.15", kNamed_FLOAT128_TM_1},
                                           {"GCC", "14.0.0", {}},
                                           {"LIBATOMIC", "1.2", {}},
                                           {"ZLIB", "1.2.12", {}}};
constexpr VersionCeiling kX86_64_2_40[] = {{"GLIBC", "2.40", kNamed_ABI_DT_RELR},
                                           {"GLIBCXX", "3.4.33", {}},
                                           {"CXXABI", "1.3.15", kNamed_FLOAT128_TM_1},
                                           {"GCC", "14.0.0", {}},
                                           {"LIBATOMIC", "1.2", {}},
                                           {"ZLIB", "1.2.12", {}}};
constexpr VersionCeiling kX86_64_2_41[] = {{"GLIBC", "2.41", kNamed_ABI_DT_RELR},
                                           {"GLIBCXX", "3.4.33", {}},
                                           {"CXXABI", "1.3.15", kNamed_FLOAT128_TM_1},
                                           {"GCC", "14.0.0", {}},
                                           {"LIBATOMIC", "1.2", {}},
                                           {"ZLIB", "1.2.12", {}}};
constexpr VersionCeiling kAarch64_2_17[] = {
    {"GLIBC", "2.18", {}}, {"GLIBCXX", "3.4.19", {}}, {"CXXABI", "1.3.7", kNamed_TM_1},
    {"GCC", "4.7.0", {}},  {"LIBATOMIC", "1.0", {}},  {"ZLIB", "1.2.5.2", {}}};
constexpr VersionCeiling kAarch64_2_24[] = {
    {"GLIBC", "2.24", {}}, {"GLIBCXX", "3.4.22", {}}, {"CXXABI", "1.3.10", kNamed_TM_1},
    {"GCC", "4.7.0", {}},  {"LIBATOMIC", "1.2", {}},  {"ZLIB", "1.2.5.2", {}}};
constexpr VersionCeiling kAarch64_2_26[] = {
    {"GLIBC", "2.26", {}}, {"GLIBCXX", "3.4.24", {}}, {"CXXABI", "1.3.11", kNamed_TM_1},
    {"GCC", "7.0.0", {}},  {"LIBATOMIC", "1.2", {}},  {"ZLIB", "1.2.5.2", {}}};
constexpr VersionCeiling kAarch64_2_27[] = {
    {"GLIBC", "2.27", {}}, {"GLIBCXX", "3.4.24", {}}, {"CXXABI", "1.3.11", kNamed_TM_1},
    {"GCC", "7.0.0", {}},  {"LIBATOMIC", "1.2", {}},  {"ZLIB", "1.2.9", {}}};
constexpr VersionCeiling kAarch64_2_28[] = {
    {"GLIBC", "2.28", {}}, {"GLIBCXX", "3.4.24", {}}, {"CXXABI", "1.3.11", kNamed_TM_1},
    {"GCC", "7.0.0", {}},  {"LIBATOMIC", "1.2", {}},  {"ZLIB", "1.2.9", {}}};
constexpr VersionCeiling kAarch64_2_31[] = {
    {"GLIBC", "2.31", {}}, {"GLIBCXX", "3.4.28", {}}, {"CXXABI", "1.3.12", kNamed_TM_1},
    {"GCC", "7.0.0", {}},  {"LIBATOMIC", "1.2", {}},  {"ZLIB", "1.2.9", {}}};
constexpr VersionCeiling kAarch64_2_34[] = {
    {"GLIBC", "2.34", {}}, {"GLIBCXX", "3.4.29", {}}, {"CXXABI", "1.3.13", kNamed_TM_1},
    {"GCC", "11.0", {}},   {"LIBATOMIC", "1.2", {}},  {"ZLIB", "1.2.9", {}}};
constexpr VersionCeiling kAarch64_2_35[] = {
    {"GLIBC", "2.35", {}}, {"GLIBCXX", "3.4.30", {}}, {"CXXABI", "1.3.13", kNamed_TM_1},
    {"GCC", "11.0", {}},   {"LIBATOMIC", "1.2", {}},  {"ZLIB", "1.2.9", {}}};
constexpr VersionCeiling kAarch64_2_36[] = {{"GLIBC", "2.36", kNamed_ABI_DT_RELR},
                                            {"GLIBCXX", "3.4.30", {}},
                                            {"CXXABI", "1.3.13", kNamed_TM_1},
                                            {"GCC", "11.0", {}},
                                            {"LIBATOMIC", "1.2", {}},
                                            {"ZLIB", "1.2.9", {}}};
constexpr VersionCeiling kAarch64_2_37[] = {{"GLIBC", "2.36", kNamed_ABI_DT_RELR},
                                            {"GLIBCXX", "3.4.30", {}},
                                            {"CXXABI", "1.3.13", kNamed_TM_1},
                                            {"GCC", "11.0", {}},
                                            {"LIBATOMIC", "1.2", {}},
                                            {"ZLIB", "1.2.12", {}}};
constexpr VersionCeiling kAarch64_2_38[] = {{"GLIBC", "2.38", kNamed_ABI_DT_RELR},
                                            {"GLIBCXX", "3.4.30", {}},
                                            {"CXXABI", "1.3.13", kNamed_TM_1},
                                            {"GCC", "11.0", {}},
                                            {"LIBATOMIC", "1.2", {}},
                                            {"ZLIB", "1.2.12", {}}};
constexpr VersionCeiling kAarch64_2_39[] = {{"GLIBC", "2.39", kNamed_ABI_DT_RELR},
                                            {"GLIBCXX", "3.4.33", {}},
                                            {"CXXABI", "1.3.15", kNamed_TM_1},
                                            {"GCC", "14.0.0", {}},
                                            {"LIBATOMIC", "1.2", {}},
                                            {"ZLIB", "1.2.12", {}}};
constexpr VersionCeiling kAarch64_2_40[] = {{"GLIBC", "2.40", kNamed_ABI_DT_RELR},
                                            {"GLIBCXX", "3.4.33", {}},
                                            {"CXXABI", "1.3.15", kNamed_TM_1},
                                            {"GCC", "14.0.0", {}},
                                            {"LIBATOMIC", "1.2", {}},
                                            {"ZLIB", "1.2.12", {}}};
constexpr VersionCeiling kAarch64_2_41[] = {{"GLIBC", "2.41", kNamed_ABI_DT_RELR},
                                            {"GLIBCXX", "3.4.33", {}},
                                            {"CXXABI", "1.3.15", kNamed_TM_1},
                                            {"GCC", "14.0.0", {}},
                                            {"LIBATOMIC", "1.2", {}},
                                            {"ZLIB", "1.2.12", {}}};

constexpr std::string_view kLibraries2_17[] = {
    "libatomic.so.1",      "libgcc_s.so.1",    "libstdc++.so.6",
    "libm.so.6",           "libanl.so.1",      "libdl.so.2",
    "librt.so.1",          "libc.so.6",        "libnsl.so.1",
    "libutil.so.1",        "libpthread.so.0",  "libX11.so.6",
    "libXext.so.6",        "libXrender.so.1",  "libICE.so.6",
    "libSM.so.6",          "libGL.so.1",       "libgobject-2.0.so.0",
    "libgthread-2.0.so.0", "libglib-2.0.so.0", "libresolv.so.2",
    "libexpat.so.1",       "libz.so.1"};
constexpr std::string_view kLibraries2_24[] = {
    "libatomic.so.1",   "libgcc_s.so.1",  "libstdc++.so.6",      "libm.so.6",
    "libmvec.so.1",     "libanl.so.1",    "libdl.so.2",          "librt.so.1",
    "libc.so.6",        "libnsl.so.1",    "libutil.so.1",        "libpthread.so.0",
    "libX11.so.6",      "libXext.so.6",   "libXrender.so.1",     "libICE.so.6",
    "libSM.so.6",       "libGL.so.1",     "libgobject-2.0.so.0", "libgthread-2.0.so.0",
    "libglib-2.0.so.0", "libresolv.so.2", "libexpat.so.1",       "libz.so.1"};
constexpr std::string_view kC_2_17[] = {"__cxa_thread_atexit_impl",
                                        "__issignaling",
                                        "__issignalingf",
                                        "__issignalingl",
                                        "pthread_getattr_default_np",
                                        "pthread_setattr_default_np"};
constexpr std::string_view kM_2_17[] = {"__issignaling", "__issignalingf", "__issignalingl"};
constexpr std::string_view kPthread_2_17[] = {"pthread_getattr_default_np",
                                              "pthread_setattr_default_np"};
constexpr std::string_view kZ_2_17[] = {"_dist_code",
                                        "_length_code",
                                        "_tr_align",
                                        "_tr_flush_block",
                                        "_tr_init",
                                        "_tr_stored_block",
                                        "_tr_tally",
                                        "adler32_default",
                                        "bi_windup",
                                        "crc32_acle",
                                        "crc32_combine_gen",
                                        "crc32_combine_gen64",
                                        "crc32_combine_op",
                                        "crc32_le_vgfm_16",
                                        "crc32_neon",
                                        "crc32_vpmsum",
                                        "crc32_z_default",
                                        "crc_fold_512to32",
                                        "crc_fold_copy",
                                        "crc_fold_init",
                                        "deflate_copyright",
                                        "deflate_medium",
                                        "fill_window",
                                        "flush_pending",
                                        "gzflags",
                                        "inflate_copyright",
                                        "inflate_fast",
                                        "inflate_table",
                                        "longest_match",
                                        "slide_hash_sse",
                                        "sse2_slide_hash",
                                        "static_ltree",
                                        "uncompress2",
                                        "x86_check_features",
                                        "x86_cpu_has_pclmul",
                                        "x86_cpu_has_sse2",
                                        "x86_cpu_has_sse42",
                                        "z_errmsg",
                                        "z_vstring",
                                        "zcalloc",
                                        "zcfree"};
constexpr std::string_view kZ_2_34[] = {"_dist_code",
                                        "_length_code",
                                        "_tr_align",
                                        "_tr_flush_block",
                                        "_tr_init",
                                        "_tr_stored_block",
                                        "_tr_tally",
                                        "adler32_default",
                                        "bi_windup",
                                        "crc32_acle",
                                        "crc32_combine_gen",
                                        "crc32_combine_gen64",
                                        "crc32_combine_op",
                                        "crc32_le_vgfm_16",
                                        "crc32_neon",
                                        "crc32_vpmsum",
                                        "crc32_z_default",
                                        "crc_fold_512to32",
                                        "crc_fold_copy",
                                        "crc_fold_init",
                                        "deflate_copyright",
                                        "deflate_medium",
                                        "fill_window",
                                        "flush_pending",
                                        "gzflags",
                                        "inflate_copyright",
                                        "inflate_fast",
                                        "inflate_table",
                                        "longest_match",
                                        "slide_hash_sse",
                                        "sse2_slide_hash",
                                        "static_ltree",
                                        "x86_check_features",
                                        "x86_cpu_has_pclmul",
                                        "x86_cpu_has_sse2",
                                        "x86_cpu_has_sse42",
                                        "z_errmsg",
                                        "z_vstring",
                                        "zcalloc",
                                        "zcfree"};
constexpr std::string_view kZ_2_36[] = {"_dist_code",
                                        "_length_code",
                                        "_tr_align",
                                        "_tr_flush_block",
                                        "_tr_init",
                                        "_tr_stored_block",
                                        "_tr_tally",
                                        "adler32_default",
                                        "crc32_acle",
                                        "crc32_combine_gen",
                                        "crc32_combine_gen64",
                                        "crc32_combine_op",
                                        "crc32_le_vgfm_16",
                                        "crc32_neon",
                                        "crc32_vpmsum",
                                        "crc32_z_default",
                                        "deflate_copyright",
                                        "gzflags",
                                        "inflate_copyright",
                                        "inflate_fast",
                                        "inflate_table",
                                        "sse2_slide_hash",
                                        "z_errmsg",
                                        "z_vstring",
                                        "zcalloc",
                                        "zcfree"};
constexpr std::string_view kZ_2_37[] = {
    "_dist_code",        "_length_code", "_tr_align",       "_tr_flush_block",   "_tr_init",
    "_tr_stored_block",  "_tr_tally",    "adler32_default", "crc32_acle",        "crc32_le_vgfm_16",
    "crc32_neon",        "crc32_vpmsum", "crc32_z_default", "deflate_copyright", "gzflags",
    "inflate_copyright", "inflate_fast", "inflate_table",   "sse2_slide_hash",   "z_errmsg",
    "z_vstring",         "zcalloc",      "zcfree"};

constexpr SymbolBlacklist kBlacklist2_17[] = {{"libc.so.6", kC_2_17},
                                              {"libm.so.6", kM_2_17},
                                              {"libpthread.so.0", kPthread_2_17},
                                              {"libz.so.1", kZ_2_17}};
constexpr SymbolBlacklist kBlacklist2_24[] = {{"libz.so.1", kZ_2_17}};
constexpr SymbolBlacklist kBlacklist2_34[] = {{"libz.so.1", kZ_2_34}};
constexpr SymbolBlacklist kBlacklist2_36[] = {{"libz.so.1", kZ_2_36}};
constexpr SymbolBlacklist kBlacklist2_37[] = {{"libz.so.1", kZ_2_37}};

constexpr ManylinuxPolicy kPolicies[] = {
    {"manylinux_2_17", "manylinux2014", 17, "x86_64", kX86_64_2_17, kLibraries2_17, kBlacklist2_17},
    {"manylinux_2_24", "", 24, "x86_64", kX86_64_2_24, kLibraries2_24, kBlacklist2_24},
    {"manylinux_2_26", "", 26, "x86_64", kX86_64_2_26, kLibraries2_24, kBlacklist2_24},
    {"manylinux_2_27", "", 27, "x86_64", kX86_64_2_27, kLibraries2_24, kBlacklist2_24},
    {"manylinux_2_28", "", 28, "x86_64", kX86_64_2_28, kLibraries2_24, kBlacklist2_24},
    {"manylinux_2_31", "", 31, "x86_64", kX86_64_2_31, kLibraries2_24, kBlacklist2_24},
    {"manylinux_2_34", "", 34, "x86_64", kX86_64_2_34, kLibraries2_24, kBlacklist2_34},
    {"manylinux_2_35", "", 35, "x86_64", kX86_64_2_35, kLibraries2_24, kBlacklist2_34},
    {"manylinux_2_36", "", 36, "x86_64", kX86_64_2_36, kLibraries2_24, kBlacklist2_36},
    {"manylinux_2_37", "", 37, "x86_64", kX86_64_2_37, kLibraries2_24, kBlacklist2_37},
    {"manylinux_2_38", "", 38, "x86_64", kX86_64_2_38, kLibraries2_24, kBlacklist2_37},
    {"manylinux_2_39", "", 39, "x86_64", kX86_64_2_39, kLibraries2_24, kBlacklist2_37},
    {"manylinux_2_40", "", 40, "x86_64", kX86_64_2_40, kLibraries2_24, kBlacklist2_37},
    {"manylinux_2_41", "", 41, "x86_64", kX86_64_2_41, kLibraries2_24, kBlacklist2_37},
    {"manylinux_2_17", "manylinux2014", 17, "aarch64", kAarch64_2_17, kLibraries2_17,
     kBlacklist2_17},
    {"manylinux_2_24", "", 24, "aarch64", kAarch64_2_24, kLibraries2_24, kBlacklist2_24},
    {"manylinux_2_26", "", 26, "aarch64", kAarch64_2_26, kLibraries2_24, kBlacklist2_24},
    {"manylinux_2_27", "", 27, "aarch64", kAarch64_2_27, kLibraries2_24, kBlacklist2_24},
    {"manylinux_2_28", "", 28, "aarch64", kAarch64_2_28, kLibraries2_24, kBlacklist2_24},
    {"manylinux_2_31", "", 31, "aarch64", kAarch64_2_31, kLibraries2_24, kBlacklist2_24},
    {"manylinux_2_34", "", 34, "aarch64", kAarch64_2_34, kLibraries2_24, kBlacklist2_34},
    {"manylinux_2_35", "", 35, "aarch64", kAarch64_2_35, kLibraries2_24, kBlacklist2_34},
    {"manylinux_2_36", "", 36, "aarch64", kAarch64_2_36, kLibraries2_24, kBlacklist2_36},
    {"manylinux_2_37", "", 37, "aarch64", kAarch64_2_37, kLibraries2_24, kBlacklist2_37},
    {"manylinux_2_38", "", 38, "aarch64", kAarch64_2_38, kLibraries2_24, kBlacklist2_37},
    {"manylinux_2_39", "", 39, "aarch64", kAarch64_2_39, kLibraries2_24, kBlacklist2_37},
    {"manylinux_2_40", "", 40, "aarch64", kAarch64_2_40, kLibraries2_24, kBlacklist2_37},
    {"manylinux_2_41", "", 41, "aarch64", kAarch64_2_41, kLibraries2_24, kBlacklist2_37},
};

// ---------------------------------------------------------------------------------------------
// Libraries other wheels (or the driver) install; docs/manylinux.md says why each is here.

constexpr ProvidedLibrary kTorchCuda[] = {
    {"libtorch*.so", "torch"},
    {"libc10*.so", "torch"},
    {"libshm.so", "torch"},
    {"libcudart.so.*", "the CUDA runtime wheel (nvidia-cuda-runtime)"},
    {"libcublas*.so.*", "the cuBLAS wheel (nvidia-cublas)"},
    {"libcudnn*.so.*", "the cuDNN wheel (nvidia-cudnn)"},
    {"libnccl.so.*", "the NCCL wheel (nvidia-nccl)"},
    {"libnvrtc*.so.*", "the NVRTC wheel (nvidia-cuda-nvrtc)"},
    {"libnvJitLink.so.*", "the nvJitLink wheel (nvidia-nvjitlink)"},
    {"libcusparse*.so.*", "the cuSPARSE wheels (nvidia-cusparse, nvidia-cusparselt)"},
    {"libcufft*.so.*", "the cuFFT wheel (nvidia-cufft)"},
    {"libcurand*.so.*", "the cuRAND wheel (nvidia-curand)"},
    {"libcusolver*.so.*", "the cuSOLVER wheel (nvidia-cusolver)"},
    {"libcupti*.so.*", "the CUPTI wheel (nvidia-cuda-cupti)"},
    {"libnvToolsExt*.so.*", "the NVTX wheel (nvidia-nvtx)"},
    {"libcufile*.so.*", "the cuFile wheel (nvidia-cufile)"},
    {"libnvshmem*.so.*", "the NVSHMEM wheel (nvidia-nvshmem)"},
    {"libcuda.so.1", "the NVIDIA driver"},
};

std::string_view file_name_of(std::string_view path) {
  const std::size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

bool contains(std::span<const std::string_view> list, std::string_view item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

// A binary the assessment judges: readable, and loaded by the dynamic loader.
bool judged(const WheelBinary& b) {
  return b.elf && (b.elf->type == ElfType::shared || b.elf->type == ElfType::executable);
}

// One requirement that rules out the policies below some index, with what to say about it.
struct Floor {
  std::size_t index = 0;  // lowest policy (index into the arch's list) that allows it
  std::string what;
};

}  // namespace

// ---------------------------------------------------------------------------------------------
// ManylinuxPolicy

std::string ManylinuxPolicy::tag() const {
  return std::string(name) + "_" + std::string(arch);
}

std::vector<std::string> ManylinuxPolicy::platform_tags() const {
  std::vector<std::string> tags{tag()};
  if (!alias.empty()) tags.push_back(std::string(alias) + "_" + std::string(arch));
  return tags;
}

bool ManylinuxPolicy::allows_version(std::string_view version) const {
  const SymbolVersion v = SymbolVersion::parse(version);
  for (const auto& ceiling : ceilings) {
    if (ceiling.prefix != v.prefix) continue;
    if (contains(ceiling.named, v.suffix)) return true;
    if (!v.numbers || ceiling.highest.empty()) return false;
    const auto highest = SymbolVersion::parse("X_" + std::string(ceiling.highest)).numbers;
    return highest && std::is_lteq(compare_dotted(*v.numbers, *highest));
  }
  return true;
}

bool ManylinuxPolicy::allows_library(std::string_view library) const {
  return contains(libraries, library);
}

std::span<const ManylinuxPolicy> manylinux_policies() {
  return kPolicies;
}

std::vector<const ManylinuxPolicy*> manylinux_policies_for(std::string_view arch) {
  std::vector<const ManylinuxPolicy*> out;
  for (const auto& policy : kPolicies) {
    if (policy.arch == arch) out.push_back(&policy);
  }
  std::sort(out.begin(), out.end(), [](const ManylinuxPolicy* a, const ManylinuxPolicy* b) {
    return a->glibc_minor < b->glibc_minor;
  });
  return out;
}

bool is_dynamic_loader(std::string_view library) {
  return library.starts_with("ld-linux") || library == "ld64.so.1" || library == "ld64.so.2";
}

// ---------------------------------------------------------------------------------------------
// Provided libraries

std::span<const ProvidedLibrary> torch_cuda_libraries() {
  return kTorchCuda;
}

bool glob_match(std::string_view pattern, std::string_view text) {
  // Iterative matching with one backtrack point: linear in practice, never exponential.
  std::size_t p = 0;
  std::size_t t = 0;
  std::size_t star = std::string_view::npos;
  std::size_t star_text = 0;
  while (t < text.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == text[t])) {
      ++p;
      ++t;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      star_text = t;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      t = ++star_text;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

bool ProvidedLibraries::provides(std::string_view library) const {
  for (const auto& name : names) {
    if (name == library) return true;
  }
  for (const auto& pattern : patterns) {
    if (glob_match(pattern, library)) return true;
  }
  return false;
}

ProvidedLibraries wheel_libraries(std::span<const WheelBinary> binaries) {
  ProvidedLibraries out;
  std::set<std::string> seen;
  const auto add = [&](std::string_view name) {
    if (!name.empty() && seen.emplace(name).second) out.names.emplace_back(name);
  };
  for (const auto& b : binaries) {
    if (!b.elf) continue;
    if (b.elf->soname) add(*b.elf->soname);
    add(file_name_of(b.path));
  }
  return out;
}

ProvidedLibraries torch_extension_provided(std::span<const WheelBinary> binaries) {
  ProvidedLibraries out = wheel_libraries(binaries);
  for (const auto& lib : kTorchCuda) out.patterns.emplace_back(lib.pattern);
  return out;
}

// ---------------------------------------------------------------------------------------------
// Assessment

std::vector<std::string> ManylinuxAssessment::platform_tags() const {
  if (outcome != ManylinuxOutcome::tagged || policy == nullptr) return {};
  return policy->platform_tags();
}

std::string ManylinuxAssessment::summary() const {
  switch (outcome) {
    case ManylinuxOutcome::no_binaries:
      return "no ELF binaries";
    case ManylinuxOutcome::tagged: {
      std::string out = policy->tag();
      out += glibc_floor.empty() ? " (needs no GLIBC version" : " (glibc floor " + glibc_floor;
      if (!deciding.empty()) out += "; set by " + deciding;
      return out + ")";
    }
    case ManylinuxOutcome::refused:
      break;
  }
  std::vector<std::string> reasons;
  for (const auto& u : unsatisfied) {
    std::string who;
    for (const auto& path : u.needed_by) who += (who.empty() ? "" : ", ") + path;
    reasons.push_back(who + " need" + (u.needed_by.size() == 1 ? "s " : " ") + u.library +
                      ", which neither the wheel, torch, CUDA nor any manylinux policy provides");
  }
  for (const auto& v : too_new) {
    reasons.push_back(v.version + " (" + v.library + ", needed by " + v.needed_by +
                      ") is allowed by no manylinux policy for " + arch);
  }
  reasons.insert(reasons.end(), problems.begin(), problems.end());
  std::string out = "not manylinux: ";
  for (std::size_t i = 0; i < reasons.size(); ++i) out += (i == 0 ? "" : "; ") + reasons[i];
  return out;
}

ManylinuxAssessment assess_manylinux(std::span<const WheelBinary> binaries,
                                     const ProvidedLibraries& provided) {
  ManylinuxAssessment out;

  // 1. Which binaries count, and their architecture.
  std::vector<const WheelBinary*> judged_binaries;
  std::map<std::string, std::vector<std::string>> arches;  // arch -> binaries
  std::vector<std::string> arch_order;
  for (const auto& b : binaries) {
    if (!b.elf) {
      out.problems.push_back("cannot read " + b.path + ": " + b.problem);
      continue;
    }
    if (!judged(b)) continue;
    judged_binaries.push_back(&b);
    const std::string arch = b.elf->arch();
    auto& paths = arches[arch];
    if (paths.empty()) arch_order.push_back(arch);
    paths.push_back(b.path);
  }
  if (judged_binaries.empty() && out.problems.empty()) return out;
  out.outcome = ManylinuxOutcome::refused;
  if (arch_order.size() > 1) {
    std::string list;
    for (const auto& arch : arch_order) {
      list += (list.empty() ? "" : ", ") + arch + " (" + arches[arch].front() + ")";
    }
    out.problems.push_back("binaries of several architectures: " + list);
    return out;
  }
  if (arch_order.empty()) return out;
  out.arch = arch_order.front();
  const auto policies = manylinux_policies_for(out.arch);
  if (policies.empty()) {
    out.problems.push_back("wheelforge knows no manylinux policy for " + out.arch);
    return out;
  }

  // 2. Every requirement as the lowest policy that allows it; policies only grow, so the
  // answer is the highest of these.
  std::vector<Floor> floors;
  std::vector<std::uint32_t> glibc;
  const auto lowest_allowing = [&](auto&& allows) -> std::optional<std::size_t> {
    for (std::size_t i = 0; i < policies.size(); ++i) {
      if (allows(*policies[i])) return i;
    }
    return std::nullopt;
  };
  for (const WheelBinary* b : judged_binaries) {
    const ElfInfo& elf = *b->elf;
    for (const auto& library : elf.needed) {
      if (is_dynamic_loader(library) || provided.provides(library)) continue;
      const auto at =
          lowest_allowing([&](const ManylinuxPolicy& p) { return p.allows_library(library); });
      if (at) {
        floors.push_back({*at, library + " needed by " + b->path});
        continue;
      }
      auto it = std::find_if(out.unsatisfied.begin(), out.unsatisfied.end(),
                             [&](const UnsatisfiedLibrary& u) { return u.library == library; });
      if (it == out.unsatisfied.end()) {
        out.unsatisfied.push_back({library, {}});
        it = std::prev(out.unsatisfied.end());
      }
      if (std::find(it->needed_by.begin(), it->needed_by.end(), b->path) == it->needed_by.end()) {
        it->needed_by.push_back(b->path);
      }
    }
    for (const auto& need : elf.version_needs) {
      for (const auto& version : need.versions) {
        const SymbolVersion v = SymbolVersion::parse(version);
        if (v.prefix == "GLIBC" && v.numbers && std::is_gt(compare_dotted(*v.numbers, glibc))) {
          glibc = *v.numbers;
        }
        const auto at =
            lowest_allowing([&](const ManylinuxPolicy& p) { return p.allows_version(version); });
        if (at) {
          floors.push_back({*at, version + " (" + need.library + ") needed by " + b->path});
        } else if (std::none_of(
                       out.too_new.begin(), out.too_new.end(),
                       [&](const VersionRequirement& r) { return r.version == version; })) {
          out.too_new.push_back({version, need.library, b->path});
        }
      }
    }
    std::set<std::string_view> undefined;
    for (const auto& s : elf.symbols) {
      if (!s.defined) undefined.insert(s.name);
    }
    // A blacklisted symbol rules out the policies that list it for a library the binary needs.
    std::optional<std::size_t> blocked_below;
    std::string blocked_what;
    for (std::size_t i = 0; i < policies.size(); ++i) {
      for (const auto& entry : policies[i]->blacklist) {
        if (std::find(elf.needed.begin(), elf.needed.end(), entry.library) == elf.needed.end()) {
          continue;
        }
        for (const auto& symbol : entry.symbols) {
          if (undefined.count(symbol) != 0) {
            blocked_below = i + 1;
            blocked_what =
                std::string(symbol) + " (" + std::string(entry.library) + ") used by " + b->path;
          }
        }
      }
    }
    if (blocked_below) {
      if (*blocked_below < policies.size()) {
        floors.push_back({*blocked_below, blocked_what});
      } else {
        out.problems.push_back(blocked_what + " is forbidden by every manylinux policy");
      }
    }
  }
  out.glibc_floor = dotted_str(glibc);

  if (!out.unsatisfied.empty() || !out.too_new.empty() || !out.problems.empty()) return out;
  std::size_t index = 0;
  for (const auto& floor : floors) {
    if (floor.index > index) {
      index = floor.index;
      out.deciding = floor.what;
    }
  }
  out.outcome = ManylinuxOutcome::tagged;
  out.policy = policies[index];
  return out;
}

std::optional<std::string> glibc_of_platform_tag(std::string_view tag) {
  // Legacy aliases (PEP 600): manylinux1 is 2_5, manylinux2010 2_12, manylinux2014 2_17.
  constexpr std::pair<std::string_view, std::string_view> kLegacy[] = {
      {"manylinux1_", "2.5"}, {"manylinux2010_", "2.12"}, {"manylinux2014_", "2.17"}};
  for (const auto& [prefix, glibc] : kLegacy) {
    if (tag.starts_with(prefix) && tag.size() > prefix.size()) return std::string(glibc);
  }
  // manylinux_X_Y_ARCH
  constexpr std::string_view kPerennial = "manylinux_";
  if (!tag.starts_with(kPerennial)) return std::nullopt;
  std::string_view rest = tag.substr(kPerennial.size());
  std::uint32_t parts[2] = {0, 0};
  for (auto& part : parts) {
    std::size_t n = 0;
    while (n < rest.size() && rest[n] >= '0' && rest[n] <= '9') ++n;
    if (n == 0 || n > 4 || n >= rest.size() || rest[n] != '_') return std::nullopt;
    for (std::size_t i = 0; i < n; ++i) {
      part = part * 10 + static_cast<std::uint32_t>(rest[i] - '0');
    }
    rest.remove_prefix(n + 1);
  }
  if (rest.empty()) return std::nullopt;
  return std::to_string(parts[0]) + "." + std::to_string(parts[1]);
}

std::optional<std::string> glibc_of_platform_tags(std::span<const std::string> tags) {
  std::optional<std::string> lowest;
  std::vector<std::uint32_t> lowest_numbers;
  for (const auto& tag : tags) {
    auto glibc = glibc_of_platform_tag(tag);
    if (!glibc) continue;
    const auto numbers =
        SymbolVersion::parse("GLIBC_" + *glibc).numbers.value_or(std::vector<std::uint32_t>{});
    if (!lowest || std::is_lt(compare_dotted(numbers, lowest_numbers))) {
      lowest = std::move(glibc);
      lowest_numbers = numbers;
    }
  }
  return lowest;
}

}  // namespace wf::core
