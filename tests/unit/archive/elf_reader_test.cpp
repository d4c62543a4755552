// The ELF reader against the binutils: shared objects built at test time with gcc (and clang
// with lld for other architectures and byte orders, nvcc for a CUDA extension), read by our
// reader and by readelf/objdump, compared field by field. Then malformed objects, and objects
// inside wheels (stored and deflated members).

#include <elf.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "archive/member_source.hpp"
#include "archive/shell.hpp"
#include "archive/zip_builder.hpp"
#include "archive/zip_layout.hpp"
#include "wheelforge/archive/elf.hpp"
#include "wheelforge/archive/retag.hpp"
#include "wheelforge/core/manylinux.hpp"

namespace wf::core {
void PrintTo(const VersionNeed& need, std::ostream* out) {
  *out << need.library << ": " << ::testing::PrintToString(need.versions);
}
}  // namespace wf::core

namespace wf::archive {
namespace {

namespace fs = std::filesystem;
using fixtures::build_zip;
using fixtures::Compression;
using fixtures::have_tool;
using fixtures::quote;
using fixtures::shell;
using fixtures::ZipEntry;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A C++ library using std::string (GLIBCXX_3.4.21: the C++11 string ABI), memcpy (GLIBC_2.14 on
// x86_64) and pthread_create (GLIBC_2.34, when it moved into libc).
constexpr std::string_view kCxxSource = R"(#include <cstring>
#include <pthread.h>
#include <string>
std::string greet(const std::string& who) { return "hello " + who; }
extern "C" void copy_bytes(char* d, const char* s, std::size_t n) { std::memcpy(d, s, n); }
extern "C" int spawn(void* (*f)(void*)) {
  pthread_t t;
  const int r = pthread_create(&t, nullptr, f, nullptr);
  if (r == 0) pthread_join(t, nullptr);
  return r;
}
)";

// 4 MiB of read-only data between the tables and the dynamic section, as a CUDA fat binary
// lies in an extension module.
constexpr std::string_view kBlobSource = R"(extern "C" const char wf_blob[4 << 20] = {1, 2, 3};
)";

std::string file_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_bytes(const fs::path& path, std::string_view bytes) {
  fixtures::write_file(path, bytes);
}

// ---------------------------------------------------------------------------------------------
// What readelf and objdump say, in the shape of core::ElfInfo.

std::string bracketed(const std::string& line) {
  const auto open = line.find('[');
  const auto close = line.rfind(']');
  if (open == std::string::npos || close == std::string::npos || close < open) return {};
  return line.substr(open + 1, close - open - 1);
}

std::vector<std::string> split_colons(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string part;
  while (std::getline(in, part, ':')) out.push_back(part);
  if (!s.empty() && s.back() == ':') out.emplace_back();
  return out;
}

std::string token_after(const std::string& line, const std::string& key) {
  const auto at = line.find(key);
  if (at == std::string::npos) return {};
  const auto start = at + key.size();
  const auto end = line.find(' ', start);
  return line.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

// One symbol as both sides can spell it: readelf writes `name@VERSION` for every imported
// versioned symbol, and `@@` or `@` (hidden) for exported ones.
std::string describe(const std::string& name, const std::string& version, bool hidden, bool defined,
                     const std::string& bind, const std::string& type, const std::string& vis) {
  std::string out = name;
  // The symbols a linker makes for the version definitions themselves (FOO_1.0 in FOO_1.0),
  // readelf shows without their version.
  if (!version.empty() && !(defined && name == version)) {
    out += (defined && !hidden ? "@@" : "@") + version;
  }
  return out + " " + (defined ? "DEF" : "UND") + " " + bind + " " + type + " " + vis;
}

std::vector<std::string> describe_symbols(const core::ElfInfo& info) {
  static const char* const kBind[] = {"LOCAL", "GLOBAL", "WEAK", "UNIQUE", "?"};
  static const char* const kType[] = {"NOTYPE", "OBJECT", "FUNC",  "SECTION", "FILE",
                                      "COMMON", "TLS",    "IFUNC", "?"};
  static const char* const kVis[] = {"DEFAULT", "INTERNAL", "HIDDEN", "PROTECTED"};
  std::vector<std::string> out;
  for (const auto& s : info.symbols) {
    out.push_back(describe(s.name, s.version, s.version_hidden, s.defined,
                           kBind[static_cast<int>(s.binding)], kType[static_cast<int>(s.type)],
                           kVis[static_cast<int>(s.visibility)]));
  }
  return out;
}

struct Reference {
  std::vector<std::string> needed;
  std::optional<std::string> soname;
  std::vector<std::string> rpath;
  std::vector<std::string> runpath;
  std::vector<core::VersionNeed> version_needs;
  std::vector<std::string> version_definitions;
  std::vector<std::string> symbols;
};

Reference readelf(const fs::path& object) {
  Reference ref;
  auto [status, dynamic] = shell("readelf -dW " + quote(object));
  EXPECT_EQ(status, 0) << dynamic;
  std::stringstream lines(dynamic);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.find("(NEEDED)") != std::string::npos) ref.needed.push_back(bracketed(line));
    if (line.find("(SONAME)") != std::string::npos) ref.soname = bracketed(line);
    if (line.find("(RPATH)") != std::string::npos) ref.rpath = split_colons(bracketed(line));
    if (line.find("(RUNPATH)") != std::string::npos) ref.runpath = split_colons(bracketed(line));
  }

  auto [vstatus, versions] = shell("readelf -VW " + quote(object));
  EXPECT_EQ(vstatus, 0) << versions;
  enum { other, needs, definitions } section = other;
  std::stringstream vlines(versions);
  while (std::getline(vlines, line)) {
    if (line.starts_with("Version needs section")) {
      section = needs;
    } else if (line.starts_with("Version definition section")) {
      section = definitions;
    } else if (line.starts_with("Version symbols section")) {
      section = other;
    } else if (section == needs && line.find("File: ") != std::string::npos) {
      ref.version_needs.push_back({token_after(line, "File: "), {}});
    } else if (section == needs && line.find("Name: ") != std::string::npos) {
      ref.version_needs.back().versions.push_back(token_after(line, "Name: "));
    } else if (section == definitions && line.find("Rev: ") != std::string::npos &&
               line.find("Flags: BASE") == std::string::npos) {
      ref.version_definitions.push_back(token_after(line, "Name: "));
    }
  }

