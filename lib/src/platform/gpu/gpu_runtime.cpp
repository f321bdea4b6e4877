// SPDX-License-Identifier: MIT
// The GPU runtime, written once against the HIP API. On AMD it compiles against ROCm's headers; on NVIDIA
// against the project's HIP-on-CUDA mapping (hip_on_cuda.hpp). Platform differences live in hip_compat.hpp.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include "hip_compat.hpp"
#include "mori/symm/base/error.hpp"
#include "mori/symm/base/log.hpp"
#include "mori/symm/platform/runtime.hpp"

#define HIP_CHECK(expr)                                                                  \
  do {                                                                                   \
    hipError_t mori_e_ = (expr);                                                         \
    if (mori_e_ != hipSuccess)                                                           \
      throw ::mori::symm::ApiError(#expr, __FILE__, __LINE__, hipGetErrorName(mori_e_)); \
  } while (0)

// For destructors and release paths: log, never throw.
#define HIP_CHECK_NOEXCEPT(expr)                                                                         \
  do {                                                                                                   \
    hipError_t mori_e_ = (expr);                                                                         \
    if (mori_e_ != hipSuccess)                                                                           \
      spdlog::error("{} failed: {} at {}:{} on {}", #expr, hipGetErrorName(mori_e_), __FILE__, __LINE__, \
                    ::mori::symm::rank_tag());                                                           \
  } while (0)

#if defined(MORI_GPU_CUDA)
namespace mori::symm::hip_on_cuda {
CUcontext primary_context(int device, hipError_t* err) {
  static std::mutex mu;
  static std::map<int, CUcontext> ctxs;
  std::lock_guard lk(mu);
  auto it = ctxs.find(device);
  if (it != ctxs.end()) return it->second;
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  *err = D().cuDeviceGet(&dev, device);
  if (*err != CUDA_SUCCESS) return nullptr;
  *err = D().cuDevicePrimaryCtxRetain(&ctx, dev);
  if (*err != CUDA_SUCCESS) return nullptr;
  ctxs[device] = ctx;
  return ctx;
}
}  // namespace mori::symm::hip_on_cuda
#endif

namespace mori::symm {
namespace {

// Dynamic shared memory a block gets without asking; beyond it the function must opt in first (CUDA).
constexpr std::size_t kDefaultDynamicShared = 48 * 1024;

// VMM calls are serialised process-wide: ROCm's VMM paths race (mori #455/#476); on CUDA the lock is cheap.
std::mutex& vmm_mutex() {
  static std::mutex m;
  return m;
}

hipMemAllocationHandleType to_hip(HandleType t) {
  return t == HandleType::fabric ? compat::kFabricHandleType : hipMemHandleTypePosixFileDescriptor;
}

hipMemAllocationProp make_prop(int device, HandleType t, bool uncached) {
  hipMemAllocationProp p{};
  p.type = hipMemAllocationTypePinned;
  if (uncached) compat::uncached_type(&p.type);
  p.requestedHandleType = to_hip(t);
  p.location.type = hipMemLocationTypeDevice;
  p.location.id = device;
  return p;
}

// device_info runs many times a job: the warning about a device's wall-clock rate is given once per device.
void warn_wall_clock_once(int device, const std::string& what) {
  static std::mutex mu;
  static std::vector<int> warned;
  std::lock_guard lk(mu);
  if (std::find(warned.begin(), warned.end(), device) != warned.end()) return;
  warned.push_back(device);
  spdlog::warn("device {}: {}; the kernels assume the wall clock runs at {} kHz (docs/amd.md) on {}", device,
               what, kWallClockDefaultKhz, rank_tag());
}

class GpuRuntime final : public Runtime {
 public:
  GpuRuntime() { HIP_CHECK(hipGetDeviceCount(&count_)); }

  Platform platform() const noexcept override { return compat::kIsCuda ? Platform::cuda : Platform::amd; }
  std::string driver_version() override {
    int v = 0;
    HIP_CHECK(hipDriverGetVersion(&v));
    return std::to_string(v);
  }
  std::string runtime_version() override { return compat::runtime_version(); }
  int device_count() override { return count_; }

  DeviceInfo device_info(int device) override {
    check_device(device);
    DeviceInfo d;
    d.index = device;
    char name[256] = {};
    hipDevice_t dev{};
    HIP_CHECK(hipDeviceGet(&dev, device));
    HIP_CHECK(hipDeviceGetName(name, sizeof(name) - 1, dev));
    d.name = name;
    d.arch = compat::arch(device);
    char bus[64] = {};
    HIP_CHECK(hipDeviceGetPCIBusId(bus, sizeof(bus) - 1, device));
    d.pci_bus_id = bus;
    HIP_CHECK(hipDeviceGetAttribute(&d.multiprocessors, hipDeviceAttributeMultiprocessorCount, device));
    HIP_CHECK(hipDeviceGetAttribute(&d.warp_size, hipDeviceAttributeWarpSize, device));
    int clock_khz = 0, bus_bits = 0, l2 = 0, clock64_khz = 0;
    HIP_CHECK(hipDeviceGetAttribute(&clock_khz, hipDeviceAttributeMemoryClockRate, device));
    // Only the test-only fault a2a.slow-kernel reads it: a runtime without the attribute leaves it unknown
    // (0).
    if (hipDeviceGetAttribute(&clock64_khz, hipDeviceAttributeClockInstructionRate, device) != hipSuccess)
      clock64_khz = 0;
    d.clock64_khz = static_cast<std::uint64_t>(std::max(clock64_khz, 0));
    // The kernels' clock on AMD (docs/amd.md, `%globaltimer`): a rate that is 0 or absurd is unknown, and the
    // kernels keep the prelude's 100 MHz.
    if constexpr (!compat::kIsCuda) {
      int wall_khz = 0;
      const hipError_t e = compat::attribute_wall_clock_khz(&wall_khz, device);
      const auto khz = static_cast<std::uint64_t>(std::max(wall_khz, 0));
      if (e != hipSuccess) {
        warn_wall_clock_once(device,
                             std::string("hipDeviceGetAttribute(hipDeviceAttributeWallClockRate) failed: ") +
                                 hipGetErrorName(e) + " at " + __FILE__ + ":" + std::to_string(__LINE__));
      } else if (!wall_clock_rate_plausible(khz)) {
        warn_wall_clock_once(device, "hipDeviceAttributeWallClockRate is " + std::to_string(wall_khz) +
                                         " kHz, outside [" + std::to_string(kWallClockMinKhz) + ", " +
                                         std::to_string(kWallClockMaxKhz) + "] kHz");
      } else {
        d.wall_clock_khz = khz;
      }
    }
    HIP_CHECK(hipDeviceGetAttribute(&bus_bits, hipDeviceAttributeMemoryBusWidth, device));
    HIP_CHECK(hipDeviceGetAttribute(&l2, hipDeviceAttributeL2CacheSize, device));
    d.memory_clock_khz = static_cast<std::uint64_t>(std::max(clock_khz, 0));
    d.memory_bus_bits = std::max(bus_bits, 0);
    d.l2_bytes = static_cast<std::uint64_t>(std::max(l2, 0));
    size_t total = 0;
    HIP_CHECK(hipDeviceTotalMem(&total, dev));
    d.memory_bytes = total;
    int vmm = 0;
    HIP_CHECK(compat::attribute_vmm(&vmm, device));
    d.vmm_supported = vmm != 0;
    d.posix_fd_attribute = compat::attribute_posix_fd(device) == 1;
    d.fabric_attribute = compat::attribute_fabric(device) == 1;
    d.uncached_supported = compat::uncached_supported(&d.uncached_note);
    return d;
  }

  void set_device(int device) override {
    check_device(device);
    HIP_CHECK(hipSetDevice(device));
    current_ = device;
  }
  int current_device() const noexcept override { return current_; }

  std::size_t granularity(int device, HandleType type, bool recommended) override {
    auto prop = make_prop(device, type, false);
    size_t g = 0;
    HIP_CHECK(hipMemGetAllocationGranularity(
        &g, &prop,
        recommended ? hipMemAllocationGranularityRecommended : hipMemAllocationGranularityMinimum));
    return g;
  }

  PhysHandle mem_create(int device, std::size_t size, HandleType type, bool uncached) override {
    auto prop = make_prop(device, type, uncached);
    hipMemGenericAllocationHandle_t h{};
    std::lock_guard lk(vmm_mutex());
    HIP_CHECK(hipMemCreate(&h, size, &prop, 0));
    ++live_.handles;
    return to_phys(h);
  }

  int export_fd(PhysHandle h) override {
    int fd = -1;
    std::lock_guard lk(vmm_mutex());
    HIP_CHECK(hipMemExportToShareableHandle(&fd, from_phys(h), hipMemHandleTypePosixFileDescriptor, 0));
    return fd;
  }

  FabricBlob export_fabric(PhysHandle h) override {
    FabricBlob b;
    static_assert(sizeof(b.bytes) == compat::kFabricBlobBytes);
    std::lock_guard lk(vmm_mutex());
    HIP_CHECK(hipMemExportToShareableHandle(b.bytes.data(), from_phys(h), compat::kFabricHandleType, 0));
    return b;
  }

  PhysHandle import_fd(int fd, std::size_t) override {
    hipMemGenericAllocationHandle_t h{};
    std::lock_guard lk(vmm_mutex());
    HIP_CHECK(compat::import_fd(&h, fd));
    ++live_.handles;
    return to_phys(h);
  }

  PhysHandle import_fabric(const FabricBlob& blob) override {
    hipMemGenericAllocationHandle_t h{};
    FabricBlob copy = blob;
    std::lock_guard lk(vmm_mutex());
    HIP_CHECK(hipMemImportFromShareableHandle(&h, copy.bytes.data(), compat::kFabricHandleType));
    ++live_.handles;
    return to_phys(h);
  }

  PhysHandle retain(void* addr) override {
    hipMemGenericAllocationHandle_t h{};
    std::lock_guard lk(vmm_mutex());
    HIP_CHECK(hipMemRetainAllocationHandle(&h, addr));
    ++live_.handles;
    return to_phys(h);
  }

  void* reserve(std::size_t size, std::size_t alignment) override {
    void* p = nullptr;
    std::lock_guard lk(vmm_mutex());
    HIP_CHECK(hipMemAddressReserve(&p, size, alignment, nullptr, 0));
    ++live_.reservations;
    return p;
  }

  void map(void* va, std::size_t size, PhysHandle h) override {
    std::lock_guard lk(vmm_mutex());
    HIP_CHECK(hipMemMap(va, size, 0, from_phys(h), 0));
    mapped_[reinterpret_cast<std::uintptr_t>(va)] = size;
    ++live_.mappings;
  }

  void set_access(void* va, std::size_t size, int device) override {
    hipMemAccessDesc d{};
    d.location.type = hipMemLocationTypeDevice;
    d.location.id = device;
    d.flags = hipMemAccessFlagsProtReadWrite;
    std::lock_guard lk(vmm_mutex());
    HIP_CHECK(hipMemSetAccess(va, size, &d, 1));
  }

  void unmap(void* va, std::size_t size) override {
    std::lock_guard lk(vmm_mutex());
    HIP_CHECK(hipMemUnmap(va, size));
    // One unmap may cover several mappings (the driver allows it): count every mapping inside the range.
    const auto lo = reinterpret_cast<std::uintptr_t>(va);
    for (auto it = mapped_.lower_bound(lo); it != mapped_.end() && it->first < lo + size;) {
      it = mapped_.erase(it);
      --live_.mappings;
    }
  }

  void release(PhysHandle h) override {
    std::lock_guard lk(vmm_mutex());
    HIP_CHECK(hipMemRelease(from_phys(h)));
    --live_.handles;
  }

  void free_reservation(void* va, std::size_t size) override {
    std::lock_guard lk(vmm_mutex());
    HIP_CHECK(hipMemAddressFree(va, size));
    --live_.reservations;
  }

  LiveResources live_resources() const override { return live_; }

  void* device_alloc(std::size_t size) override {
    void* p = nullptr;
    HIP_CHECK(hipMalloc(&p, size));
    return p;
  }
  void device_free(void* p) noexcept override { HIP_CHECK_NOEXCEPT(hipFree(p)); }
  void copy_to_device(void* dst, const void* src, std::size_t n) override {
    HIP_CHECK(hipMemcpyHtoD(dst, const_cast<void*>(src), n));
  }
  void copy_to_host(void* dst, const void* src, std::size_t n) override {
    HIP_CHECK(hipMemcpyDtoH(dst, const_cast<void*>(src), n));
  }
  void copy_async(void* dst, const void* src, std::size_t n, Stream s) override {
    HIP_CHECK(
        hipMemcpyAsync(dst, const_cast<void*>(src), n, hipMemcpyDeviceToDevice, static_cast<hipStream_t>(s)));
  }
  void memset_async(void* dst, std::uint8_t v, std::size_t n, Stream s) override {
    HIP_CHECK(hipMemsetD8Async(dst, v, n, static_cast<hipStream_t>(s)));
  }
  MemInfo mem_info() override {
    size_t f = 0, t = 0;
    HIP_CHECK(hipMemGetInfo(&f, &t));
    return {f, t};
  }

  Stream stream_create() override {
    hipStream_t s{};
    HIP_CHECK(hipStreamCreateWithFlags(&s, hipStreamNonBlocking));
    return s;
  }
  void stream_destroy(Stream s) noexcept override {
    HIP_CHECK_NOEXCEPT(hipStreamDestroy(static_cast<hipStream_t>(s)));
  }
  void stream_sync(Stream s) override { HIP_CHECK(hipStreamSynchronize(static_cast<hipStream_t>(s))); }
  void stream_wait_event(Stream s, Event e) override {
    HIP_CHECK(hipStreamWaitEvent(static_cast<hipStream_t>(s), static_cast<hipEvent_t>(e), 0));
  }
  void device_sync() override { HIP_CHECK(hipDeviceSynchronize()); }
  Event event_create() override {
    hipEvent_t e{};
    HIP_CHECK(hipEventCreate(&e));
    return e;
  }
  void event_destroy(Event e) noexcept override {
    HIP_CHECK_NOEXCEPT(hipEventDestroy(static_cast<hipEvent_t>(e)));
  }
  void event_record(Event e, Stream s) override {
    HIP_CHECK(hipEventRecord(static_cast<hipEvent_t>(e), static_cast<hipStream_t>(s)));
  }
  void event_sync(Event e) override { HIP_CHECK(hipEventSynchronize(static_cast<hipEvent_t>(e))); }
  float event_elapsed_ms(Event a, Event b) override {
    float ms = 0;
    HIP_CHECK(hipEventElapsedTime(&ms, static_cast<hipEvent_t>(a), static_cast<hipEvent_t>(b)));
    return ms;
  }

  Module module_load(const std::vector<char>& image) override {
    hipModule_t m{};
    HIP_CHECK(hipModuleLoadData(&m, image.data()));
    return m;
  }
  void module_unload(Module m) noexcept override {
    HIP_CHECK_NOEXCEPT(hipModuleUnload(static_cast<hipModule_t>(m)));
  }
  Function module_function(Module m, const std::string& name) override {
    hipFunction_t f{};
    HIP_CHECK(hipModuleGetFunction(&f, static_cast<hipModule_t>(m), name.c_str()));
    return f;
  }
  void launch(Function f, Dim3 g, Dim3 b, std::size_t shmem, Stream s, void** args) override {
    if (shmem > kDefaultDynamicShared)
      HIP_CHECK(compat::allow_dynamic_shared(static_cast<hipFunction_t>(f), shmem));
    HIP_CHECK(hipModuleLaunchKernel(static_cast<hipFunction_t>(f), g.x, g.y, g.z, b.x, b.y, b.z,
                                    static_cast<unsigned>(shmem), static_cast<hipStream_t>(s), args,
                                    nullptr));
  }
  // A failed query answers 0 (the caller then launches plainly) and says so once: it decides a launch mode,
  // nothing that a run depends on.
  int resident_blocks_per_multiprocessor(Function f, unsigned block) override {
    int n = 0;
    const hipError_t e = hipModuleOccupancyMaxActiveBlocksPerMultiprocessor(&n, static_cast<hipFunction_t>(f),
                                                                            static_cast<int>(block), 0);
    if (e == hipSuccess) return n;
    if (!occupancy_warned_)
      spdlog::warn("cuOccupancyMaxActiveBlocksPerMultiprocessor failed ({}) at {}:{}: plain launches",
                   hipGetErrorName(e), __FILE__, __LINE__);
    occupancy_warned_ = true;
    return 0;
  }
  bool launch_overlapping(Function f, unsigned grid, unsigned block, Stream s, void** args) override {
    if (compat::kIsCuda && overlap_ok_) {
      const hipError_t e = compat::launch_overlapping(static_cast<hipFunction_t>(f), grid, block, 0,
                                                      static_cast<hipStream_t>(s), args);
      if (e == hipSuccess) return true;
      // Only a refusal falls back (during a stream capture the capture is then already invalid, and the plain
      // launch below reports that); any other error is the launch's own.
      if (!compat::overlap_refused(e))
        throw ApiError("cuLaunchKernelEx (programmatic)", __FILE__, __LINE__, hipGetErrorName(e));
      overlap_ok_ = false;
      spdlog::warn("programmatic launch refused ({}): plain launches from now on", hipGetErrorName(e));
    }
    launch(f, {grid}, {block}, 0, s, args);
    return false;
  }
  void capture_begin(Stream s) override {
    HIP_CHECK(hipStreamBeginCapture(static_cast<hipStream_t>(s), hipStreamCaptureModeThreadLocal));
  }
  GraphExec capture_end(Stream s) override {
    hipGraph_t g{};
    HIP_CHECK(hipStreamEndCapture(static_cast<hipStream_t>(s), &g));
    hipGraphExec_t e{};
    hipError_t err = hipGraphInstantiate(&e, g, nullptr, nullptr, 0);
    HIP_CHECK_NOEXCEPT(hipGraphDestroy(g));
    HIP_CHECK(err);
    return e;
  }
  void graph_launch(GraphExec g, Stream s) override {
    HIP_CHECK(hipGraphLaunch(static_cast<hipGraphExec_t>(g), static_cast<hipStream_t>(s)));
  }
  void graph_destroy(GraphExec g) noexcept override {
    HIP_CHECK_NOEXCEPT(hipGraphExecDestroy(static_cast<hipGraphExec_t>(g)));
  }

  std::string clear_error() noexcept override {
#if defined(MORI_GPU_CUDA)
    return {};  // the driver API keeps no per-thread last error; a failed call leaves nothing behind
#else
    hipError_t e = hipGetLastError();
    return e == hipSuccess ? std::string() : std::string(hipGetErrorName(e));
#endif
  }

 private:
  bool overlap_ok_ = true;  // programmatic launches work here (until the driver refuses one)
  bool occupancy_warned_ = false;
  void check_device(int device) const {
    if (device < 0 || device >= count_)
      throw UsageError("--device: " + std::to_string(device) + " is out of range (this node has " +
                       std::to_string(count_) + " device(s): 0.." + std::to_string(count_ - 1) + ")");
  }
  static PhysHandle to_phys(hipMemGenericAllocationHandle_t h) {
    static_assert(sizeof(h) <= sizeof(PhysHandle));
    PhysHandle p = 0;
    std::memcpy(&p, &h, sizeof(h));
    return p;
  }
  static hipMemGenericAllocationHandle_t from_phys(PhysHandle p) {
    hipMemGenericAllocationHandle_t h{};
    std::memcpy(&h, &p, sizeof(h));
    return h;
  }

  int count_ = 0;
  int current_ = 0;
  LiveResources live_;
  std::map<std::uintptr_t, std::size_t> mapped_;  // start -> size of every mapping made here
};

}  // namespace

std::unique_ptr<Runtime> make_gpu_runtime(std::string* why_not) {
  std::string why;
  if (!compat::load(&why)) {
    if (why_not) *why_not = why;
    return nullptr;
  }
  // "no AMD GPU (...)" / "no NVIDIA GPU (...)": the build's vendor first, then what the runtime said.
  const std::string none = std::string("no ") + (compat::kIsCuda ? "NVIDIA" : "AMD") + " GPU";
  hipError_t e = hipInit(0);
  if (e != hipSuccess) {
    if (why_not) *why_not = none + " (hipInit failed: " + hipGetErrorName(e) + ")";
    return nullptr;
  }
  int n = 0;
  e = hipGetDeviceCount(&n);
  if (e != hipSuccess || n == 0) {
    if (why_not)
      *why_not = e != hipSuccess ? none + " (hipGetDeviceCount failed: " + hipGetErrorName(e) + ")"
                                 : none + " (no device visible)";
    return nullptr;
  }
  return std::make_unique<GpuRuntime>();
}

}  // namespace mori::symm
