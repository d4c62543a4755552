#include "archive/zip_builder.hpp"

#include <array>
#include <cstdio>
#include <fstream>
#include <stdexcept>

namespace wf::archive::fixtures {
namespace {

constexpr std::uint32_t kMax32 = 0xffffffffU;

void put16(std::string& out, std::uint64_t v) {
  out += static_cast<char>(v & 0xffU);
  out += static_cast<char>((v >> 8U) & 0xffU);
}
void put32(std::string& out, std::uint64_t v) {
  put16(out, v & 0xffffU);
  put16(out, (v >> 16U) & 0xffffU);
}
void put64(std::string& out, std::uint64_t v) {
  put32(out, v & kMax32);
  put32(out, v >> 32U);
}

std::array<std::uint32_t, 256> make_crc_table() {
  std::array<std::uint32_t, 256> table{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1U) != 0 ? 0xedb88320U ^ (c >> 1U) : c >> 1U;
    table[i] = c;
  }
  return table;
}

struct Written {
  std::uint64_t offset = 0;
  std::uint16_t flags = 0;
  std::uint16_t method = 0;
  std::uint32_t crc = 0;
  std::uint64_t compressed = 0;
  std::uint64_t uncompressed = 0;
};

}  // namespace

std::uint32_t crc32(std::string_view data) {
  static const auto table = make_crc_table();
  std::uint32_t c = kMax32;
  for (const char ch : data) c = table[(c ^ static_cast<unsigned char>(ch)) & 0xffU] ^ (c >> 8U);
  return c ^ kMax32;
}

std::string deflate_stored_blocks(std::string_view data) {
  std::string out;
  do {
    const std::size_t n = std::min<std::size_t>(data.size(), 0xffffU);
    const bool final_block = n == data.size();
    out += static_cast<char>(final_block ? 1 : 0);  // BFINAL, BTYPE=00, padded to a byte
    put16(out, n);
    put16(out, ~n & 0xffffU);
    out.append(data.substr(0, n));
    data.remove_prefix(n);
  } while (!data.empty());
  return out;
}

std::string gzip(std::string_view data) {
  std::string out("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff", 10);
  out += deflate_stored_blocks(data);
  put32(out, crc32(data));
  put32(out, data.size() & kMax32);
  return out;
}

std::string build_zip(const std::vector<ZipEntry>& entries, const ZipOptions& options) {
  const std::uint64_t base = options.offsets_include_prefix ? options.prefix.size() : 0;
  const std::uint16_t version = options.zip64 ? 45 : 20;
  std::string body;
  std::vector<Written> written;
  for (const auto& e : entries) {
    const std::string payload =
        e.compression == Compression::deflate ? deflate_stored_blocks(e.data) : e.data;
    Written w;
    w.offset = base + body.size();
    w.flags = static_cast<std::uint16_t>(e.flags | (e.data_descriptor ? 8U : 0U));
    w.method = e.method.value_or(e.compression == Compression::deflate ? 8 : 0);
    w.crc = e.crc.value_or(crc32(e.data));
    w.compressed = e.compressed_size.value_or(payload.size());
    w.uncompressed = e.uncompressed_size.value_or(e.data.size());
    written.push_back(w);

    const std::string& local_name = e.local_name ? *e.local_name : e.name;
    std::string extra;
    if (options.zip64 && !e.data_descriptor) {
      put16(extra, 1);
      put16(extra, 16);
      put64(extra, w.uncompressed);
      put64(extra, w.compressed);
    }
    put32(body, 0x04034b50U);
    put16(body, version);
    put16(body, w.flags);
    put16(body, w.method);
    put16(body, 0);     // time
    put16(body, 0x21);  // 1980-01-01
    if (e.data_descriptor) {
      put32(body, 0);
      put32(body, 0);
      put32(body, 0);
    } else {
      put32(body, w.crc);
      put32(body, options.zip64 ? kMax32 : w.compressed);
      put32(body, options.zip64 ? kMax32 : w.uncompressed);
    }
    put16(body, local_name.size());
    put16(body, extra.size());
    body += local_name;
    body += extra;
    body += payload;
    if (e.data_descriptor) {
      put32(body, 0x08074b50U);
      put32(body, w.crc);
      if (options.zip64) {
        put64(body, w.compressed);
        put64(body, w.uncompressed);
      } else {
        put32(body, w.compressed);
        put32(body, w.uncompressed);
      }
    }
  }
  body += options.gap_before_central_directory;

  const std::uint64_t cd_offset = base + body.size();
  std::string cd;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const auto& e = entries[i];
    const auto& w = written[i];
    const bool directory = !e.name.empty() && e.name.back() == '/';
    std::string extra;
    if (options.zip64) {
      put16(extra, 1);
      put16(extra, 24);
      put64(extra, w.uncompressed);
      put64(extra, w.compressed);
      put64(extra, w.offset);
    }
    put32(cd, 0x02014b50U);
    put16(cd, (3U << 8U) | version);  // made on Unix
    put16(cd, version);
    put16(cd, w.flags);
    put16(cd, w.method);
    put16(cd, 0);
    put16(cd, 0x21);
    put32(cd, w.crc);
    put32(cd, options.zip64 ? kMax32 : w.compressed);
    put32(cd, options.zip64 ? kMax32 : w.uncompressed);
    put16(cd, e.name.size());
    put16(cd, extra.size());
    put16(cd, 0);  // comment
    put16(cd, 0);  // disk
    put16(cd, 0);  // internal attributes
    put32(cd, directory ? ((040755U << 16U) | 0x10U) : (0100644U << 16U));
    put32(cd, options.zip64 ? kMax32 : w.offset);
    cd += e.name;
    cd += extra;
  }
  body += cd;

  const std::uint64_t count = entries.size();
  if (options.zip64) {
    const std::uint64_t record_offset = base + body.size();
    put32(body, 0x06064b50U);
    put64(body, 44);
    put16(body, (3U << 8U) | version);
    put16(body, version);
    put32(body, 0);
    put32(body, 0);
    put64(body, count);
    put64(body, count);
    put64(body, cd.size());
    put64(body, cd_offset);
    put32(body, 0x07064b50U);
    put32(body, 0);
    put64(body, record_offset);
    put32(body, 1);
  }
  put32(body, 0x06054b50U);
  put16(body, 0);
  put16(body, 0);
  put16(body, options.zip64 ? 0xffffU : count);
  put16(body, options.zip64 ? 0xffffU : count);
  put32(body, options.zip64 ? kMax32 : cd.size());
  put32(body, options.zip64 ? kMax32 : cd_offset);
  put16(body, 0);  // comment
  return options.prefix + body + options.trailer;
}

