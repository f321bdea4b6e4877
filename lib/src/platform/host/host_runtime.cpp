// SPDX-License-Identifier: MIT
// Host runtime: the HIP virtual-memory semantics over POSIX shared memory (lib/README.md, Platform).
//
// clang-format off
//   create  = memfd_create + ftruncate (both handle types)
//   export  = dup of the memfd (posix_fd), or a 64-byte in-band blob {magic, pid, fd, inode, size} (fabric) that
//             the importer opens as /proc/<pid>/fd/<fd> and checks (same inode, same owner). Nothing is named
//             in /dev/shm, so a rank that dies leaves no shm object behind.
//   import  = dup of the received memfd (posix_fd), only of this runtime's own memfds ("mori-symm"), of this uid,
//             at least the requested size; the fabric blob's object as above
//   reserve = mmap(PROT_NONE), map = mmap(MAP_FIXED | MAP_SHARED), access = mprotect
//   unmap   = re-reserve the range (PROT_NONE), release = close, free = munmap of the reservation
// clang-format on
//
// Rules kept from the GPU API: a mapping of an imported handle sees the exporter's bytes; releasing a handle
// that is still mapped keeps the memory until the last unmap (a mapping holds its own reference); freeing a
// reservation that still has mappings is an error, not a crash.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <map>
#include <mutex>

#include "mori/symm/base/error.hpp"
#include "mori/symm/platform/runtime.hpp"

namespace mori::symm {
namespace {

constexpr std::size_t kHostGranularity = 64 * 1024;
constexpr char kMemfdName[] = "mori-symm";
constexpr char kMemfdLink[] = "/memfd:mori-symm ";  // the /proc/self/fd link of kMemfdName's objects
constexpr char kFabricMagic[8] = {'M', 'O', 'R', 'I', 'F', 'A', 'B', '2'};

struct FabricWire {  // the blob's layout
  char magic[8];
  std::int32_t pid;
  std::int32_t fd;
  std::uint64_t inode;
  std::uint64_t dev;
  std::uint64_t size;
};
static_assert(sizeof(FabricWire) <= sizeof(FabricBlob::bytes));

[[noreturn]] void host_error(const char* call, const char* file, int line, const char* name,
                             const std::string& detail) {
  throw ApiError(call, file, line, name, detail);
}
#define HOST_FAIL(call, name, detail) host_error(call, __FILE__, __LINE__, name, detail)

struct Alloc {
  int fd = -1;
  std::size_t size = 0;
  bool fabric = false;  // created with the fabric handle type: exportable as a blob
};

struct Mapping {
  std::size_t size = 0;
  int fd = -1;  // the mapping's own reference, for retain(); closed on unmap
};

struct HostEvent {
  std::chrono::steady_clock::time_point t;
  bool recorded = false;
};

class HostRuntime final : public Runtime {
 public:
  Platform platform() const noexcept override { return Platform::host; }
  std::string driver_version() override { return "none"; }
  std::string runtime_version() override { return "host-shm/1"; }
  int device_count() override { return 1; }

  DeviceInfo device_info(int device) override {
    check_device(device);
    DeviceInfo d;
    d.index = 0;
    d.name = "host (POSIX shared memory)";
    d.arch = "host";
    d.pci_bus_id = "none";
    d.multiprocessors = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
    d.warp_size = 1;
    d.memory_bytes = static_cast<std::uint64_t>(sysconf(_SC_PHYS_PAGES)) *
                     static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
    d.vmm_supported = true;
    d.posix_fd_attribute = true;
    d.fabric_attribute = true;
    d.uncached_supported = false;
    d.uncached_note = "not on this platform (host memory is always cached)";
    return d;
  }

  void set_device(int device) override { check_device(device); }
  int current_device() const noexcept override { return 0; }

  std::size_t granularity(int device, HandleType, bool) override {
    check_device(device);
    return kHostGranularity;
  }

