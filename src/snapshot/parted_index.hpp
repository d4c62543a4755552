#pragma once
// A map from string keys to pointers, kept in parts by the key's hash, that a snapshot shares
// with the snapshot it was made from: copying it copies the parts' pointers, and a change
// copies only the parts it touches. Applying a change to one project therefore costs that
// project's entries (plus one pointer per part), not the whole catalog's.
//
// With `kRepeats`, a key may hold several values (several files may hold the same bytes);
// without, a second value under a key is not added. An entry is removed by its value.
// The number of parts grows with the entries (about kPerPart each; regrown when they average
// four times that), so a part stays small to copy at any catalog size.

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

namespace wf::snapshot {

template <typename T, bool kRepeats = false>
class PartedIndex {
 public:
  static constexpr std::size_t kPerPart = 256;
  static constexpr std::size_t kMinParts = 16;

  /// An empty index for about `expected` entries.
  explicit PartedIndex(std::size_t expected = 0) { reset(expected); }

  /// A copy that shares every part with `other`; changing it copies the parts it changes.
  PartedIndex(const PartedIndex& other)
      : parts_(other.parts_),
        owned_(other.parts_.size(), false),
        shift_(other.shift_),
        size_(other.size_) {}
  PartedIndex& operator=(const PartedIndex& other) {
    if (this != &other) *this = PartedIndex(other);
    return *this;
  }
  PartedIndex(PartedIndex&&) noexcept = default;
  PartedIndex& operator=(PartedIndex&&) noexcept = default;
  ~PartedIndex() = default;

  /// A value stored under `key` (when several are, one of them), or nullptr.
  [[nodiscard]] const T* find(std::string_view key) const {
    const Part& part = *parts_[slot(key)];
    const auto it = part.find(key);
    return it == part.end() ? nullptr : it->second;
  }

  /// Adds `value` under `key` (which must live as long as every index that holds it).
  void add(std::string_view key, const T* value) {
    if constexpr (kRepeats) {
      own(slot(key)).emplace(key, value);
      ++size_;
    } else {
      if (own(slot(key)).emplace(key, value).second) ++size_;
    }
  }

  /// Removes the entry of `value` under `key`, if there is one.
  void remove(std::string_view key, const T* value) {
    const std::size_t i = slot(key);
    const Part& shared = *parts_[i];
    if (entry(shared, key, value) == shared.end()) return;
    Part& part = own(i);  // may copy the part: look the entry up in the copy
    part.erase(entry(part, key, value));
    --size_;
  }

  [[nodiscard]] std::size_t size() const { return size_; }
  [[nodiscard]] std::size_t parts() const { return parts_.size(); }

  /// True when the parts have grown past four times their planned size: the owner should
  /// build the index again (assign()) for its present size.
  [[nodiscard]] bool crowded() const { return size_ > parts_.size() * kPerPart * 4; }

  /// Makes the index hold exactly `entries` (key, value), sized for them. Faster than reset()
  /// and add() for each: the entries are put in order of their parts, one part after another.
  void assign(const std::vector<std::pair<std::string_view, const T*>>& entries) {
    reset(entries.size());
    std::vector<std::uint32_t> slots(entries.size());
    std::vector<std::size_t> starts(parts_.size() + 1, 0);
    for (std::size_t i = 0; i < entries.size(); ++i) {
      slots[i] = static_cast<std::uint32_t>(slot(entries[i].first));
      ++starts[slots[i] + 1];
    }
    for (std::size_t p = 1; p < starts.size(); ++p) starts[p] += starts[p - 1];
    std::vector<std::size_t> order(entries.size());
    for (std::size_t i = 0; i < entries.size(); ++i) order[starts[slots[i]]++] = i;
    for (const std::size_t i : order) add(entries[i].first, entries[i].second);
  }

  /// Empties the index and sizes its parts for about `expected` entries.
  void reset(std::size_t expected) {
    std::size_t n = std::bit_ceil(std::max(kMinParts, expected / kPerPart));
    parts_.clear();
    parts_.reserve(n);
    // Each part sized for its share and a quarter more, so that filling it does not rehash.
    const std::size_t share = expected / n;
    for (std::size_t i = 0; i < n; ++i) {
      parts_.push_back(std::make_shared<Part>());
      if (share > 0) parts_.back()->reserve(share + share / 4);
    }
    owned_.assign(n, true);
    shift_ = 64 - static_cast<unsigned>(std::countr_zero(n));
    size_ = 0;
  }

 private:
  using Part = std::conditional_t<kRepeats, std::unordered_multimap<std::string_view, const T*>,
                                  std::unordered_map<std::string_view, const T*>>;

  // The part of a key: the top bits of its hash, mixed (Fibonacci hashing), so that the parts'
  // own buckets (the hash modulo a prime) stay spread.
  [[nodiscard]] std::size_t slot(std::string_view key) const {
    const std::uint64_t h = std::hash<std::string_view>{}(key);
    return static_cast<std::size_t>((h * 0x9E3779B97F4A7C15ULL) >> shift_);
  }

  // The entry of `value` under `key` in `part`, or its end().
  template <typename P>
  static auto entry(P& part, std::string_view key, const T* value) {
    auto [it, end] = part.equal_range(key);
    while (it != end && it->second != value) ++it;
    return it == end ? part.end() : it;
  }

  Part& own(std::size_t i) {
    if (!owned_[i]) {
      parts_[i] = std::make_shared<Part>(*parts_[i]);
      owned_[i] = true;
    }
    return *parts_[i];
  }

  std::vector<std::shared_ptr<Part>> parts_;
  std::vector<bool> owned_;  // the parts this copy made (may change in place)
  unsigned shift_ = 60;      // 64 - log2(parts)
  std::size_t size_ = 0;
};

}  // namespace wf::snapshot
