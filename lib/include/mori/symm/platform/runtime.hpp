// SPDX-License-Identifier: MIT
// The Runtime interface: the only door from host code to a GPU (or to the host runtime that stands in for
// one).
//
// Semantics follow the HIP virtual-memory API: a physical allocation (PhysHandle) is created, exported as a
// shareable handle, imported by other processes, and mapped into reserved virtual address ranges. Every call
// either succeeds or throws ApiError naming the call, the file:line, the API's error name and the rank.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace mori::symm {

enum class Platform { host, cuda, amd };
const char* to_string(Platform p) noexcept;

enum class HandleType : int { posix_fd = 1, fabric = 2 };
const char* to_string(HandleType t) noexcept;
// "posix_fd" | "fabric"; throws UsageError otherwise.
HandleType parse_handle_type(const std::string& s);
// --handle-type: "auto" (empty: chosen by trying, choose_handle_type) | "posix_fd" | "fabric"; throws
// UsageError otherwise. Parsed once, where the option is read.
std::optional<HandleType> parse_handle_choice(const std::string& s);
// The name of a choice: "auto" for none.
const char* to_string(const std::optional<HandleType>& t) noexcept;

// An in-band shareable handle: 64 opaque bytes that ride an allgather.
struct FabricBlob {
  std::array<std::uint8_t, 64> bytes{};
};

using PhysHandle = std::uint64_t;  // the platform's generic allocation handle, opaque
using Stream = void*;
using Event = void*;
using Module = void*;
using Function = void*;
using GraphExec = void*;

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

struct DeviceInfo {
  int index = 0;
  std::string name;
  std::string arch;  // "sm_90", "gfx942", "host"
  std::string pci_bus_id;
  int multiprocessors = 0;
  int warp_size = 0;
  std::uint64_t memory_bytes = 0;
  std::uint64_t l2_bytes = 0;          // 0 = unknown
  std::uint64_t memory_clock_khz = 0;  // peak memory clock; 0 = unknown
  std::uint64_t clock64_khz = 0;       // rate of the kernels' clock64() (NVIDIA: peak SM clock); 0 = unknown
  int memory_bus_bits = 0;             // 0 = unknown
  // AMD: rate of wall_clock64() (hipDeviceAttributeWallClockRate, kHz); 0 = unknown / not used
  std::uint64_t wall_clock_khz = 0;
  bool vmm_supported = false;
  bool posix_fd_attribute = false;  // what the driver claims, not what works
  bool fabric_attribute = false;
  bool uncached_supported = false;
  std::string uncached_note;  // e.g. "not on this platform"
};

// The AMD kernels' clock (docs/amd.md, `%globaltimer`): a reported wall-clock rate is used only from 1 MHz to
// 10 GHz; anything else (0 included) is unknown, and the kernels keep the prelude's 100 MHz.
inline constexpr std::uint64_t kWallClockMinKhz = 1000;
inline constexpr std::uint64_t kWallClockMaxKhz = 10000000;
inline constexpr std::uint64_t kWallClockDefaultKhz = 100000;
constexpr bool wall_clock_rate_plausible(std::uint64_t khz) noexcept {
  return khz >= kWallClockMinKhz && khz <= kWallClockMaxKhz;
}

struct MemInfo {
  std::uint64_t free_bytes = 0;
  std::uint64_t total_bytes = 0;
};

// Resources the runtime holds for this process; the teardown tool and the soak tests compare them.
struct LiveResources {
  std::int64_t handles = 0;       // physical handles created or imported and not released
  std::int64_t mappings = 0;      // mapped ranges
  std::int64_t reservations = 0;  // reserved VA ranges
};

class Runtime {
 public:
  virtual ~Runtime() = default;
  Runtime() = default;
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  virtual Platform platform() const noexcept = 0;
  virtual std::string driver_version() = 0;
  virtual std::string runtime_version() = 0;

  virtual int device_count() = 0;
  virtual DeviceInfo device_info(int device) = 0;
  // Makes `device` current for this thread (primary context on CUDA).
  virtual void set_device(int device) = 0;
  virtual int current_device() const noexcept = 0;

