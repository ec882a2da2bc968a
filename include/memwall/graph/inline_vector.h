// A vector that keeps its first N elements inside the object.
//
// Note [Inline id lists]
// ~~~~~~~~~~~~~~~~~~~~~~
// An op reads, creates and updates a handful of buffers (almost always four
// or fewer of each) and a buffer's shape has at most four or five dims. With
// std::vector, each list is its own heap block: a 1M-op graph then costs ~3M
// allocations to load and as many frees to drop, and every pass over the ops
// (validation, liveness, the simulator) chases a pointer per list. Here up to
// N elements live in the 24 or 40 bytes a std::vector would take anyway;
// longer lists move to the heap, transparently. Only trivially copyable
// element types (ids, dims), so moving elements is memcpy.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <new>
#include <span>
#include <stdexcept>
#include <type_traits>
#include <vector>

namespace memwall {

template <typename T, uint32_t N>
class InlineVector {
  static_assert(std::is_trivially_copyable_v<T> && N > 0);

 public:
  using value_type = T;
  using size_type = size_t;
  using difference_type = std::ptrdiff_t;
  using reference = T&;
  using const_reference = const T&;
  using pointer = T*;
  using const_pointer = const T*;
  using iterator = T*;
  using const_iterator = const T*;

  InlineVector() noexcept {}  // user-provided: `const Op op;` must compile
  InlineVector(std::initializer_list<T> values) { assign(values.begin(), values.end()); }
  InlineVector(const std::vector<T>& values) { assign(values.begin(), values.end()); }
  template <std::forward_iterator It>
  InlineVector(It first, It last) {
    assign(first, last);
  }
  InlineVector(const InlineVector& other) { assign(other.begin(), other.end()); }
  InlineVector(InlineVector&& other) noexcept { take(other); }
  ~InlineVector() { release(); }

  InlineVector& operator=(const InlineVector& other) {
    if (this != &other) assign(other.begin(), other.end());
    return *this;
  }
  InlineVector& operator=(InlineVector&& other) noexcept {
    if (this != &other) {
      release();
      take(other);
    }
    return *this;
  }
  InlineVector& operator=(std::initializer_list<T> values) {
    assign(values.begin(), values.end());
    return *this;
  }
  InlineVector& operator=(const std::vector<T>& values) {
    assign(values.begin(), values.end());
    return *this;
  }

  template <std::forward_iterator It>
  void assign(It first, It last) {
    const auto count = static_cast<size_t>(std::distance(first, last));
    size_ = 0;
    reserve(count);
    std::copy(first, last, data());
    size_ = static_cast<uint32_t>(count);
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  size_t capacity() const { return capacity_; }
  T* data() { return on_heap() ? heap_ : inline_; }
  const T* data() const { return on_heap() ? heap_ : inline_; }
  T* begin() { return data(); }
  T* end() { return data() + size_; }
  const T* begin() const { return data(); }
  const T* end() const { return data() + size_; }

  T& operator[](size_t i) { return data()[i]; }
  const T& operator[](size_t i) const { return data()[i]; }
  T& at(size_t i) { return i < size_ ? data()[i] : out_of_range(); }
  const T& at(size_t i) const { return i < size_ ? data()[i] : out_of_range(); }
  T& front() { return data()[0]; }
  const T& front() const { return data()[0]; }
  T& back() { return data()[size_ - 1]; }
  const T& back() const { return data()[size_ - 1]; }

  void push_back(const T& value) {
    if (size_ == capacity_) {
      const T copy = value;  // `value` may live in this vector
      reserve(size_t{capacity_} * 2);
      data()[size_++] = copy;
    } else {
      data()[size_++] = value;
    }
  }
  void pop_back() { --size_; }
  void clear() { size_ = 0; }
  void resize(size_t count) {
    reserve(count);
    if (count > size_) std::fill(data() + size_, data() + count, T{});
    size_ = static_cast<uint32_t>(count);
  }
  // Keeps the elements; never shrinks.
  void reserve(size_t count) {
    if (count <= capacity_) return;
    if (count > kMaxSize) throw std::length_error("InlineVector: too many elements");
    T* grown = static_cast<T*>(::operator new(count * sizeof(T)));
    std::memcpy(grown, data(), size_t{size_} * sizeof(T));
    release();
    heap_ = grown;
    capacity_ = static_cast<uint32_t>(count);
  }

  operator std::span<const T>() const { return {data(), size_}; }
  std::vector<T> to_vector() const { return {begin(), end()}; }

  friend bool operator==(const InlineVector& a, const InlineVector& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }
  friend bool operator==(const InlineVector& a, const std::vector<T>& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  static constexpr size_t kMaxSize = UINT32_MAX;

  bool on_heap() const { return capacity_ > N; }
  void release() {
    if (on_heap()) ::operator delete(heap_);
    capacity_ = N;
  }
  // Moves `other`'s elements here (this holds none) and empties it.
  void take(InlineVector& other) {
    if (other.on_heap()) {
      heap_ = other.heap_;
      capacity_ = other.capacity_;
      other.capacity_ = N;
    } else {
      std::memcpy(inline_, other.inline_, size_t{other.size_} * sizeof(T));
    }
    size_ = other.size_;
    other.size_ = 0;
  }
  [[noreturn]] static T& out_of_range() { throw std::out_of_range("InlineVector::at"); }

  union {
    T inline_[N] = {};
    T* heap_;
  };
  uint32_t size_ = 0;
  uint32_t capacity_ = N;
};

}  // namespace memwall
