// Owners of runtime handles: each destroys its handle in its destructor, which never throws.
#pragma once

#include <cstddef>

#include "mori/symm/runtime.hpp"

namespace mori::symm::detail {

struct OwnedStream {
  Runtime* rt = nullptr;
  Stream s = nullptr;
  explicit OwnedStream(Runtime& r) : rt(&r), s(r.stream_create()) {}
  OwnedStream(OwnedStream&& o) noexcept : rt(o.rt), s(o.s) { o.s = nullptr; }
  OwnedStream(const OwnedStream&) = delete;
  OwnedStream& operator=(const OwnedStream&) = delete;
  OwnedStream& operator=(OwnedStream&&) = delete;
  ~OwnedStream() {
    if (s) rt->stream_destroy(s);
  }
};

struct OwnedEvent {
  Runtime* rt = nullptr;
  Event e = nullptr;
  explicit OwnedEvent(Runtime& r) : rt(&r), e(r.event_create()) {}
  OwnedEvent(OwnedEvent&& o) noexcept : rt(o.rt), e(o.e) { o.e = nullptr; }
  OwnedEvent(const OwnedEvent&) = delete;
  OwnedEvent& operator=(const OwnedEvent&) = delete;
  OwnedEvent& operator=(OwnedEvent&&) = delete;
  ~OwnedEvent() {
    if (e) rt->event_destroy(e);
  }
};

struct OwnedBuffer {
  Runtime* rt = nullptr;
  void* p = nullptr;
  OwnedBuffer(Runtime& r, std::size_t bytes) : rt(&r), p(r.device_alloc(bytes)) {}
  OwnedBuffer(const OwnedBuffer&) = delete;
  OwnedBuffer& operator=(const OwnedBuffer&) = delete;
  ~OwnedBuffer() {
    if (p) rt->device_free(p);
  }
};

// A VMM allocation mapped into a reservation of its own, accessible from `device`: created, reserved,
// mapped and granted in the constructor; unmapped, freed and released in the destructor (failures logged).
class OwnedMapping {
 public:
  OwnedMapping(Runtime& rt, int device, std::size_t size, std::size_t alignment, HandleType type);
  ~OwnedMapping();
  OwnedMapping(const OwnedMapping&) = delete;
  OwnedMapping& operator=(const OwnedMapping&) = delete;

  void* va() const noexcept { return va_; }
  std::size_t size() const noexcept { return size_; }

 private:
  void release() noexcept;

  Runtime& rt_;
  std::size_t size_ = 0;
  PhysHandle handle_ = 0;
  bool have_handle_ = false;
  void* va_ = nullptr;
  bool mapped_ = false;
};

}  // namespace mori::symm::detail