  // --- virtual memory
  // ---------------------------------------------------------------------------------------
  virtual std::size_t granularity(int device, HandleType type, bool recommended) = 0;
  virtual PhysHandle mem_create(int device, std::size_t size, HandleType type, bool uncached = false) = 0;
  // A new fd owned by the caller.
  virtual int export_fd(PhysHandle h) = 0;
  virtual FabricBlob export_fabric(PhysHandle h) = 0;
  // The fd stays the caller's to close. `size`: the allocation's size the importer expects (the rendezvous
  // request's). The host runtime refuses, with an ApiError (NOT_PERMITTED), a descriptor that is not one of
  // its own memory objects (a memfd it made, of this uid) or is smaller than `size` (docs/reliability.md,
  // "Hostile senders"); the GPU driver checks its own handles.
  virtual PhysHandle import_fd(int fd, std::size_t size) = 0;
  virtual PhysHandle import_fabric(const FabricBlob& blob) = 0;
  // A second handle to the allocation mapped at addr (hipMemRetainAllocationHandle).
  virtual PhysHandle retain(void* addr) = 0;
  virtual void* reserve(std::size_t size, std::size_t alignment) = 0;
  virtual void map(void* va, std::size_t size, PhysHandle h) = 0;
  virtual void set_access(void* va, std::size_t size, int device) = 0;
  virtual void unmap(void* va, std::size_t size) = 0;
  virtual void release(PhysHandle h) = 0;
  virtual void free_reservation(void* va, std::size_t size) = 0;
  virtual LiveResources live_resources() const = 0;

  // --- plain memory and copies
  // ------------------------------------------------------------------------------
  virtual void* device_alloc(std::size_t size) = 0;
  virtual void device_free(void* p) noexcept = 0;
  virtual void copy_to_device(void* dst, const void* src, std::size_t n) = 0;
  virtual void copy_to_host(void* dst, const void* src, std::size_t n) = 0;
  virtual void copy_async(void* dst, const void* src, std::size_t n, Stream s) = 0;  // device to device
  virtual void memset_async(void* dst, std::uint8_t value, std::size_t n, Stream s) = 0;
  virtual MemInfo mem_info() = 0;

  // --- streams, events, sync
  // ----------------------------------------------------------------------------------
  virtual Stream stream_create() = 0;
  virtual void stream_destroy(Stream s) noexcept = 0;
  virtual void stream_sync(Stream s) = 0;
  // Work enqueued on s after this call waits for e (fork/join between streams; captured into graphs too).
  virtual void stream_wait_event(Stream s, Event e) = 0;
  virtual void device_sync() = 0;
  virtual Event event_create() = 0;
  virtual void event_destroy(Event e) noexcept = 0;
  virtual void event_record(Event e, Stream s) = 0;
  virtual void event_sync(Event e) = 0;
  virtual float event_elapsed_ms(Event start, Event end) = 0;

  // --- modules, launches, graphs (GPU runtimes; the host runtime throws)
  // ----------------------------------------
  virtual Module module_load(const std::vector<char>& image) = 0;
  virtual void module_unload(Module m) noexcept = 0;
  virtual Function module_function(Module m, const std::string& name) = 0;
  virtual void launch(Function f, Dim3 grid, Dim3 block, std::size_t shared_bytes, Stream s, void** args) = 0;
  // How many blocks of `block` threads of f (no dynamic shared memory) one multiprocessor holds at once. The
  // base answer, for runtimes that do not know, is the one a launchable block always gets: 1.
  virtual int resident_blocks_per_multiprocessor(Function f, unsigned block) {
    (void)f;
    (void)block;
    return 1;
  }
  // A one-dimensional launch that may start while the stream's previous kernel still runs, for kernels that
  // wait for their predecessor themselves (mori_grid_wait_previous, kernels/prelude.hip); a plain launch
  // where the platform has no such launch. Returns whether it overlapped.
  virtual bool launch_overlapping(Function f, unsigned grid, unsigned block, Stream s, void** args) {
    launch(f, {grid}, {block}, 0, s, args);
    return false;
  }
  virtual void capture_begin(Stream s) = 0;
  virtual GraphExec capture_end(Stream s) = 0;
  virtual void graph_launch(GraphExec g, Stream s) = 0;
  virtual void graph_destroy(GraphExec g) noexcept = 0;

  // Clears a sticky error left by a failed probe step; returns its name or "" if none.
  virtual std::string clear_error() noexcept = 0;
};

enum class Backend { auto_select, gpu, host };
// "auto" | "gpu" | "host"; throws UsageError otherwise.
Backend parse_backend(const std::string& s);

// The host runtime over POSIX shared memory (lib/README.md, Platform).
std::unique_ptr<Runtime> make_host_runtime();

// The GPU runtime of this build, or nullptr with the reason in *why_not (no driver, no device, not built).
std::unique_ptr<Runtime> make_gpu_runtime(std::string* why_not);
// Before MPI or any GPU library starts (MPI's own components may initialise the GPU driver), and again where
// a GPU library is loaded (idempotent): where HOME is set but is not a folder, keeps what those libraries
// load from creating it, since the tools never create a home (docs/environment.md):
// CUDA_CACHE_DISABLE=1 unless CUDA_CACHE_PATH is set, HWLOC_COMPONENTS=-opencl; a value the user set is kept.
void prepare_process_environment() noexcept;

// auto: GPU where a runtime and a device exist, else host with *notice saying why. gpu: throws ApiError if
// none. host: the host runtime.
std::unique_ptr<Runtime> select_runtime(Backend b, std::string* notice);

}  // namespace mori::symm