  auto [sstatus, symbols] = shell("readelf --dyn-syms -W " + quote(object));
  EXPECT_EQ(sstatus, 0) << symbols;
  std::stringstream slines(symbols);
  bool table = false;
  while (std::getline(slines, line)) {
    if (line.find("Num:") != std::string::npos) {
      table = true;
      continue;
    }
    if (!table || line.empty()) continue;
    std::stringstream fields(line);
    std::vector<std::string> f;
    std::string field;
    while (fields >> field) f.push_back(field);
    if (f.size() < 7 || f[0] == "0:") continue;
    std::size_t at = 6;            // after Num, Value, Size, Type, Bind, Vis
    if (f[at].starts_with('[')) {  // an architecture note such as [VARIANT_PCS]
      while (at < f.size() && !f[at].ends_with(']')) ++at;
      ++at;
    }
    if (at + 1 >= f.size()) continue;
    const bool defined = f[at] != "UND";
    std::string name = f[at + 1];
    std::string version;
    bool hidden = false;
    if (const auto two = name.find("@@"); two != std::string::npos) {
      version = name.substr(two + 2);
      name.resize(two);
    } else if (const auto one = name.find('@'); one != std::string::npos) {
      version = name.substr(one + 1);
      name.resize(one);
      hidden = defined;
    }
    ref.symbols.push_back(describe(name, version, hidden, defined, f[4], f[3], f[5]));
  }
  return ref;
}

void expect_matches_readelf(const core::ElfInfo& info, const fs::path& object) {
  const Reference ref = readelf(object);
  EXPECT_TRUE(info.has_dynamic);
  EXPECT_EQ(info.needed, ref.needed) << object;
  EXPECT_EQ(info.soname, ref.soname) << object;
  EXPECT_EQ(info.rpath, ref.rpath) << object;
  EXPECT_EQ(info.runpath, ref.runpath) << object;
  EXPECT_EQ(info.version_needs, ref.version_needs) << object;
  EXPECT_EQ(info.version_definitions, ref.version_definitions) << object;
  EXPECT_EQ(describe_symbols(info), ref.symbols) << object;
  EXPECT_FALSE(ref.symbols.empty()) << object;
}

// The highest GLIBC_x.y in `objdump -T`.
std::string objdump_glibc_floor(const fs::path& object) {
  auto [status, out] = shell("objdump -T " + quote(object));
  EXPECT_EQ(status, 0) << out;
  std::vector<std::uint32_t> best;
  for (std::size_t at = out.find("GLIBC_"); at != std::string::npos;
       at = out.find("GLIBC_", at + 1)) {
    std::size_t end = at + 6;
    while (end < out.size() &&
           (std::isdigit(static_cast<unsigned char>(out[end])) != 0 || out[end] == '.')) {
      ++end;
    }
    const auto v = core::SymbolVersion::parse(out.substr(at, end - at));
    if (v.numbers && core::compare_dotted(*v.numbers, best) > 0) best = *v.numbers;
  }
  return core::dotted_str(best);
}

// ---------------------------------------------------------------------------------------------
// ELF64 little-endian field access, to damage gcc's objects in chosen places.

std::uint64_t get_le(const std::string& b, std::size_t at, std::size_t width) {
  std::uint64_t v = 0;
  for (std::size_t i = width; i-- > 0;) v = (v << 8U) | static_cast<unsigned char>(b[at + i]);
  return v;
}

void put_le(std::string& b, std::size_t at, std::size_t width, std::uint64_t v) {
  for (std::size_t i = 0; i < width; ++i, v >>= 8U) b[at + i] = static_cast<char>(v & 0xffU);
}

struct Phdr {
  std::size_t at;  // file offset of the header
  std::uint32_t type;
  std::uint64_t offset;
  std::uint64_t vaddr;
  std::uint64_t filesz;
};

std::vector<Phdr> program_headers(const std::string& elf) {
  std::vector<Phdr> out;
  const std::uint64_t phoff = get_le(elf, 32, 8);
  const std::uint64_t phnum = get_le(elf, 56, 2);
  for (std::uint64_t i = 0; i < phnum; ++i) {
    const std::size_t at = phoff + i * 56;
    out.push_back({at, static_cast<std::uint32_t>(get_le(elf, at, 4)), get_le(elf, at + 8, 8),
                   get_le(elf, at + 16, 8), get_le(elf, at + 32, 8)});
  }
  return out;
}

struct Dyn {
  std::size_t at;  // file offset of the entry
  std::int64_t tag;
  std::uint64_t value;
};

std::vector<Dyn> dynamic_entries(const std::string& elf) {
  std::vector<Dyn> out;
  for (const auto& p : program_headers(elf)) {
    if (p.type != PT_DYNAMIC) continue;
    for (std::size_t at = p.offset; at + 16 <= p.offset + p.filesz; at += 16) {
      const auto tag = static_cast<std::int64_t>(get_le(elf, at, 8));
      out.push_back({at, tag, get_le(elf, at + 8, 8)});
      if (tag == DT_NULL) break;
    }
  }
  return out;
}

Dyn find_dyn(const std::string& elf, std::int64_t tag) {
  for (const auto& d : dynamic_entries(elf)) {
    if (d.tag == tag) return d;
  }
  ADD_FAILURE() << "no dynamic tag " << tag;
  return {0, 0, 0};
}

std::size_t file_offset(const std::string& elf, std::uint64_t vaddr) {
  for (const auto& p : program_headers(elf)) {
    if (p.type == PT_LOAD && vaddr >= p.vaddr && vaddr < p.vaddr + p.filesz) {
      return p.offset + (vaddr - p.vaddr);
    }
  }
  ADD_FAILURE() << "address " << vaddr << " is not mapped";
  return 0;
}

