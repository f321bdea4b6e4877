// SPDX-License-Identifier: MIT
// The project's own HIP-on-CUDA mapping: exactly the HIP calls gpu_runtime.cpp uses, with HIP's names and
// argument conventions, over the CUDA driver API loaded at run time (cuda_driver.hpp). HIP's own NVIDIA
// headers do not compile against CUDA 13, so this replaces them for the NVIDIA build.
#pragma once

#include <cstdint>
#include <cstring>

#include "cuda_driver.hpp"

using hipError_t = int;  // holds a CUresult
constexpr hipError_t hipSuccess = 0;
using hipDevice_t = CUdevice;
using hipStream_t = CUstream;
using hipEvent_t = CUevent;
using hipModule_t = CUmodule;
using hipFunction_t = CUfunction;
using hipGraph_t = CUgraph;
using hipGraphExec_t = CUgraphExec;
using hipMemGenericAllocationHandle_t = CUmemGenericAllocationHandle;
using hipMemAllocationHandleType = CUmemAllocationHandleType;
using hipDeviceAttribute_t = CUdevice_attribute;

constexpr hipMemAllocationHandleType hipMemHandleTypePosixFileDescriptor =
    CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
constexpr hipMemAllocationHandleType hipMemHandleTypeFabric = CU_MEM_HANDLE_TYPE_FABRIC;
constexpr hipDeviceAttribute_t hipDeviceAttributeMultiprocessorCount =
    CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT;
constexpr hipDeviceAttribute_t hipDeviceAttributeWarpSize = CU_DEVICE_ATTRIBUTE_WARP_SIZE;
constexpr hipDeviceAttribute_t hipDeviceAttributeMemoryClockRate = CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE;
// The rate of the counter the kernels' clock64() reads: on NVIDIA the SM clock (its peak).
constexpr hipDeviceAttribute_t hipDeviceAttributeClockInstructionRate = CU_DEVICE_ATTRIBUTE_CLOCK_RATE;
constexpr hipDeviceAttribute_t hipDeviceAttributeMemoryBusWidth = CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH;
constexpr hipDeviceAttribute_t hipDeviceAttributeL2CacheSize = CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE;
constexpr hipDeviceAttribute_t hipDeviceAttributeComputeCapabilityMajor =
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR;
constexpr hipDeviceAttribute_t hipDeviceAttributeComputeCapabilityMinor =
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR;
constexpr hipDeviceAttribute_t hipDeviceAttributeVirtualMemoryManagementSupported =
    CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED;
constexpr hipDeviceAttribute_t hipDeviceAttributeHandleTypePosixFdSupported =
    CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED;
constexpr hipDeviceAttribute_t hipDeviceAttributeHandleTypeFabricSupported =
    CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED;

