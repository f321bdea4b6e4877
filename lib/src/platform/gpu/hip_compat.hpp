// SPDX-License-Identifier: MIT
// One header that absorbs the differences between the HIP platforms this project builds for:
// ROCm's HIP (AMD: ROCm 5.7 and newer to run; CI builds against Debian experimental's ROCm 7.2 in a
// forky chroot and compiles the kernels with it, and checks the old-HIP side against HIP 5.7's headers,
// docs/amd.md) and the project's own HIP-on-CUDA mapping (NVIDIA).
#pragma once

#include <cstdint>
#include <string>

#if defined(MORI_GPU_CUDA)
#include "hip_on_cuda.hpp"
#else
#include <hip/hip_runtime_api.h>
#include <hip/hip_version.h>
#endif

namespace mori::symm::compat {

#if defined(MORI_GPU_CUDA)
constexpr bool kIsCuda = true;
constexpr const char* kPlatformName = "cuda";
#else
constexpr bool kIsCuda = false;
constexpr const char* kPlatformName = "amd";
#endif

// Loads what the platform loads at run time. False with *why when unusable.
inline bool load(std::string* why) {
#if defined(MORI_GPU_CUDA)
  return cuda::load_driver(why) != nullptr;
#else
  (void)why;
  return true;
#endif
}

// Fabric handles: HIP_FABRIC_API-less ROCm lacks the enum value; the driver value is 0x8 everywhere, and the
// handle is a 64-byte blob.
#if defined(MORI_GPU_CUDA) || defined(HIP_FABRIC_API)
constexpr hipMemAllocationHandleType kFabricHandleType = hipMemHandleTypeFabric;
#else
constexpr hipMemAllocationHandleType kFabricHandleType = static_cast<hipMemAllocationHandleType>(0x8);
#endif
constexpr std::size_t kFabricBlobBytes = 64;

// hipMemImportFromShareableHandle takes the fd by value from ROCm 7.1 (as CUDA does), by pointer before. The
// declaration is `void*` in both, so no feature check can tell them apart: this one difference needs the
// version.
inline hipError_t import_fd(hipMemGenericAllocationHandle_t* h, int fd) {
#if defined(MORI_GPU_CUDA) || (defined(HIP_VERSION) && HIP_VERSION >= 70100000)
  return hipMemImportFromShareableHandle(h, reinterpret_cast<void*>(static_cast<std::intptr_t>(fd)),
                                         hipMemHandleTypePosixFileDescriptor);
#else
  return hipMemImportFromShareableHandle(h, &fd, hipMemHandleTypePosixFileDescriptor);
#endif
}

// A launch that may begin while the stream's previous kernel still runs (CUDA's programmatic dependent
// launch): the kernel itself waits for its predecessor's completion and memory (mori_grid_wait_previous in
// kernels/prelude.hip) before it touches anything, so only the launch latency overlaps. AMD: a plain launch.
inline hipError_t launch_overlapping(hipFunction_t f, unsigned gx, unsigned bx, unsigned shmem, hipStream_t s,
                                     void** args) {
#if defined(MORI_GPU_CUDA)
  CUlaunchAttribute attr{};
  attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
  attr.value.programmaticStreamSerializationAllowed = 1;
  CUlaunchConfig cfg{};
  cfg.gridDimX = gx, cfg.gridDimY = 1, cfg.gridDimZ = 1;
  cfg.blockDimX = bx, cfg.blockDimY = 1, cfg.blockDimZ = 1;
  cfg.sharedMemBytes = shmem;
  cfg.hStream = s;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  return cuda::driver().cuLaunchKernelEx(&cfg, f, args, nullptr);
#else
  return hipModuleLaunchKernel(f, gx, 1, 1, bx, 1, 1, shmem, s, args, nullptr);
#endif
}

// More than 48 KiB of dynamic shared memory per block: CUDA launches it only after the function opted in
// (cuFuncSetAttribute MAX_DYNAMIC_SHARED_SIZE_BYTES, up to the device's per-block opt-in limit). AMD has no
// opt-in: a launch beyond the LDS fails by itself.
inline hipError_t allow_dynamic_shared(hipFunction_t f, std::size_t bytes) {
#if defined(MORI_GPU_CUDA)
  return cuda::driver().cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                           static_cast<int>(bytes));
#else
  (void)f;
  (void)bytes;
  return hipSuccess;
#endif
}

// The driver declined an overlapping launch (an older driver, a device without it): plain launches do
// instead.
inline bool overlap_refused(hipError_t e) {
#if defined(MORI_GPU_CUDA)
  return e == CUDA_ERROR_NOT_SUPPORTED || e == CUDA_ERROR_INVALID_VALUE;
#else
  (void)e;
  return false;
#endif
}