// ---------------------------------------------------------------------------------------------

class ElfTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("wf-elf-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }

  // Compiles `source` (named `file`) with `command` (e.g. "g++ -shared -fPIC") into `output`.
  fs::path compile(const std::string& command, const std::string& file, std::string_view source,
                   const std::string& output, const std::string& extra = "") {
    write_bytes(dir_ / file, source);
    const auto [status, log] =
        shell("cd " + quote(dir_) + " && " + command + " " + file + " -o " + output + " " + extra);
    EXPECT_EQ(status, 0) << command << " " << file << ":\n" << log;
    return dir_ / output;
  }

  static bool have_binutils() {
    return have_tool("gcc") && have_tool("g++") && have_tool("readelf") && have_tool("objdump");
  }

  // The C++ library of kCxxSource, optionally with the 4 MiB blob.
  fs::path cxx_library(bool blob = false) {
    std::string source(kCxxSource);
    if (blob) source += kBlobSource;
    return compile("g++ -shared -fPIC -O1", blob ? "big.cpp" : "demo.cpp", source,
                   blob ? "libbig.so" : "libdemo.so");
  }

  static std::string host_arch() {
    auto [status, out] = shell("uname -m");
    return status == 0 ? out.substr(0, out.find('\n')) : "";
  }

  fs::path dir_;
};

#define REQUIRE_BINUTILS()                                       \
  if (!have_binutils())                                          \
  GTEST_SKIP() << "gcc, g++, readelf or objdump is not on PATH " \
                  "(Debian packages build-essential, binutils)"

TEST_F(ElfTest, CxxLibraryMatchesReadelf) {
  REQUIRE_BINUTILS();
  const fs::path so = cxx_library();
  auto info = read_elf_file(so);
  ASSERT_TRUE(info) << info.error().message;
  EXPECT_EQ(info->type, core::ElfType::shared);
  EXPECT_EQ(info->arch(), host_arch());
  expect_matches_readelf(*info, so);

  // What the test is about: libstdc++'s C++11 string, from libstdc++.so.6.
  const auto string_need =
      std::find_if(info->symbols.begin(), info->symbols.end(), [](const core::ElfSymbol& s) {
        return s.name.find("_ZNSt7__cxx1112basic_string") == 0 && !s.defined;
      });
  ASSERT_NE(string_need, info->symbols.end());
  EXPECT_EQ(string_need->version_library, "libstdc++.so.6");
  EXPECT_EQ(core::highest_needed_version(*info, "GLIBCXX"), "GLIBCXX_3.4.21");
  const auto greet =
      std::find_if(info->symbols.begin(), info->symbols.end(),
                   [](const core::ElfSymbol& s) { return s.name.find("_Z5greet") == 0; });
  ASSERT_NE(greet, info->symbols.end());
  EXPECT_TRUE(greet->defined);
  EXPECT_EQ(greet->binding, core::SymbolBinding::global);
  EXPECT_EQ(greet->type, core::SymbolType::func);
}

TEST_F(ElfTest, GlibcFloorMatchesObjdump) {
  REQUIRE_BINUTILS();
  const fs::path so = cxx_library();
  auto info = read_elf_file(so);
  ASSERT_TRUE(info) << info.error().message;
  const auto floor = core::glibc_floor(*info);
  ASSERT_TRUE(floor);
  EXPECT_EQ(core::dotted_str(*floor), objdump_glibc_floor(so));
  if (info->arch() == "x86_64") {
    // memcpy got a new version when it stopped allowing overlap.
    const auto memcpy = std::find_if(info->symbols.begin(), info->symbols.end(),
                                     [](const core::ElfSymbol& s) { return s.name == "memcpy"; });
    ASSERT_NE(memcpy, info->symbols.end());
    EXPECT_EQ(memcpy->version, "GLIBC_2.14");
    EXPECT_EQ(memcpy->version_library, "libc.so.6");
  }
}

TEST_F(ElfTest, StrippedObjectsReadTheSame) {
  REQUIRE_BINUTILS();
  const fs::path so = cxx_library();
  auto original = read_elf_file(so);
  ASSERT_TRUE(original) << original.error().message;

  const fs::path stripped = dir_ / "libstripped.so";
  auto [status, log] = shell("strip --strip-all -o " + quote(stripped) + " " + quote(so));
  ASSERT_EQ(status, 0) << log;
  auto info = read_elf_file(stripped);
  ASSERT_TRUE(info) << info.error().message;
  EXPECT_EQ(*info, *original);

  // No section header table at all: only the program headers lead to the tables.
  std::string bytes = file_bytes(stripped);
  ASSERT_EQ(bytes[EI_CLASS], ELFCLASS64);
  put_le(bytes, 40, 8, 0);  // e_shoff
  put_le(bytes, 58, 2, 0);  // e_shentsize
  put_le(bytes, 60, 2, 0);  // e_shnum
  put_le(bytes, 62, 2, 0);  // e_shstrndx
  const fs::path no_sections = dir_ / "libnosections.so";
  write_bytes(no_sections, bytes);
  std::tie(status, log) = shell("readelf -SW " + quote(no_sections));
  EXPECT_THAT(log, HasSubstr("There are no sections"));
  info = read_elf_file(no_sections);
  ASSERT_TRUE(info) << info.error().message;
  EXPECT_EQ(*info, *original);

  if (have_tool("llvm-objcopy")) {
    const fs::path sstripped = dir_ / "libsstripped.so";
    std::tie(status, log) =
        shell("llvm-objcopy --strip-sections " + quote(so) + " " + quote(sstripped));
    ASSERT_EQ(status, 0) << log;
    info = read_elf_file(sstripped);
    ASSERT_TRUE(info) << info.error().message;
    EXPECT_EQ(*info, *original);
  }
}