std::string build_tar(const std::vector<TarEntry>& entries) {
  std::string out;
  for (const auto& e : entries) {
    if (e.name.size() > 100 || e.link_target.size() > 100) {
      throw std::invalid_argument("tar fixture names are limited to 100 bytes");
    }
    std::string header(512, '\0');
    auto field = [&](std::size_t at, std::string_view text) {
      header.replace(at, text.size(), text);
    };
    auto octal = [&](std::size_t at, std::size_t width, std::uint64_t value) {
      std::string digits(width - 1, '0');
      for (std::size_t i = digits.size(); i-- > 0 && value != 0; value >>= 3U) {
        digits[i] = static_cast<char>('0' + (value & 7U));
      }
      field(at, digits);
    };
    const bool has_data = e.type == TarEntry::Type::file || e.type == TarEntry::Type::sparse;
    const bool sparse = e.type == TarEntry::Type::sparse;
    field(0, e.name);
    octal(100, 8, e.type == TarEntry::Type::directory ? 0755U : 0644U);
    octal(108, 8, 0);
    octal(116, 8, 0);
    // A sparse header's size is what is stored; the real size follows the sparse map.
    const std::uint64_t size =
        has_data ? (sparse ? e.data.size() : e.declared_size.value_or(e.data.size())) : 0U;
    octal(124, 12, size);
    octal(136, 12, 0);
    field(148, "        ");
    char type = '0';
    switch (e.type) {
      case TarEntry::Type::file:
        type = '0';
        break;
      case TarEntry::Type::hardlink:
        type = '1';
        break;
      case TarEntry::Type::symlink:
        type = '2';
        break;
      case TarEntry::Type::char_device:
        type = '3';
        break;
      case TarEntry::Type::block_device:
        type = '4';
        break;
      case TarEntry::Type::directory:
        type = '5';
        break;
      case TarEntry::Type::fifo:
        type = '6';
        break;
      case TarEntry::Type::sparse:
        type = 'S';
        break;
    }
    header[156] = type;
    field(157, e.link_target);
    if (sparse) {
      // Old GNU header: magic "ustar  \0", one sparse extent (offset, length) at 386, not
      // extended (482), the real size at 483.
      field(257, std::string_view("ustar  \0", 8));
      octal(386, 12, 0);
      octal(398, 12, e.data.size());
      octal(483, 12, e.declared_size.value_or(e.data.size()));
    } else {
      field(257, std::string_view("ustar\0"
                                  "00",
                                  8));
      octal(329, 8, 0);  // device major and minor
      octal(337, 8, 0);
    }
    unsigned sum = 0;
    for (const char c : header) sum += static_cast<unsigned char>(c);
    std::array<char, 8> checksum{};
    std::snprintf(checksum.data(), checksum.size(), "%06o", sum);
    field(148, std::string_view(checksum.data(), 7));
    out += header;
    if (has_data) {
      out += e.data;
      out.append((512U - e.data.size() % 512U) % 512U, '\0');
    }
  }
  out.append(1024, '\0');
  return out;
}

void write_file(const std::filesystem::path& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

}  // namespace wf::archive::fixtures