  PhysHandle mem_create(int device, std::size_t size, HandleType type, bool uncached) override {
    check_device(device);
    if (uncached) HOST_FAIL("mem_create", "NOT_SUPPORTED", "uncached memory is not on the host platform");
    if (size == 0 || size % kHostGranularity != 0)
      HOST_FAIL("mem_create", "INVALID_VALUE", "size must be a non-zero multiple of the granularity");
    Alloc a;
    a.size = size;
    a.fabric = type == HandleType::fabric;
    a.fd = memfd_create(kMemfdName, MFD_CLOEXEC);
    MORI_CHECK_POSIX(a.fd);
    if (ftruncate(a.fd, static_cast<off_t>(size)) == -1) {
      int err = errno;
      close_alloc(a);
      throw ApiError("ftruncate(fd, size)", __FILE__, __LINE__, errno_name(err));
    }
    return add(std::move(a));
  }

  int export_fd(PhysHandle h) override {
    std::lock_guard lk(mu_);
    const Alloc& a = get(h);
    int fd = fcntl(a.fd, F_DUPFD_CLOEXEC, 0);
    if (fd < 0) throw ApiError("fcntl(F_DUPFD_CLOEXEC)", __FILE__, __LINE__, errno_name(errno));
    return fd;
  }

  FabricBlob export_fabric(PhysHandle h) override {
    std::lock_guard lk(mu_);
    const Alloc& a = get(h);
    if (!a.fabric)
      HOST_FAIL("export_fabric", "INVALID_VALUE", "allocation was not created with the fabric handle type");
    struct stat st {};
    MORI_CHECK_POSIX(fstat(a.fd, &st));
    FabricWire w{};
    std::memcpy(w.magic, kFabricMagic, sizeof(kFabricMagic));
    w.pid = static_cast<std::int32_t>(getpid());
    w.fd = a.fd;
    w.inode = st.st_ino;
    w.dev = st.st_dev;
    w.size = a.size;
    FabricBlob b;
    std::memcpy(b.bytes.data(), &w, sizeof(w));
    return b;
  }

  PhysHandle import_fd(int fd, std::size_t size) override {
    struct stat st {};
    MORI_CHECK_POSIX(fstat(fd, &st));
    // Only a memory object this runtime made, of this uid, and at least as large as asked: a sender whose
    // credentials passed the fd exchange's checks (root can forge them) cannot get another file of its choice
    // mapped and written into (docs/reliability.md, "Hostile senders").
    const std::string refused = foreign_object(fd, st, size);
    if (!refused.empty()) HOST_FAIL("import_fd", "NOT_PERMITTED", refused);
    Alloc a;
    a.size = static_cast<std::size_t>(st.st_size);
    a.fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    MORI_CHECK_POSIX(a.fd);
    return add(std::move(a));
  }

  PhysHandle import_fabric(const FabricBlob& blob) override {
    FabricWire w{};
    std::memcpy(&w, blob.bytes.data(), sizeof(w));
    if (std::memcmp(w.magic, kFabricMagic, sizeof(kFabricMagic)) != 0 || w.pid <= 0 || w.fd < 0)
      HOST_FAIL("import_fabric", "INVALID_VALUE", "blob is not a host fabric handle");
    const std::string path = "/proc/" + std::to_string(w.pid) + "/fd/" + std::to_string(w.fd);
    Alloc a;
    a.fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (a.fd < 0)
      throw ApiError("open(" + path + ")", __FILE__, __LINE__, errno_name(errno), "exporter gone?");
    struct stat st {};
    // The fd must still be the exported memory object: same inode, ours, and the size it claims.
    if (fstat(a.fd, &st) == -1 || st.st_ino != w.inode || st.st_dev != w.dev || st.st_uid != geteuid() ||
        static_cast<std::uint64_t>(st.st_size) != w.size) {
      close_alloc(a);
      HOST_FAIL("import_fabric", "NOT_PERMITTED", "blob names another object than the one exported");
    }
    a.size = static_cast<std::size_t>(st.st_size);
    return add(std::move(a));
  }