TEST_F(ElfTest, NeededSonameRunpathAndMadeUpLibraries) {
  REQUIRE_BINUTILS();
  write_bytes(dir_ / "foo.map",
              "FOO_1.0 { global: foo_old; local: *; };\nFOO_2.0 { global: foo_new; } FOO_1.0;\n");
  const fs::path foo = compile("gcc -shared -fPIC", "foo.c",
                               "int foo_old(void) { return 1; }\nint foo_new(void) { return 2; }\n",
                               "libfoo.so", "-Wl,-soname,libfoo.so.1 -Wl,--version-script,foo.map");
  const std::string bar_source =
      "int foo_old(void);\nint foo_new(void);\n"
      "int bar(void) { return foo_old() + foo_new(); }\n";
  const fs::path runpath =
      compile("gcc -shared -fPIC", "bar.c", bar_source, "libbar.so",
              "-L. -lfoo -Wl,--enable-new-dtags -Wl,-rpath,'$ORIGIN/../lib:/opt/x'");
  const fs::path rpath = compile("gcc -shared -fPIC", "bar.c", bar_source, "libbar-rpath.so",
                                 "-L. -lfoo -Wl,--disable-new-dtags -Wl,-rpath,'$ORIGIN'");

  auto foo_info = read_elf_file(foo);
  ASSERT_TRUE(foo_info) << foo_info.error().message;
  expect_matches_readelf(*foo_info, foo);
  EXPECT_EQ(foo_info->soname, "libfoo.so.1");
  EXPECT_THAT(foo_info->version_definitions, ElementsAre("FOO_1.0", "FOO_2.0"));

  auto bar_info = read_elf_file(runpath);
  ASSERT_TRUE(bar_info) << bar_info.error().message;
  expect_matches_readelf(*bar_info, runpath);
  EXPECT_THAT(bar_info->needed, ::testing::Contains("libfoo.so.1"));
  EXPECT_THAT(bar_info->runpath, ElementsAre("$ORIGIN/../lib", "/opt/x"));
  EXPECT_TRUE(bar_info->rpath.empty());
  const auto foo_need = std::find_if(bar_info->version_needs.begin(), bar_info->version_needs.end(),
                                     [](const auto& n) { return n.library == "libfoo.so.1"; });
  ASSERT_NE(foo_need, bar_info->version_needs.end());
  EXPECT_THAT(foo_need->versions, ::testing::UnorderedElementsAre("FOO_1.0", "FOO_2.0"));

  auto rpath_info = read_elf_file(rpath);
  ASSERT_TRUE(rpath_info) << rpath_info.error().message;
  expect_matches_readelf(*rpath_info, rpath);
  EXPECT_THAT(rpath_info->rpath, ElementsAre("$ORIGIN"));

  // libfoo.so.1 is neither a system library, nor torch's or CUDA's, nor in the wheel.
  std::vector<core::WheelBinary> wheel{{"pkg/libbar.so", 0, *bar_info, ""}};
  const auto assessment = core::assess_manylinux(wheel, core::torch_extension_provided(wheel));
  ASSERT_EQ(assessment.outcome, core::ManylinuxOutcome::refused);
  ASSERT_EQ(assessment.unsatisfied.size(), 1U);
  EXPECT_EQ(assessment.unsatisfied[0].library, "libfoo.so.1");
  EXPECT_THAT(assessment.unsatisfied[0].needed_by, ElementsAre("pkg/libbar.so"));
  // With libfoo in the wheel, it is satisfied by its soname.
  wheel.push_back({"pkg.libs/libfoo.so", 0, *foo_info, ""});
  EXPECT_EQ(core::assess_manylinux(wheel, core::torch_extension_provided(wheel)).outcome,
            core::ManylinuxOutcome::tagged);
}

TEST_F(ElfTest, OtherArchitecturesAndByteOrders) {
  if (!have_tool("clang") || !have_tool("ld.lld") || !have_tool("readelf")) {
    GTEST_SKIP() << "clang, ld.lld or readelf is not on PATH (Debian packages clang, lld)";
  }
  struct Target {
    const char* triple;
    const char* arch;
    core::ElfClass elf_class;
    core::ElfEndian endian;
    const char* user_hash = "gnu";  // lld has no GNU hash for MIPS
  };
  const Target targets[] = {
      {"i686-linux-gnu", "i686", core::ElfClass::elf32, core::ElfEndian::little},
      {"powerpc64-linux-gnu", "ppc64", core::ElfClass::elf64, core::ElfEndian::big},
      {"powerpc64le-linux-gnu", "ppc64le", core::ElfClass::elf64, core::ElfEndian::little},
      {"powerpc-linux-gnu", "ppc", core::ElfClass::elf32, core::ElfEndian::big},
      {"aarch64-linux-gnu", "aarch64", core::ElfClass::elf64, core::ElfEndian::little},
      {"mips-linux-gnu", "mips", core::ElfClass::elf32, core::ElfEndian::big, "sysv"},
      {"riscv64-linux-gnu", "riscv64", core::ElfClass::elf64, core::ElfEndian::little},
  };
  write_bytes(
      dir_ / "stub.map",
      "STUB_1.0 { global: stub_old; local: *; };\nSTUB_2.0 { global: stub_new; } STUB_1.0;\n");
  for (const auto& t : targets) {
    SCOPED_TRACE(t.triple);
    const std::string cc =
        std::string("clang --target=") + t.triple + " -fPIC -shared -nostdlib -fuse-ld=lld";
    const std::string stub = std::string("libstub-") + t.triple + ".so";
    const std::string user = std::string("libuser-") + t.triple + ".so";
    // The stub with a SysV hash table, the user with a GNU one: both ways of sizing .dynsym.
    compile(cc, "stub.c", "int stub_old(void) { return 1; }\nint stub_new(void) { return 2; }\n",
            stub, "-Wl,--hash-style=sysv -Wl,-soname,libstub.so.1 -Wl,--version-script,stub.map");
    compile(cc, "user.c",
            "int stub_old(void);\nint stub_new(void);\nint use(void) { return stub_old() + "
            "stub_new(); }\n",
            user,
            std::string("-Wl,--hash-style=") + t.user_hash + " " + stub + " -Wl,-rpath,'$ORIGIN'");
    for (const auto& file : {stub, user}) {
      auto info = read_elf_file(dir_ / file);
      ASSERT_TRUE(info) << file << ": " << info.error().message;
      EXPECT_EQ(info->arch(), t.arch);
      EXPECT_EQ(info->elf_class, t.elf_class);
      EXPECT_EQ(info->endian, t.endian);
      expect_matches_readelf(*info, dir_ / file);
    }
    auto user_info = read_elf_file(dir_ / user);
    ASSERT_TRUE(user_info);
    ASSERT_EQ(user_info->version_needs.size(), 1U);
    EXPECT_EQ(user_info->version_needs[0].library, "libstub.so.1");
    EXPECT_THAT(user_info->version_needs[0].versions,
                ::testing::UnorderedElementsAre("STUB_1.0", "STUB_2.0"));
  }
}

