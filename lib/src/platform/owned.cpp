// SPDX-License-Identifier: MIT
#include "mori/symm/platform/detail/owned.hpp"

#include <spdlog/spdlog.h>

#include <exception>

namespace mori::symm::detail {

OwnedMapping::OwnedMapping(Runtime& rt, int device, std::size_t size, std::size_t alignment, HandleType type)
    : rt_(rt), size_(size) {
  try {
    handle_ = rt_.mem_create(device, size, type);
    have_handle_ = true;
    va_ = rt_.reserve(size, alignment);
    rt_.map(va_, size, handle_);
    mapped_ = true;
    rt_.set_access(va_, size, device);
  } catch (...) {
    release();
    throw;
  }
}

OwnedMapping::~OwnedMapping() {
  release();
}

void OwnedMapping::release() noexcept {
  auto guarded = [](const char* what, auto&& f) {
    try {
      f();
    } catch (const std::exception& e) {
      spdlog::error("mapping release: {} failed: {}", what, e.what());
    }
  };
  if (mapped_) guarded("unmap", [&] { rt_.unmap(va_, size_); });
  mapped_ = false;
  if (va_) guarded("free reservation", [&] { rt_.free_reservation(va_, size_); });
  va_ = nullptr;
  if (have_handle_) guarded("release", [&] { rt_.release(handle_); });
  have_handle_ = false;
}

}  // namespace mori::symm::detail
