// SPDX-License-Identifier: MIT
// A scripted fake runtime for unit tests: the host runtime posing as a CUDA device whose attributes and
// failures are chosen by the test.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "mori/symm/base/error.hpp"
#include "mori/symm/platform/runtime.hpp"

namespace mori::symm::testing {

// The host runtime, posing as a CUDA device whose attributes and failures are scripted.
class FakeRuntime final : public Runtime {
 public:
  std::map<std::pair<HandleType, std::string>, std::string> fail;  // (type, step) -> error name
  bool attr_fd = true, attr_fabric = true, vmm = true;
  std::string pci_bus_id = "0000:19:00.0";  // a MIG instance reports its parent GPU's

  Platform platform() const noexcept override { return Platform::cuda; }
  std::string driver_version() override { return "fake"; }
  std::string runtime_version() override { return "fake"; }
  int device_count() override { return 1; }
  DeviceInfo device_info(int d) override {
    auto i = host_->device_info(d);
    i.posix_fd_attribute = attr_fd;
    i.fabric_attribute = attr_fabric;
    i.vmm_supported = vmm;
    i.pci_bus_id = pci_bus_id;
    return i;
  }
  void set_device(int d) override { host_->set_device(d); }
  int current_device() const noexcept override { return 0; }
  std::size_t granularity(int d, HandleType t, bool r) override {
    current_ = t;
    maybe_fail("granularity");
    return host_->granularity(d, t, r);
  }
  PhysHandle mem_create(int d, std::size_t s, HandleType t, bool u) override {
    current_ = t;
    maybe_fail("create");
    return host_->mem_create(d, s, t, u);
  }
  int export_fd(PhysHandle h) override {
    maybe_fail("export");
    return host_->export_fd(h);
  }
  FabricBlob export_fabric(PhysHandle h) override {
    maybe_fail("export");
    return host_->export_fabric(h);
  }
  PhysHandle import_fd(int fd, std::size_t size) override {
    maybe_fail("import");
    return host_->import_fd(fd, size);
  }
  PhysHandle import_fabric(const FabricBlob& b) override {
    maybe_fail("import");
    return host_->import_fabric(b);
  }
  PhysHandle retain(void* a) override { return host_->retain(a); }
  void* reserve(std::size_t s, std::size_t a) override { return host_->reserve(s, a); }
  void map(void* v, std::size_t s, PhysHandle h) override {
    maybe_fail("map");
    host_->map(v, s, h);
  }
  void set_access(void* v, std::size_t s, int d) override {
    maybe_fail("set_access");
    host_->set_access(v, s, d);
  }
  void unmap(void* v, std::size_t s) override { host_->unmap(v, s); }
  void release(PhysHandle h) override { host_->release(h); }
  void free_reservation(void* v, std::size_t s) override { host_->free_reservation(v, s); }
  LiveResources live_resources() const override { return host_->live_resources(); }
  void* device_alloc(std::size_t s) override { return host_->device_alloc(s); }
  void device_free(void* p) noexcept override { host_->device_free(p); }
  void copy_to_device(void* d, const void* s, std::size_t n) override { host_->copy_to_device(d, s, n); }
  void copy_to_host(void* d, const void* s, std::size_t n) override { host_->copy_to_host(d, s, n); }
  void copy_async(void* d, const void* s, std::size_t n, Stream st) override {
    host_->copy_async(d, s, n, st);
  }
  void memset_async(void* d, std::uint8_t v, std::size_t n, Stream s) override {
    host_->memset_async(d, v, n, s);
  }
  MemInfo mem_info() override { return host_->mem_info(); }
  Stream stream_create() override { return host_->stream_create(); }
  void stream_destroy(Stream s) noexcept override { host_->stream_destroy(s); }
  void stream_sync(Stream s) override { host_->stream_sync(s); }
  void stream_wait_event(Stream s, Event e) override { host_->stream_wait_event(s, e); }
  void device_sync() override {}
  Event event_create() override { return host_->event_create(); }
  void event_destroy(Event e) noexcept override { host_->event_destroy(e); }
  void event_record(Event e, Stream s) override { host_->event_record(e, s); }
  void event_sync(Event e) override { host_->event_sync(e); }
  float event_elapsed_ms(Event a, Event b) override { return host_->event_elapsed_ms(a, b); }
  Module module_load(const std::vector<char>& i) override { return host_->module_load(i); }
  void module_unload(Module m) noexcept override { host_->module_unload(m); }
  Function module_function(Module m, const std::string& n) override { return host_->module_function(m, n); }
  void launch(Function f, Dim3 g, Dim3 b, std::size_t s, Stream st, void** a) override {
    host_->launch(f, g, b, s, st, a);
  }
  void capture_begin(Stream s) override { host_->capture_begin(s); }
  GraphExec capture_end(Stream s) override { return host_->capture_end(s); }
  void graph_launch(GraphExec g, Stream s) override { host_->graph_launch(g, s); }
  void graph_destroy(GraphExec g) noexcept override { host_->graph_destroy(g); }
  std::string clear_error() noexcept override { return {}; }

 private:
  void maybe_fail(const std::string& step) {
    auto it = fail.find({current_, step});
    if (it != fail.end()) throw ApiError("fake " + step, __FILE__, __LINE__, it->second);
  }
  std::unique_ptr<Runtime> host_ = make_host_runtime();
  HandleType current_ = HandleType::posix_fd;
};

}  // namespace mori::symm::testing