TEST_F(ElfTest, ExecutablesAndObjectFiles) {
  REQUIRE_BINUTILS();
  const std::string main_c = "#include <stdio.h>\nint main(void) { puts(\"hi\"); return 0; }\n";
  const fs::path object = compile("gcc -c", "main.c", main_c, "main.o");
  auto info = read_elf_file(object);
  ASSERT_TRUE(info) << info.error().message;
  EXPECT_EQ(info->type, core::ElfType::relocatable);
  EXPECT_FALSE(info->has_dynamic);
  EXPECT_TRUE(info->needed.empty());

  const fs::path program = compile("gcc -no-pie", "main.c", main_c, "main");
  info = read_elf_file(program);
  ASSERT_TRUE(info) << info.error().message;
  EXPECT_EQ(info->type, core::ElfType::executable);
  expect_matches_readelf(*info, program);
  EXPECT_THAT(info->needed, ElementsAre("libc.so.6"));
}

TEST_F(ElfTest, CudaExtensionLinksTheCudaRuntime) {
  const fs::path nvcc = "/usr/local/cuda/bin/nvcc";
  if (!fs::exists(nvcc) || !have_binutils()) {
    GTEST_SKIP() << nvcc << " or binutils are not available";
  }
  const fs::path so =
      compile(nvcc.string() + " -Xcompiler -fPIC -shared -cudart shared", "kernel.cu",
              "__global__ void add(float* x) { x[threadIdx.x] += 1.0f; }\n"
              "extern \"C\" void launch(float* x) { add<<<1, 32>>>(x); }\n",
              "libkernel.so");
  auto info = read_elf_file(so);
  ASSERT_TRUE(info) << info.error().message;
  expect_matches_readelf(*info, so);
  const auto cudart = std::find_if(info->needed.begin(), info->needed.end(),
                                   [](const auto& n) { return n.starts_with("libcudart.so."); });
  ASSERT_NE(cudart, info->needed.end()) << ::testing::PrintToString(info->needed);

  // The CUDA runtime comes with torch's CUDA wheels; without that list it is unsatisfied.
  std::vector<core::WheelBinary> wheel{{"pkg/libkernel.so", 0, *info, ""}};
  EXPECT_EQ(core::assess_manylinux(wheel, core::torch_extension_provided(wheel)).outcome,
            core::ManylinuxOutcome::tagged);
  const auto bare = core::assess_manylinux(wheel, core::wheel_libraries(wheel));
  ASSERT_EQ(bare.outcome, core::ManylinuxOutcome::refused);
  EXPECT_EQ(bare.unsatisfied.at(0).library, *cudart);
}

// ---------------------------------------------------------------------------------------------
// Malformed objects: errors naming the problem, never a crash (the sanitizer build runs these).

class MalformedElfTest : public ElfTest {
 protected:
  void SetUp() override {
    ElfTest::SetUp();
    if (!have_binutils()) GTEST_SKIP() << "gcc or binutils are not on PATH";
    bytes_ = file_bytes(cxx_library());
    if (bytes_.size() < 64 || bytes_[EI_CLASS] != ELFCLASS64 || bytes_[EI_DATA] != ELFDATA2LSB) {
      GTEST_SKIP() << "the host's objects are not ELF64 little-endian";
    }
  }

  static Result<core::ElfInfo> read(std::string_view bytes, const ElfLimits& limits = {}) {
    MemorySource source(bytes);
    return read_elf(source, limits);
  }

  static std::string error_of(std::string_view bytes, const ElfLimits& limits = {}) {
    auto result = read(bytes, limits);
    if (result) return "(no error)";
    EXPECT_EQ(result.error().code, Errc::invalid);
    return result.error().message;
  }

  std::string bytes_;
};

TEST_F(MalformedElfTest, TheUndamagedObjectReads) {
  ASSERT_TRUE(read(bytes_));
}

TEST_F(MalformedElfTest, NotElf) {
  EXPECT_THAT(error_of(""), HasSubstr("not an ELF file"));
  EXPECT_THAT(error_of("hello, this is not an ELF file at all"), HasSubstr("no ELF magic"));
  std::string bad = bytes_;
  bad[EI_CLASS] = 3;
  EXPECT_EQ(error_of(bad), "unsupported ELF class 3");
  bad = bytes_;
  bad[EI_DATA] = 0;
  EXPECT_EQ(error_of(bad), "unsupported ELF data encoding 0");
  bad = bytes_;
  bad[EI_VERSION] = 2;
  EXPECT_EQ(error_of(bad), "unsupported ELF version 2");
}

TEST_F(MalformedElfTest, EveryTruncationFailsCleanly) {
  // Every prefix up to the end of the last table the reader needs fails with a message; longer
  // ones may succeed (section headers and code are never read).
  for (std::size_t size = 0; size < bytes_.size(); size += (size < 256 ? 1 : 37)) {
    auto result = read(std::string_view(bytes_).substr(0, size));
    if (!result) {
      EXPECT_EQ(result.error().code, Errc::invalid) << size;
      EXPECT_FALSE(result.error().message.empty()) << size;
    }
  }
  EXPECT_THAT(error_of(bytes_.substr(0, 40)), HasSubstr("the ELF header is truncated"));
}

