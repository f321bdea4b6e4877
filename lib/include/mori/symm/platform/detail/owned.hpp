// SPDX-License-Identifier: MIT
// Owners of runtime handles: each destroys its handle in its destructor, which never throws.
#pragma once

#include <cstddef>

#include "mori/symm/platform/runtime.hpp"

namespace mori::symm::detail {

// A stream or an event: created by the runtime in the constructor, destroyed in the destructor.
template <class Handle, Handle (Runtime::*Create)(), void (Runtime::*Destroy)(Handle) noexcept>
class OwnedHandle {
 public:
  explicit OwnedHandle(Runtime& r) : rt_(&r), h_((r.*Create)()) {}
  OwnedHandle(OwnedHandle&& o) noexcept : rt_(o.rt_), h_(o.h_) { o.h_ = nullptr; }
  OwnedHandle(const OwnedHandle&) = delete;
  OwnedHandle& operator=(const OwnedHandle&) = delete;
  OwnedHandle& operator=(OwnedHandle&&) = delete;
  ~OwnedHandle() {
    if (h_) (rt_->*Destroy)(h_);
  }
  Handle get() const noexcept { return h_; }

 private:
  Runtime* rt_ = nullptr;
  Handle h_ = nullptr;
};
using OwnedStream = OwnedHandle<Stream, &Runtime::stream_create, &Runtime::stream_destroy>;
using OwnedEvent = OwnedHandle<Event, &Runtime::event_create, &Runtime::event_destroy>;

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
