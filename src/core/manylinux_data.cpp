// The data the manylinux assessment judges by (manylinux.cpp): the policies and the libraries
// other wheels provide.

#include "wheelforge/core/manylinux.hpp"

namespace wf::core {
namespace {

// ---------------------------------------------------------------------------------------------
// Policy data: the tables of docs/manylinux.md, "Symbol-version ceilings", "Libraries a wheel
// may link from the system" and "Forbidden symbols", as ceilings per prefix; that page names
// their source and why a ceiling decides what the source's lists decide.

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

}  // namespace

std::span<const ManylinuxPolicy> manylinux_policies() {
  return kPolicies;
}

std::span<const ProvidedLibrary> torch_cuda_libraries() {
  return kTorchCuda;
}

}  // namespace wf::core