enum hipMemAllocationType { hipMemAllocationTypePinned = CU_MEM_ALLOCATION_TYPE_PINNED };
enum hipMemLocationType { hipMemLocationTypeDevice = CU_MEM_LOCATION_TYPE_DEVICE };
enum hipMemAccessFlags { hipMemAccessFlagsProtReadWrite = CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
enum hipMemAllocationGranularity_flags {
  hipMemAllocationGranularityMinimum = CU_MEM_ALLOC_GRANULARITY_MINIMUM,
  hipMemAllocationGranularityRecommended = CU_MEM_ALLOC_GRANULARITY_RECOMMENDED
};
enum hipMemcpyKind { hipMemcpyDeviceToDevice = 3 };

struct hipMemLocation {
  hipMemLocationType type;
  int id;
};
struct hipMemAllocationProp {
  hipMemAllocationType type;
  hipMemAllocationHandleType requestedHandleType;
  hipMemLocation location;
  void* win32HandleMetaData;
  struct {
    unsigned char compressionType;
    unsigned char gpuDirectRDMACapable;
    unsigned short usage;
  } allocFlags;
};
struct hipMemAccessDesc {
  hipMemLocation location;
  hipMemAccessFlags flags;
};

namespace mori::symm::hip_on_cuda {
inline const cuda::Driver& D() {
  return cuda::driver();
}
inline CUmemAllocationProp to_cu(const hipMemAllocationProp* p) {
  CUmemAllocationProp c;
  std::memset(&c, 0, sizeof(c));
  c.type = static_cast<CUmemAllocationType>(p->type);
  c.requestedHandleTypes = p->requestedHandleType;
  c.location.type = static_cast<CUmemLocationType>(p->location.type);
  c.location.id = p->location.id;
  c.allocFlags.gpuDirectRDMACapable = p->allocFlags.gpuDirectRDMACapable;
  return c;
}
inline CUdeviceptr dptr(const void* p) {
  return reinterpret_cast<CUdeviceptr>(p);
}
// The primary context of each device, retained on first use.
CUcontext primary_context(int device, hipError_t* err);
}  // namespace mori::symm::hip_on_cuda

namespace hoc = mori::symm::hip_on_cuda;

inline hipError_t hipInit(unsigned flags) {
  return hoc::D().cuInit(flags);
}
inline hipError_t hipDriverGetVersion(int* v) {
  return hoc::D().cuDriverGetVersion(v);
}
inline const char* hipGetErrorName(hipError_t e) {
  const char* s = nullptr;
  if (hoc::D().cuGetErrorName && hoc::D().cuGetErrorName(static_cast<CUresult>(e), &s) == CUDA_SUCCESS && s)
    return s;
  return "CUDA_ERROR_UNKNOWN_CODE";
}
inline hipError_t hipGetDeviceCount(int* n) {
  return hoc::D().cuDeviceGetCount(n);
}
inline hipError_t hipDeviceGet(hipDevice_t* d, int ordinal) {
  return hoc::D().cuDeviceGet(d, ordinal);
}
inline hipError_t hipDeviceGetName(char* name, int len, hipDevice_t d) {
  return hoc::D().cuDeviceGetName(name, len, d);
}
inline hipError_t hipDeviceGetAttribute(int* v, hipDeviceAttribute_t a, int dev) {
  return hoc::D().cuDeviceGetAttribute(v, a, dev);
}
inline hipError_t hipDeviceTotalMem(size_t* bytes, hipDevice_t d) {
  return hoc::D().cuDeviceTotalMem(bytes, d);
}
inline hipError_t hipDeviceGetPCIBusId(char* id, int len, int dev) {
  return hoc::D().cuDeviceGetPCIBusId(id, len, dev);
}
inline hipError_t hipSetDevice(int dev) {
  hipError_t err = hipSuccess;
  CUcontext ctx = hoc::primary_context(dev, &err);
  if (!ctx) return err;
  return hoc::D().cuCtxSetCurrent(ctx);
}
inline hipError_t hipDeviceSynchronize() {
  return hoc::D().cuCtxSynchronize();
}

inline hipError_t hipMemGetAllocationGranularity(size_t* g, const hipMemAllocationProp* p,
                                                 hipMemAllocationGranularity_flags f) {
  CUmemAllocationProp c = hoc::to_cu(p);
  return hoc::D().cuMemGetAllocationGranularity(g, &c, static_cast<CUmemAllocationGranularity_flags>(f));
}
inline hipError_t hipMemCreate(hipMemGenericAllocationHandle_t* h, size_t size, const hipMemAllocationProp* p,
                               unsigned long long flags) {
  CUmemAllocationProp c = hoc::to_cu(p);
  return hoc::D().cuMemCreate(h, size, &c, flags);
}
inline hipError_t hipMemExportToShareableHandle(void* out, hipMemGenericAllocationHandle_t h,
                                                hipMemAllocationHandleType t, unsigned long long flags) {
  return hoc::D().cuMemExportToShareableHandle(out, h, t, flags);
}
inline hipError_t hipMemImportFromShareableHandle(hipMemGenericAllocationHandle_t* h, void* os_handle,
                                                  hipMemAllocationHandleType t) {
  return hoc::D().cuMemImportFromShareableHandle(h, os_handle, t);
}
inline hipError_t hipMemAddressReserve(void** ptr, size_t size, size_t align, void* addr,
                                       unsigned long long flags) {
  CUdeviceptr p = 0;
  hipError_t e = hoc::D().cuMemAddressReserve(&p, size, align, hoc::dptr(addr), flags);
  *ptr = reinterpret_cast<void*>(p);
  return e;
}
inline hipError_t hipMemMap(void* ptr, size_t size, size_t offset, hipMemGenericAllocationHandle_t h,
                            unsigned long long flags) {
  return hoc::D().cuMemMap(hoc::dptr(ptr), size, offset, h, flags);
}
inline hipError_t hipMemSetAccess(void* ptr, size_t size, const hipMemAccessDesc* desc, size_t count) {
  CUmemAccessDesc c[8];
  if (count > 8) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < count; ++i) {
    c[i].location.type = static_cast<CUmemLocationType>(desc[i].location.type);
    c[i].location.id = desc[i].location.id;
    c[i].flags = static_cast<CUmemAccess_flags>(desc[i].flags);
  }
  return hoc::D().cuMemSetAccess(hoc::dptr(ptr), size, c, count);
}
inline hipError_t hipMemUnmap(void* ptr, size_t size) {
  return hoc::D().cuMemUnmap(hoc::dptr(ptr), size);
}
inline hipError_t hipMemRelease(hipMemGenericAllocationHandle_t h) {
  return hoc::D().cuMemRelease(h);
}
inline hipError_t hipMemAddressFree(void* ptr, size_t size) {
  return hoc::D().cuMemAddressFree(hoc::dptr(ptr), size);
}
inline hipError_t hipMemRetainAllocationHandle(hipMemGenericAllocationHandle_t* h, void* addr) {
  return hoc::D().cuMemRetainAllocationHandle(h, addr);
}
inline hipError_t hipMalloc(void** p, size_t size) {
  CUdeviceptr d = 0;
  hipError_t e = hoc::D().cuMemAlloc(&d, size);
  *p = reinterpret_cast<void*>(d);
  return e;
}
inline hipError_t hipFree(void* p) {
  return hoc::D().cuMemFree(hoc::dptr(p));
}
inline hipError_t hipMemcpyHtoD(void* dst, void* src, size_t n) {
  return hoc::D().cuMemcpyHtoD(hoc::dptr(dst), src, n);
}
inline hipError_t hipMemcpyDtoH(void* dst, void* src, size_t n) {
  return hoc::D().cuMemcpyDtoH(dst, hoc::dptr(src), n);
}
inline hipError_t hipMemcpyAsync(void* dst, void* src, size_t n, hipMemcpyKind, hipStream_t s) {
  return hoc::D().cuMemcpyDtoDAsync(hoc::dptr(dst), hoc::dptr(src), n, s);
}
inline hipError_t hipMemsetD8Async(void* dst, unsigned char v, size_t n, hipStream_t s) {
  return hoc::D().cuMemsetD8Async(hoc::dptr(dst), v, n, s);
}
inline hipError_t hipMemGetInfo(size_t* free_b, size_t* total_b) {
  return hoc::D().cuMemGetInfo(free_b, total_b);
}