  PhysHandle retain(void* addr) override {
    std::unique_lock lk(mu_);
    auto it = mappings_.find(reinterpret_cast<std::uintptr_t>(addr));
    if (it == mappings_.end()) HOST_FAIL("retain", "INVALID_VALUE", "no mapping starts at this address");
    Alloc a;
    a.fd = fcntl(it->second.fd, F_DUPFD_CLOEXEC, 0);
    MORI_CHECK_POSIX(a.fd);
    a.size = it->second.size;
    lk.unlock();
    return add(std::move(a));
  }

  void* reserve(std::size_t size, std::size_t alignment) override {
    if (size == 0 || size % kHostGranularity != 0)
      HOST_FAIL("reserve", "INVALID_VALUE", "size must be a non-zero multiple of the granularity");
    if (alignment == 0) alignment = kHostGranularity;
    // Over-reserve, then trim to the alignment, as the GPU drivers do.
    const std::size_t total = size + alignment;
    void* raw = mmap(nullptr, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (raw == MAP_FAILED) throw ApiError("mmap(PROT_NONE)", __FILE__, __LINE__, errno_name(errno));
    auto base = reinterpret_cast<std::uintptr_t>(raw);
    std::uintptr_t aligned = (base + alignment - 1) / alignment * alignment;
    if (aligned > base) munmap(raw, aligned - base);
    const std::uintptr_t end = base + total, want_end = aligned + size;
    if (end > want_end) munmap(reinterpret_cast<void*>(want_end), end - want_end);
    std::lock_guard lk(mu_);
    reservations_[aligned] = size;
    return reinterpret_cast<void*>(aligned);
  }

  void map(void* va, std::size_t size, PhysHandle h) override {
    std::lock_guard lk(mu_);
    const Alloc& a = get(h);
    auto v = reinterpret_cast<std::uintptr_t>(va);
    if (!inside_reservation(v, size))
      HOST_FAIL("map", "INVALID_VALUE", "range is not inside one reservation");
    if (size > a.size) HOST_FAIL("map", "INVALID_VALUE", "range is larger than the allocation");
    if (overlaps_mapping(v, size)) HOST_FAIL("map", "INVALID_VALUE", "range is already mapped");
    Mapping m;
    m.size = size;
    m.fd = fcntl(a.fd, F_DUPFD_CLOEXEC, 0);
    MORI_CHECK_POSIX(m.fd);
    void* p = mmap(va, size, PROT_NONE, MAP_SHARED | MAP_FIXED, a.fd, 0);
    if (p == MAP_FAILED) {
      int err = errno;
      close(m.fd);
      throw ApiError("mmap(MAP_FIXED | MAP_SHARED)", __FILE__, __LINE__, errno_name(err));
    }
    mappings_[v] = m;
  }

  void set_access(void* va, std::size_t size, int device) override {
    check_device(device);
    std::lock_guard lk(mu_);
    auto v = reinterpret_cast<std::uintptr_t>(va);
    if (!covered_by_mappings(v, size)) HOST_FAIL("set_access", "INVALID_VALUE", "range is not fully mapped");
    MORI_CHECK_POSIX(mprotect(va, size, PROT_READ | PROT_WRITE));
  }

  void unmap(void* va, std::size_t size) override {
    std::lock_guard lk(mu_);
    auto v = reinterpret_cast<std::uintptr_t>(va);
    // The range must consist of whole mappings (one unmap may cover several, as the CUDA driver allows).
    std::vector<std::uintptr_t> hit;
    std::uintptr_t cursor = v;
    for (auto it = mappings_.lower_bound(v); it != mappings_.end() && it->first < v + size; ++it) {
      if (it->first != cursor || it->first + it->second.size > v + size)
        HOST_FAIL("unmap", "INVALID_VALUE", "range does not consist of whole mappings");
      cursor += it->second.size;
      hit.push_back(it->first);
    }
    if (hit.empty() || cursor != v + size) HOST_FAIL("unmap", "INVALID_VALUE", "range is not mapped");
    void* p = mmap(va, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    if (p == MAP_FAILED) throw ApiError("mmap(PROT_NONE, MAP_FIXED)", __FILE__, __LINE__, errno_name(errno));
    for (auto k : hit) {
      close(mappings_[k].fd);
      mappings_.erase(k);
    }
  }

  void release(PhysHandle h) override {
    Alloc a;
    {
      std::lock_guard lk(mu_);
      auto it = allocs_.find(h);
      if (it == allocs_.end()) HOST_FAIL("release", "INVALID_VALUE", "unknown or already released handle");
      a = std::move(it->second);
      allocs_.erase(it);
    }
    close_alloc(a);
  }

  void free_reservation(void* va, std::size_t size) override {
    std::lock_guard lk(mu_);
    auto v = reinterpret_cast<std::uintptr_t>(va);
    auto it = reservations_.find(v);
    if (it == reservations_.end() || it->second != size)
      HOST_FAIL("free_reservation", "INVALID_VALUE", "not a reservation of exactly this address and size");
    if (overlaps_mapping(v, size))
      HOST_FAIL("free_reservation", "IN_USE", "the reservation still has mappings: unmap them first");
    MORI_CHECK_POSIX(munmap(va, size));
    reservations_.erase(it);
  }

  LiveResources live_resources() const override {
    std::lock_guard lk(mu_);
    return {static_cast<std::int64_t>(allocs_.size()), static_cast<std::int64_t>(mappings_.size()),
            static_cast<std::int64_t>(reservations_.size())};
  }

  void* device_alloc(std::size_t size) override {
    void* p = nullptr;
    if (posix_memalign(&p, 256, size ? size : 1) != 0) HOST_FAIL("posix_memalign", "OUT_OF_MEMORY", "");
    return p;
  }
  void device_free(void* p) noexcept override { std::free(p); }
  void copy_to_device(void* dst, const void* src, std::size_t n) override { std::memcpy(dst, src, n); }
  void copy_to_host(void* dst, const void* src, std::size_t n) override { std::memcpy(dst, src, n); }
  void copy_async(void* dst, const void* src, std::size_t n, Stream) override { std::memcpy(dst, src, n); }
  void memset_async(void* dst, std::uint8_t v, std::size_t n, Stream) override { std::memset(dst, v, n); }
  MemInfo mem_info() override {
    const auto page = static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
    return {static_cast<std::uint64_t>(sysconf(_SC_AVPHYS_PAGES)) * page,
            static_cast<std::uint64_t>(sysconf(_SC_PHYS_PAGES)) * page};
  }

  // The host "device" is synchronous: streams are tokens, events read the clock when recorded.
  Stream stream_create() override { return reinterpret_cast<Stream>(++stream_counter_); }
  void stream_destroy(Stream) noexcept override {}
  void stream_sync(Stream) override {}
  void stream_wait_event(Stream, Event) override {}  // host work runs in call order
  void device_sync() override {}
  Event event_create() override { return new HostEvent(); }
  void event_destroy(Event e) noexcept override { delete static_cast<HostEvent*>(e); }
  void event_record(Event e, Stream) override {
    auto* ev = static_cast<HostEvent*>(e);
    ev->t = std::chrono::steady_clock::now();
    ev->recorded = true;
  }
  void event_sync(Event) override {}
  float event_elapsed_ms(Event start, Event end) override {
    auto* a = static_cast<HostEvent*>(start);
    auto* b = static_cast<HostEvent*>(end);
    if (!a->recorded || !b->recorded) HOST_FAIL("event_elapsed_ms", "NOT_READY", "event was never recorded");
    return std::chrono::duration<float, std::milli>(b->t - a->t).count();
  }

  Module module_load(const std::vector<char>&) override { unsupported("module_load"); }
  void module_unload(Module) noexcept override {}
  Function module_function(Module, const std::string&) override { unsupported("module_function"); }
  void launch(Function, Dim3, Dim3, std::size_t, Stream, void**) override { unsupported("launch"); }
  void capture_begin(Stream) override { unsupported("capture_begin"); }
  GraphExec capture_end(Stream) override { unsupported("capture_end"); }
  void graph_launch(GraphExec, Stream) override { unsupported("graph_launch"); }
  void graph_destroy(GraphExec) noexcept override {}
  std::string clear_error() noexcept override { return {}; }

  ~HostRuntime() override {
    // Best effort: whatever the caller leaked is returned here, never thrown.
    for (auto& [va, m] : mappings_) close(m.fd);
    for (auto& [h, a] : allocs_) close_alloc(a);
  }

 private:
  [[noreturn]] static void unsupported(const char* call) {
    throw ApiError(call, __FILE__, __LINE__, "NOT_SUPPORTED", "the host runtime runs no GPU kernels");
  }
  static void check_device(int device) {
    if (device != 0) HOST_FAIL("device", "INVALID_DEVICE", "the host runtime has one device, 0");
  }
  // Why fd (fstat: st) is not one of this runtime's memory objects of at least `size` bytes; "" if it is. A
  // memfd answers F_GET_SEALS (a plain file does not) and its link reads "/memfd:<name> (deleted)".
  static std::string foreign_object(int fd, const struct stat& st, std::size_t size) {
    char link[128] = {};
    const std::string self = "/proc/self/fd/" + std::to_string(fd);
    const ssize_t n = readlink(self.c_str(), link, sizeof(link) - 1);
    const std::string target = n > 0 ? std::string(link, static_cast<std::size_t>(n)) : "?";
    if (!S_ISREG(st.st_mode) || fcntl(fd, F_GET_SEALS) == -1 || target.rfind(kMemfdLink, 0) != 0)
      return "the descriptor is not a memory object of this runtime (it is " + target + ")";
    if (st.st_uid != geteuid())
      return "the memory object belongs to uid " + std::to_string(st.st_uid) + ", not to this job's";
    if (st.st_size < 0 || static_cast<std::uint64_t>(st.st_size) < size)
      return "the memory object holds " + std::to_string(st.st_size) + " bytes, fewer than the " +
             std::to_string(size) + " requested";
    return {};
  }
  static void close_alloc(Alloc& a) noexcept {
    if (a.fd >= 0) close(a.fd);
    a.fd = -1;
  }
  PhysHandle add(Alloc a) {
    std::lock_guard lk(mu_);
    PhysHandle h = ++next_handle_;
    allocs_[h] = std::move(a);
    return h;
  }
  const Alloc& get(PhysHandle h) const {
    auto it = allocs_.find(h);
    if (it == allocs_.end()) HOST_FAIL("handle", "INVALID_VALUE", "unknown or already released handle");
    return it->second;
  }
  bool inside_reservation(std::uintptr_t v, std::size_t size) const {
    auto it = reservations_.upper_bound(v);
    if (it == reservations_.begin()) return false;
    --it;
    return v >= it->first && v + size <= it->first + it->second;
  }
  bool overlaps_mapping(std::uintptr_t v, std::size_t size) const {
    auto it = mappings_.upper_bound(v);
    if (it != mappings_.begin()) {
      auto prev = std::prev(it);
      if (prev->first + prev->second.size > v) return true;
    }
    return it != mappings_.end() && it->first < v + size;
  }
  bool covered_by_mappings(std::uintptr_t v, std::size_t size) const {
    std::uintptr_t cursor = v;
    auto it = mappings_.upper_bound(v);
    if (it != mappings_.begin()) --it;
    for (; it != mappings_.end() && cursor < v + size; ++it) {
      if (it->first > cursor) return false;
      if (it->first + it->second.size > cursor) cursor = it->first + it->second.size;
    }
    return cursor >= v + size;
  }

  mutable std::mutex mu_;
  std::map<PhysHandle, Alloc> allocs_;
  std::map<std::uintptr_t, Mapping> mappings_;
  std::map<std::uintptr_t, std::size_t> reservations_;
  PhysHandle next_handle_ = 0;
  std::uintptr_t stream_counter_ = 0;
};

}  // namespace

std::unique_ptr<Runtime> make_host_runtime() {
  return std::make_unique<HostRuntime>();
}

}  // namespace mori::symm