// The driver's own claims about the handle types; AMD has no such attributes (-1 = no attribute).
inline int attribute_posix_fd(int dev) {
#if defined(MORI_GPU_CUDA)
  int v = 0;
  return hipDeviceGetAttribute(&v, hipDeviceAttributeHandleTypePosixFdSupported, dev) == hipSuccess ? v : -1;
#else
  (void)dev;
  return -1;
#endif
}
inline int attribute_fabric(int dev) {
#if defined(MORI_GPU_CUDA)
  int v = 0;
  return hipDeviceGetAttribute(&v, hipDeviceAttributeHandleTypeFabricSupported, dev) == hipSuccess ? v : -1;
#else
  (void)dev;
  return -1;
#endif
}

// The driver's claim that the device supports virtual memory management (hipMemCreate and friends): 1 or 0.
// ROCm 5.2 (Debian 12) has no such attribute and no working VMM: 0 there. A feature check on the enumerator.
// (The HIP-on-CUDA mapping declares it as a constant, not as an enumerator.)
#if defined(MORI_GPU_CUDA)
inline hipError_t attribute_vmm(int* v, int dev) {
  return hipDeviceGetAttribute(v, hipDeviceAttributeVirtualMemoryManagementSupported, dev);
}
#else
template <class A = hipDeviceAttribute_t>
inline hipError_t attribute_vmm(int* v, int dev) {
  if constexpr (requires { A::hipDeviceAttributeVirtualMemoryManagementSupported; }) {
    return hipDeviceGetAttribute(v, A::hipDeviceAttributeVirtualMemoryManagementSupported, dev);
  } else {
    (void)dev;
    *v = 0;
    return hipSuccess;
  }
}
#endif

// The rate of wall_clock64() in kHz (AMD; docs/amd.md): the attribute's value, 0 where this HIP has no such
// attribute. A feature check on the enumerator. NVIDIA has none (the kernels read %globaltimer, already in
// ns): 0 there.
#if defined(MORI_GPU_CUDA)
inline hipError_t attribute_wall_clock_khz(int* v, int dev) {
  (void)dev;
  *v = 0;
  return hipSuccess;
}
#else
template <class A = hipDeviceAttribute_t>
inline hipError_t attribute_wall_clock_khz(int* v, int dev) {
  if constexpr (requires { A::hipDeviceAttributeWallClockRate; }) {
    return hipDeviceGetAttribute(v, A::hipDeviceAttributeWallClockRate, dev);
  } else {
    (void)dev;
    *v = 0;
    return hipSuccess;
  }
}
#endif

// "sm_90" on NVIDIA, "gfx942" on AMD.
inline std::string arch(int dev) {
#if defined(MORI_GPU_CUDA)
  int major = 0, minor = 0;
  hipDeviceGetAttribute(&major, hipDeviceAttributeComputeCapabilityMajor, dev);
  hipDeviceGetAttribute(&minor, hipDeviceAttributeComputeCapabilityMinor, dev);
  return "sm_" + std::to_string(major) + std::to_string(minor);
#else
  hipDeviceProp_t p{};
  if (hipGetDeviceProperties(&p, dev) != hipSuccess) return "unknown";
  std::string s = p.gcnArchName;
  return s.substr(0, s.find(':'));  // "gfx942:sramecc+:xnack-" -> "gfx942"
#endif
}

inline std::string runtime_version() {
#if defined(MORI_GPU_CUDA)
  return "hip-on-cuda (driver API, no CUDA runtime)";
#else
  int v = 0;
  if (hipRuntimeGetVersion(&v) != hipSuccess) return "hip (version unknown)";
  return "hip " + std::to_string(v);
#endif
}

// Uncached (fine-grained) VMM memory: hipMemAllocationTypeUncached, where the HIP headers declare it. A
// feature check, not a version check: Debian's HIP 6.4.3 lacks the value that AMD's ROCm 6.2 has
// (docs/amd.md); CUDA has none. The enumerator is looked up through a template parameter, so a header without
// it is no error.
template <class E = hipMemAllocationType>
constexpr bool kHasUncachedType = requires {
  E::hipMemAllocationTypeUncached;
};

// The uncached allocation type in *t; false (and *t untouched) where this HIP has none.
template <class E = hipMemAllocationType>
inline bool uncached_type(E* t) {
  if constexpr (kHasUncachedType<E>) {
    *t = E::hipMemAllocationTypeUncached;
    return true;
  } else {
    (void)t;
    return false;
  }
}

inline bool uncached_supported(std::string* note) {
  if constexpr (kIsCuda) {
    *note = "not on this platform (CUDA VMM has no uncached allocation type)";
    return false;
  } else if constexpr (kHasUncachedType<>) {
    *note = "hipMemAllocationTypeUncached";
    return true;
  } else {
    *note = "not in this HIP (its headers have no hipMemAllocationTypeUncached; AMD's ROCm has it from 6.2)";
    return false;
  }
}

}  // namespace mori::symm::compat