constexpr unsigned hipStreamNonBlocking = CU_STREAM_NON_BLOCKING;
inline hipError_t hipStreamCreateWithFlags(hipStream_t* s, unsigned flags) {
  return hoc::D().cuStreamCreate(s, flags);
}
inline hipError_t hipStreamDestroy(hipStream_t s) {
  return hoc::D().cuStreamDestroy(s);
}
inline hipError_t hipStreamSynchronize(hipStream_t s) {
  return hoc::D().cuStreamSynchronize(s);
}
inline hipError_t hipStreamWaitEvent(hipStream_t s, hipEvent_t e, unsigned flags) {
  return hoc::D().cuStreamWaitEvent(s, e, flags);
}
inline hipError_t hipEventCreate(hipEvent_t* e) {
  return hoc::D().cuEventCreate(e, CU_EVENT_DEFAULT);
}
inline hipError_t hipEventDestroy(hipEvent_t e) {
  return hoc::D().cuEventDestroy(e);
}
inline hipError_t hipEventRecord(hipEvent_t e, hipStream_t s) {
  return hoc::D().cuEventRecord(e, s);
}
inline hipError_t hipEventSynchronize(hipEvent_t e) {
  return hoc::D().cuEventSynchronize(e);
}
inline hipError_t hipEventElapsedTime(float* ms, hipEvent_t a, hipEvent_t b) {
  return hoc::D().cuEventElapsedTime(ms, a, b);
}
inline hipError_t hipModuleLoadData(hipModule_t* m, const void* image) {
  return hoc::D().cuModuleLoadData(m, image);
}
inline hipError_t hipModuleUnload(hipModule_t m) {
  return hoc::D().cuModuleUnload(m);
}
inline hipError_t hipModuleGetFunction(hipFunction_t* f, hipModule_t m, const char* name) {
  return hoc::D().cuModuleGetFunction(f, m, name);
}
inline hipError_t hipModuleOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, hipFunction_t f,
                                                                     int block_size, size_t shared_bytes) {
  return hoc::D().cuOccupancyMaxActiveBlocksPerMultiprocessor(blocks, f, block_size, shared_bytes);
}
inline hipError_t hipModuleLaunchKernel(hipFunction_t f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                        unsigned by, unsigned bz, unsigned shmem, hipStream_t s, void** args,
                                        void** extra) {
  return hoc::D().cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shmem, s, args, extra);
}
enum hipStreamCaptureMode { hipStreamCaptureModeThreadLocal = CU_STREAM_CAPTURE_MODE_THREAD_LOCAL };
inline hipError_t hipStreamBeginCapture(hipStream_t s, hipStreamCaptureMode mode) {
  return hoc::D().cuStreamBeginCapture(s, static_cast<CUstreamCaptureMode>(mode));
}
inline hipError_t hipStreamEndCapture(hipStream_t s, hipGraph_t* g) {
  return hoc::D().cuStreamEndCapture(s, g);
}
inline hipError_t hipGraphInstantiate(hipGraphExec_t* e, hipGraph_t g, void*, void*, size_t) {
  return hoc::D().cuGraphInstantiateWithFlags(e, g, 0);
}
inline hipError_t hipGraphLaunch(hipGraphExec_t e, hipStream_t s) {
  return hoc::D().cuGraphLaunch(e, s);
}
inline hipError_t hipGraphExecDestroy(hipGraphExec_t e) {
  return hoc::D().cuGraphExecDestroy(e);
}
inline hipError_t hipGraphDestroy(hipGraph_t g) {
  return hoc::D().cuGraphDestroy(g);
}
