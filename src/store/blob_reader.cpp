#include "wheelforge/store/blob_reader.hpp"

#include <algorithm>
#include <utility>

namespace wf::store {
namespace {

class FileReader final : public BlobReader {
 public:
  explicit FileReader(std::unique_ptr<archive::ByteSource> file) : file_(std::move(file)) {}
  [[nodiscard]] std::uint64_t size() const override { return file_->size(); }
  [[nodiscard]] Result<std::string> read_at(std::uint64_t offset, std::size_t length) override {
    return file_->read_at(offset, length);
  }
  [[nodiscard]] std::uint64_t fetched_bytes() const override { return 0; }
  [[nodiscard]] std::uint64_t requests() const override { return 0; }

 private:
  std::unique_ptr<archive::ByteSource> file_;
};

class ObjectReader final : public BlobReader {
 public:
  ObjectReader(ObjectStore& objects, std::string key, std::uint64_t size, std::string describe)
      : objects_(objects), key_(std::move(key)), size_(size), describe_(std::move(describe)) {}

  [[nodiscard]] std::uint64_t size() const override { return size_; }
  [[nodiscard]] std::uint64_t fetched_bytes() const override { return fetched_; }
  [[nodiscard]] std::uint64_t requests() const override { return requests_; }

  [[nodiscard]] Result<std::string> read_at(std::uint64_t offset, std::size_t length) override {
    if (offset > size_ || length > size_ - offset) {
      return make_error(Errc::invalid, "bytes " + std::to_string(offset) + "+" +
                                           std::to_string(length) + " lie outside the " +
                                           std::to_string(size_) + "-byte blob");
    }
    if (length == 0) return std::string();
    const std::uint64_t end = offset + length;
    // Sequential reads (an inflated member, a central directory), and reads that skip less
    // than a block forward (the local headers of small members), fetch further ahead.
    if (offset < next_offset_ || offset - next_offset_ > kRangeBlock) {
      read_ahead_ = 0;
    } else {
      read_ahead_ = read_ahead_ == 0 ? kRangeBlock : std::min(read_ahead_ * 2, kMaxReadAhead);
    }
    next_offset_ = end;
    const std::uint64_t first = offset / kRangeBlock;
    const std::uint64_t last = (end - 1) / kRangeBlock;
    for (std::uint64_t b = first; b <= last; ++b) {
      if (blocks_.count(b) != 0) continue;
      // One request from this missing block to the last needed one, and on ahead.
      const std::uint64_t from = b * kRangeBlock;
      const std::uint64_t ahead_end =
          (end + read_ahead_ + kRangeBlock - 1) / kRangeBlock * kRangeBlock;
      const std::uint64_t wanted_end = std::max((last + 1) * kRangeBlock, ahead_end);
      const std::uint64_t to =
          std::min({wanted_end, size_,
                    from + kRangeBlock * static_cast<std::uint64_t>(kMaxCachedBlocks / 2)});
      if (auto st = fetch(from, to); !st) return st.error();
      b = (to - 1) / kRangeBlock;
    }
    std::string out;
    out.reserve(length);
    for (std::uint64_t b = first; b <= last; ++b) {
      auto found = blocks_.find(b);
      if (found == blocks_.end()) {
        return make_error(Errc::internal, describe_ + ": read " + key_ + ": block " +
                                              std::to_string(b) + " missing after its fetch");
      }
      use(found->second);
      const std::string& block = found->second.bytes;
      const std::uint64_t block_start = b * kRangeBlock;
      const std::uint64_t lo = std::max(offset, block_start) - block_start;
      const std::uint64_t hi = std::min(end, block_start + block.size()) - block_start;
      out.append(block, static_cast<std::size_t>(lo), static_cast<std::size_t>(hi - lo));
    }
    evict();
    return out;
  }

 private:
  struct Block {
    std::string bytes;
    std::list<std::uint64_t>::iterator in_order;
  };

  // [from, to) of the object, into whole blocks (the last one may be short: the object's end).
  Status fetch(std::uint64_t from, std::uint64_t to) {
    std::string bytes;
    ++requests_;
    auto st = objects_.get(key_, from, to - from, [&](std::string_view chunk) -> Status {
      if (bytes.size() + chunk.size() > to - from) {
        return make_error(Errc::invalid, "the store sent more than the " +
                                             std::to_string(to - from) + " bytes asked for");
      }
      bytes.append(chunk);
      return ok_status();
    });
    if (!st) {
      const Errc code = st.error().code == Errc::not_found ? Errc::not_found : Errc::unavailable;
      return make_error(code, describe_ + ": read " + key_ + ": " + st.error().message);
    }
    if (bytes.size() != to - from) {
      return make_error(Errc::unavailable, describe_ + ": read " + key_ + ": " +
                                               std::to_string(bytes.size()) + " bytes of " +
                                               std::to_string(to - from) + " arrived");
    }
    fetched_ += bytes.size();
    for (std::uint64_t at = from; at < to; at += kRangeBlock) {
      const std::uint64_t b = at / kRangeBlock;
      const auto n = static_cast<std::size_t>(std::min(kRangeBlock, to - at));
      order_.push_front(b);
      auto [it, inserted] = blocks_.try_emplace(b);
      if (!inserted) order_.erase(it->second.in_order);
      it->second.bytes = bytes.substr(static_cast<std::size_t>(at - from), n);
      it->second.in_order = order_.begin();
    }
    return ok_status();
  }

  void use(Block& block) { order_.splice(order_.begin(), order_, block.in_order); }

  void evict() {
    while (blocks_.size() > kMaxCachedBlocks) {
      blocks_.erase(order_.back());
      order_.pop_back();
    }
  }

  ObjectStore& objects_;
  std::string key_;
  std::uint64_t size_;
  std::string describe_;
  std::unordered_map<std::uint64_t, Block> blocks_;
  std::list<std::uint64_t> order_;  // most recently used first
  std::uint64_t next_offset_ = 0;
  std::uint64_t read_ahead_ = 0;
  std::uint64_t fetched_ = 0;
  std::uint64_t requests_ = 0;
};

}  // namespace

std::unique_ptr<BlobReader> make_object_reader(ObjectStore& objects, std::string key,
                                               std::uint64_t size, std::string describe) {
  return std::make_unique<ObjectReader>(objects, std::move(key), size, std::move(describe));
}

Result<std::unique_ptr<BlobReader>> make_file_reader(const std::filesystem::path& path) {
  auto file = archive::open_file_source(path);
  if (!file) return file.error();
  return std::unique_ptr<BlobReader>(std::make_unique<FileReader>(std::move(*file)));
}

}  // namespace wf::store