TEST_F(MalformedElfTest, ProgramHeadersOutsideTheFile) {
  std::string bad = bytes_;
  put_le(bad, 32, 8, bad.size() - 10);
  EXPECT_THAT(error_of(bad), HasSubstr("the program header table"));
  put_le(bad, 32, 8, ~std::uint64_t{0} - 5);  // offset + size overflows
  EXPECT_THAT(error_of(bad), HasSubstr("lies outside the file"));
  bad = bytes_;
  put_le(bad, 56, 2, PN_XNUM);
  EXPECT_THAT(error_of(bad), HasSubstr("PN_XNUM"));
  bad = bytes_;
  put_le(bad, 54, 2, 8);  // e_phentsize
  EXPECT_THAT(error_of(bad), HasSubstr("smaller than 56"));
  ElfLimits limits;
  limits.max_program_headers = 2;
  EXPECT_THAT(error_of(bytes_, limits),
              HasSubstr("the number of program headers (" + std::to_string(get_le(bytes_, 56, 2)) +
                        ") exceeds the limit of 2"));
}

TEST_F(MalformedElfTest, DynamicSegmentOutsideTheFile) {
  for (const auto& p : program_headers(bytes_)) {
    if (p.type != PT_DYNAMIC) continue;
    std::string bad = bytes_;
    put_le(bad, p.at + 8, 8, bad.size() + 100);
    EXPECT_THAT(error_of(bad), HasSubstr("the PT_DYNAMIC segment"));
    bad = bytes_;
    put_le(bad, p.at + 32, 8, std::uint64_t{1} << 40U);
    EXPECT_THAT(error_of(bad), HasSubstr("exceeds the limit of 1048576"));
    // Two PT_DYNAMIC headers.
    bad = bytes_;
    for (const auto& q : program_headers(bad)) {
      if (q.type == PT_NOTE || q.type == PT_GNU_STACK) {
        put_le(bad, q.at, 4, PT_DYNAMIC);
        break;
      }
    }
    EXPECT_THAT(error_of(bad), HasSubstr("more than one PT_DYNAMIC"));
  }
}

TEST_F(MalformedElfTest, TablesOutsideTheirSegments) {
  std::string bad = bytes_;
  put_le(bad, find_dyn(bad, DT_STRSZ).at + 8, 8, std::uint64_t{1} << 40U);
  EXPECT_THAT(error_of(bad), HasSubstr("DT_STRSZ) (1099511627776) exceeds the limit of 67108864"));

  bad = bytes_;
  put_le(bad, find_dyn(bad, DT_STRSZ).at + 8, 8, std::uint64_t{64} << 20U);
  EXPECT_THAT(error_of(bad), HasSubstr("runs past the end of its PT_LOAD segment"));

  bad = bytes_;
  put_le(bad, find_dyn(bad, DT_STRTAB).at + 8, 8, 0x7fffdead0000ULL);
  EXPECT_THAT(error_of(bad), HasSubstr("(address 0x7fffdead0000) is not in the file contents of "
                                       "any PT_LOAD segment"));

  bad = bytes_;
  put_le(bad, find_dyn(bad, DT_NEEDED).at + 8, 8, find_dyn(bad, DT_STRSZ).value + 5);
  EXPECT_THAT(error_of(bad),
              HasSubstr("a DT_NEEDED entry points outside the dynamic string table"));

  // The string table's last byte is not a NUL: the last string runs off its end.
  bad = bytes_;
  const std::size_t strtab = file_offset(bad, find_dyn(bad, DT_STRTAB).value);
  const std::uint64_t strsz = find_dyn(bad, DT_STRSZ).value;
  std::fill(bad.begin() + static_cast<std::ptrdiff_t>(strtab + strsz - 40),
            bad.begin() + static_cast<std::ptrdiff_t>(strtab + strsz), 'x');
  EXPECT_THAT(error_of(bad), HasSubstr("is not terminated inside the dynamic string table"));
}

TEST_F(MalformedElfTest, DynamicTagsThatContradict) {
  std::string bad = bytes_;
  put_le(bad, find_dyn(bad, DT_GNU_HASH).at, 8, DT_STRTAB);
  EXPECT_THAT(error_of(bad), HasSubstr("the dynamic section has tag 0x5 twice"));

  bad = bytes_;
  put_le(bad, find_dyn(bad, DT_GNU_HASH).at, 8, DT_DEBUG);
  EXPECT_THAT(error_of(bad), HasSubstr("has no DT_GNU_HASH or DT_HASH"));

  bad = bytes_;
  put_le(bad, find_dyn(bad, DT_SYMENT).at + 8, 8, 16);
  EXPECT_EQ(error_of(bad), "DT_SYMENT is 16, not 24");

  bad = bytes_;
  put_le(bad, find_dyn(bad, DT_VERNEEDNUM).at, 8, DT_DEBUG);
  EXPECT_EQ(error_of(bad), "the dynamic section has DT_VERNEED without DT_VERNEEDNUM");
}

TEST_F(MalformedElfTest, VersionTables) {
  std::string bad = bytes_;
  put_le(bad, find_dyn(bad, DT_VERNEEDNUM).at + 8, 8, std::uint64_t{1} << 31U);
  EXPECT_THAT(error_of(bad), HasSubstr("DT_VERNEEDNUM (2147483648) exceeds the limit of 65536"));

  // A vn_next that jumps out of the segment.
  bad = bytes_;
  const std::size_t verneed = file_offset(bad, find_dyn(bad, DT_VERNEED).value);
  put_le(bad, verneed + 12, 4, 0xfffffff0U);
  EXPECT_THAT(error_of(bad), HasSubstr("the version needs run past the end"));

  bad = bytes_;
  put_le(bad, verneed, 2, 7);
  EXPECT_EQ(error_of(bad), "unsupported version needs revision 7");

  // A symbol whose version index nothing defines.
  bad = bytes_;
  const std::size_t versym = file_offset(bad, find_dyn(bad, DT_VERSYM).value);
  put_le(bad, versym + 2, 2, 0x7ff0);
  EXPECT_THAT(error_of(bad), HasSubstr("has version index 32752, which no version entry defines"));

  ElfLimits limits;
  limits.max_version_entries = 3;
  EXPECT_THAT(error_of(bytes_, limits), HasSubstr("exceeds the limit of 3"));
}

