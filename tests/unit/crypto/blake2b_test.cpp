#include "wheelforge/crypto/blake2b.hpp"

#include <gtest/gtest.h>

#include <stdexcept>

#include "wheelforge/crypto/digest.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::crypto {
namespace {

std::string digest_hex(std::size_t digest_bytes, std::string_view input) {
  Blake2b h(digest_bytes);
  h.update(input);
  return hex_encode(h.finish());
}

// A fixed, non-repeating-looking byte pattern, so that block boundaries matter.
std::string pattern(std::size_t n) {
  std::string out(n, '\0');
  for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<char>((i * 7 + 3) & 0xffU);
  return out;
}

TEST(Blake2b, Rfc7693AppendixA) {
  EXPECT_EQ(digest_hex(64, "abc"),
            "ba80a53f981c4d0d6a2797b69f12f6e94c212f14685ac4b74b12bb6fdbffa2d1"
            "7d87c5392aab792dc252d5de4533cc9518d38aa8dbf1925ab92386edd4009923");
}

TEST(Blake2b, Empty512) {
  EXPECT_EQ(digest_hex(64, ""),
            "786a02f742015903c6c6fd852552d272912f4740e15847618a86e217f71f5419"
            "d25e1031afee585313896444934eb04b903a685b1448b755d56f701afe9be2ce");
}

TEST(Blake2b, Blake2b256KnownVectors) {
  EXPECT_EQ(blake2b_256_hex(""),
            "0e5751c026e543b2e8ab2eb06099daa1d1e5df47778f7787faab45cdf12fe3a8");
  EXPECT_EQ(blake2b_256_hex("abc"),
            "bddd813c634239723171ef3fee98579b94964e3bb1cb3e427262c8c068d52319");
}

TEST(Blake2b, OutputLengthIsPartOfTheFunctionNotATruncation) {
  const std::string full = digest_hex(64, "abc");
  EXPECT_NE(blake2b_256_hex("abc"), full.substr(0, 64));
  EXPECT_EQ(digest_hex(1, "abc"), "6b");
  EXPECT_EQ(digest_hex(20, "abc"), "384264f676f39536840523f284921cdc68b6846b");
  EXPECT_EQ(digest_hex(48, "abc"),
            "6f56a82c8e7ef526dfe182eb5212f7db9df1317e57815dbda46083fc30f54ee6"
            "c66ba83be64b302d7cba6ce15bb556f4");
}

TEST(Blake2b, BlockBoundaries) {
  const std::string input = pattern(300);
  EXPECT_EQ(blake2b_256_hex(input.substr(0, 127)),
            "c9ae3859964b35f04c54b36d33cf299d7290ee621005d28e51598a943560aaaa");
  EXPECT_EQ(blake2b_256_hex(input.substr(0, 128)),
            "f0501d06597880592bc49234eef100ec1ff349058d0e9d9b753504e24af86dd6");
  EXPECT_EQ(blake2b_256_hex(input.substr(0, 129)),
            "a34a4e1e03c541dfbf3099c4b6c143c022ced65c28bd7e8a10e0a098461aecf0");
  EXPECT_EQ(blake2b_256_hex(input.substr(0, 256)),
            "d93ebb9c802f5630ab22516fd82b6c21bc8bd551d531349b715f046ed11ed871");
  EXPECT_EQ(blake2b_256_hex(input),
            "3f712d8870a79a34ed4aed7b4e82123cea195af956e7ebef11d8a9d2f644734e");
}

TEST(Blake2b, MillionAs) {
  EXPECT_EQ(blake2b_256_hex(std::string(1000000, 'a')),
            "0741850f36cba4259628355d1073e24ddb9ca0e1bfac36fd39ae5dc2101e23a4");
}

TEST(Blake2b, IncrementalAtEverySplitPointEqualsOneShot) {
  const std::string input = pattern(300);
  const std::string expected = blake2b_256_hex(input);
  for (std::size_t split = 0; split <= input.size(); ++split) {
    Blake2b h(32);
    h.update(input.data(), split);
    h.update(input.data() + split, input.size() - split);
    EXPECT_EQ(hex_encode(h.finish()), expected) << "split at " << split;
  }
}

TEST(Blake2b, ByteByByteAndEmptyUpdates) {
  const std::string input = pattern(300);
  Blake2b h(32);
  h.update("", 0);
  for (char c : input) {
    h.update(&c, 1);
    h.update(nullptr, 0);
  }
  EXPECT_EQ(hex_encode(h.finish()), blake2b_256_hex(input));
}

TEST(Blake2b, RejectsInvalidDigestLength) {
  EXPECT_THROW(Blake2b(0), std::invalid_argument);
  EXPECT_THROW(Blake2b(65), std::invalid_argument);
}

TEST(Blake2b, HasherRoutesToBlake2b256) {
  const std::string input = pattern(300);
  Hasher h(Algorithm::blake2b_256);
  h.update(std::string_view(input).substr(0, 100));
  h.update(std::string_view(input).substr(100));
  EXPECT_EQ(h.finish_hex(), "3f712d8870a79a34ed4aed7b4e82123cea195af956e7ebef11d8a9d2f644734e");

  Hasher moved_from(Algorithm::blake2b_256);
  moved_from.update("abc");
  Hasher moved = std::move(moved_from);
  EXPECT_EQ(moved.finish_hex(), "bddd813c634239723171ef3fee98579b94964e3bb1cb3e427262c8c068d52319");
}

}  // namespace
}  // namespace wf::crypto