TEST_F(MalformedElfTest, SymbolCounts) {
  ElfLimits limits;
  limits.max_symbols = 4;
  EXPECT_THAT(error_of(bytes_, limits), HasSubstr("exceeds the limit of 4"));

  // A GNU hash table whose bucket count is absurd.
  std::string bad = bytes_;
  const std::size_t hash = file_offset(bad, find_dyn(bad, DT_GNU_HASH).value);
  put_le(bad, hash, 4, 0xffffffffU);
  EXPECT_THAT(error_of(bad), HasSubstr("the GNU hash table's bucket count (4294967295) exceeds"));
  // Its bloom filter reaching beyond the segment.
  bad = bytes_;
  put_le(bad, hash + 8, 4, 0x10000000U);
  EXPECT_THAT(error_of(bad), HasSubstr("buckets run past the end of their PT_LOAD segment"));
  // A chain with no end marker runs into the limit or off the segment.
  bad = bytes_;
  const std::uint32_t nbuckets = static_cast<std::uint32_t>(get_le(bad, hash, 4));
  const std::uint32_t bloom = static_cast<std::uint32_t>(get_le(bad, hash + 8, 4));
  const std::size_t chains = hash + 16 + bloom * 8U + nbuckets * 4U;
  const std::uint64_t symtab = file_offset(bad, find_dyn(bad, DT_SYMTAB).value);
  for (std::size_t at = chains; at + 4 <= symtab && at + 4 <= bad.size(); at += 4) {
    put_le(bad, at, 4, get_le(bad, at, 4) & ~std::uint64_t{1});
  }
  auto result = read(bad);
  if (result) {
    // The walk may end on a word of the next table that happens to be odd; then it counts more
    // symbols than there are, which later reads must still bound.
    SUCCEED();
  } else {
    EXPECT_EQ(result.error().code, Errc::invalid);
  }
}

// ---------------------------------------------------------------------------------------------
// Inside wheels

class WheelBinariesTest : public ElfTest {
 protected:
  fs::path wheel(const std::string& name, const std::vector<ZipEntry>& members) {
    std::vector<ZipEntry> all = members;
    all.emplace_back("demo-1.0.dist-info/METADATA",
                     "Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n");
    all.emplace_back("demo-1.0.dist-info/WHEEL",
                     "Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: cp311-cp311-linux_x86_64\n");
    all.emplace_back("demo-1.0.dist-info/RECORD", "");
    const fs::path path = dir_ / name;
    write_bytes(path, build_zip(all));
    return path;
  }
};

TEST_F(WheelBinariesTest, StoredAndDeflatedMembersReadLikeFiles) {
  REQUIRE_BINUTILS();
  const fs::path so = cxx_library();
  const std::string bytes = file_bytes(so);
  const std::string program =
      file_bytes(compile("gcc", "main.c", "int main(void) { return 0; }\n", "tool"));
  auto expected = read_elf_file(so);
  ASSERT_TRUE(expected) << expected.error().message;

  const fs::path path = wheel("demo-1.0-cp311-cp311-linux_x86_64.whl",
                              {
                                  {"demo/__init__.py", "from ._C import greet\n"},
                                  {"demo/_C.so", bytes},
                                  {"demo/_D.so", bytes, Compression::deflate},
                                  {"demo/libc.so", "/* GNU ld script */\nGROUP ( libc.so.6 )\n"},
                                  {"demo/broken.so",
                                   "\x7f"
                                   "ELF\x02\x01\x01 truncated"},
                                  {"demo-1.0.data/scripts/tool", program, Compression::deflate},
                              });
  auto binaries = inspect_wheel_binaries(path);
  ASSERT_TRUE(binaries) << binaries.error().message;
  ASSERT_EQ(binaries->size(), 4U);
  EXPECT_EQ((*binaries)[0].path, "demo/_C.so");
  EXPECT_EQ((*binaries)[0].size, bytes.size());
  ASSERT_TRUE((*binaries)[0].elf) << (*binaries)[0].problem;
  EXPECT_EQ(*(*binaries)[0].elf, *expected);
  EXPECT_EQ((*binaries)[1].path, "demo/_D.so");
  ASSERT_TRUE((*binaries)[1].elf) << (*binaries)[1].problem;
  EXPECT_EQ(*(*binaries)[1].elf, *expected);
  EXPECT_EQ((*binaries)[2].path, "demo/broken.so");
  EXPECT_FALSE((*binaries)[2].elf);
  EXPECT_EQ((*binaries)[2].problem, "the ELF header is truncated");
  EXPECT_EQ((*binaries)[3].path, "demo-1.0.data/scripts/tool");
  ASSERT_TRUE((*binaries)[3].elf) << (*binaries)[3].problem;
  EXPECT_THAT((*binaries)[3].elf->needed, ElementsAre("libc.so.6"));

  // The broken member refuses the manylinux assessment, naming it.
  const auto assessment =
      core::assess_manylinux(*binaries, core::torch_extension_provided(*binaries));
  EXPECT_EQ(assessment.outcome, core::ManylinuxOutcome::refused);
  EXPECT_THAT(assessment.summary(),
              HasSubstr("cannot read demo/broken.so: the ELF header is truncated"));
}

TEST_F(WheelBinariesTest, ADeflatedMemberTakesTwoPasses) {
  REQUIRE_BINUTILS();
  const std::string bytes = file_bytes(cxx_library(/*blob=*/true));
  ASSERT_GT(bytes.size(), std::size_t{4} << 20U);
  const fs::path path =
      wheel("demo-1.0-cp311-cp311-linux_x86_64.whl", {{"demo/_C.so", bytes, Compression::deflate}});
  auto file = open_archive_file(path);
  ASSERT_TRUE(file);
  CappedProblems problems;
  Limits layout;
  layout.max_members = 100;
  auto members = scan_zip_layout(file->fd.get(), file->size, layout, problems);
  ASSERT_TRUE(members && problems.empty());
  const ZipMember& member = members->front();
  auto data = member_data_offset(file->fd.get(), file->size, member);
  ASSERT_TRUE(data);
  auto whole_file = make_region_source(file->fd.get(), 0, file->size);
  InflateBudget budget{std::uint64_t{1} << 30U, std::uint64_t{1} << 30U, false};
  InflatingMemberSource source(*whole_file, member, budget, 4);
  auto info = read_elf(source);
  ASSERT_TRUE(info) << info.error().message;
  MemorySource whole(bytes);
  auto expected = read_elf(whole);
  ASSERT_TRUE(expected);
  EXPECT_EQ(*info, *expected);
  // Headers and the dynamic section (past the blob), then the tables from the start again.
  EXPECT_EQ(source.passes(), 2U);
  const std::uint64_t inflated = (std::uint64_t{1} << 30U) - budget.remaining;
  EXPECT_GT(inflated, bytes.size() / 2);
  EXPECT_LT(inflated, bytes.size() * 2);
}

TEST_F(WheelBinariesTest, Limits) {
  REQUIRE_BINUTILS();
  // Large enough that the tables fall out of the window kept behind the dynamic section.
  const std::string bytes = file_bytes(cxx_library(/*blob=*/true));
  const fs::path path = wheel(
      "demo-1.0-cp311-cp311-linux_x86_64.whl",
      {{"demo/_C.so", bytes, Compression::deflate}, {"demo/_D.so", bytes, Compression::deflate}});
  InspectLimits limits;
  limits.max_binaries = 1;
  auto result = inspect_wheel_binaries(path, limits);
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error().code, Errc::invalid);
  EXPECT_EQ(result.error().message, "the wheel has more than 1 ELF members");

  limits = {};
  limits.max_inflated_bytes = bytes.size();
  result = inspect_wheel_binaries(path, limits);
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error().message, "inflating the wheel's binaries needs more than " +
                                        std::to_string(bytes.size()) + " bytes");

  limits = {};
  limits.max_passes = 1;
  result = inspect_wheel_binaries(path, limits);
  ASSERT_TRUE(result) << result.error().message;
  ASSERT_EQ(result->size(), 2U);
  EXPECT_THAT((*result)[0].problem,
              HasSubstr("'demo/_C.so' needs more than 1 passes over the deflated member"));

  limits = {};
  limits.elf.max_symbols = 3;
  result = inspect_wheel_binaries(path, limits);
  ASSERT_TRUE(result) << result.error().message;
  EXPECT_THAT((*result)[1].problem, HasSubstr("exceeds the limit of 3"));
}

TEST_F(WheelBinariesTest, DamagedWheels) {
  fixtures::write_file(dir_ / "junk.whl", "not a zip");
  auto result = inspect_wheel_binaries(dir_ / "junk.whl");
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error().code, Errc::invalid);
  EXPECT_THAT(result.error().message, HasSubstr("not a zip archive"));
  EXPECT_EQ(inspect_wheel_binaries(dir_ / "missing.whl").error().code, Errc::io);

  // Raw bytes declared deflated: not a deflate stream.
  ZipEntry bad("demo/_C.so",
               "\x7f"
               "ELF" +
                   std::string(5000, 'x'));
  bad.method = 8;
  const fs::path path = wheel("demo-1.0-py3-none-any.whl", {bad});
  result = inspect_wheel_binaries(path);
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error().code, Errc::invalid);
  EXPECT_THAT(result.error().message, HasSubstr("'demo/_C.so' cannot be"));
}

// The build runner's path: a linux_x86_64 wheel, its binaries assessed, retagged with the
// manylinux tag whose glibc floor is what objdump reports.
TEST_F(WheelBinariesTest, RetaggedManylinuxWheelKeepsItsGlibcFloor) {
  REQUIRE_BINUTILS();
  const fs::path so = cxx_library();
  const fs::path built = wheel("demo-1.0-cp311-cp311-linux_x86_64.whl",
                               {{"demo/_C.so", file_bytes(so), Compression::deflate}});
  auto binaries = inspect_wheel_binaries(built);
  ASSERT_TRUE(binaries) << binaries.error().message;
  const auto assessment =
      core::assess_manylinux(*binaries, core::torch_extension_provided(*binaries));
  if (assessment.arch != "x86_64") GTEST_SKIP() << "the host is " << assessment.arch;
  ASSERT_EQ(assessment.outcome, core::ManylinuxOutcome::tagged) << assessment.summary();
  EXPECT_EQ(assessment.glibc_floor, objdump_glibc_floor(so));

  WheelChanges changes;
  changes.local_label = "cpu";
  changes.build_tag = "1";
  changes.platform_tags = assessment.platform_tags();
  auto retagged = rewrite_wheel(built, changes, dir_ / "out");
  ASSERT_TRUE(retagged) << retagged.error().message;
  std::string platform;
  for (const auto& tag : assessment.platform_tags())
    platform += (platform.empty() ? "" : ".") + tag;
  EXPECT_EQ(retagged->filename().string(), "demo-1.0+cpu-1-cp311-cp311-" + platform + ".whl");
  EXPECT_GE(assessment.policy->glibc_minor,
            core::SymbolVersion::parse("X_" + assessment.glibc_floor).numbers->at(1));

  // The copy is deflated for real; its binary reads the same.
  auto again = inspect_wheel_binaries(*retagged);
  ASSERT_TRUE(again) << again.error().message;
  ASSERT_EQ(again->size(), 1U);
  EXPECT_EQ(again->front().elf, binaries->front().elf);
}

}  // namespace
}  // namespace wf::archive
