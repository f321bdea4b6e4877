// The CUDA driver API, loaded at run time: dlopen("libcuda.so.1") + cuGetProcAddress. Nothing links against
// libcuda, so the tools start on machines without an NVIDIA driver and say so.
#pragma once

#include <cuda.h>

#include <string>

namespace mori::symm::cuda {

#define MORI_CUDA_DRIVER_CALLS(X)                                                                            \
  X(cuInit)                                                                                                  \
  X(cuDriverGetVersion)                                                                                      \
  X(cuGetErrorName)                                                                                          \
  X(cuDeviceGetCount)                                                                                        \
  X(cuDeviceGet) X(cuDeviceGetName) X(cuDeviceGetAttribute) X(cuDeviceTotalMem) X(cuDeviceGetPCIBusId)       \
      X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease) X(cuCtxSetCurrent) X(cuCtxSynchronize)        \
          X(cuMemGetAllocationGranularity) X(cuMemCreate) X(cuMemExportToShareableHandle)                    \
              X(cuMemImportFromShareableHandle) X(cuMemAddressReserve) X(cuMemMap) X(cuMemSetAccess)         \
                  X(cuMemUnmap) X(cuMemRelease) X(cuMemAddressFree) X(cuMemRetainAllocationHandle)           \
                      X(cuMemAlloc) X(cuMemFree) X(cuMemcpyHtoD) X(cuMemcpyDtoH) X(cuMemcpyDtoDAsync)        \
                          X(cuMemsetD8Async) X(cuMemGetInfo) X(cuStreamCreate) X(cuStreamDestroy)            \
                              X(cuStreamSynchronize) X(cuStreamWaitEvent) X(cuEventCreate) X(cuEventDestroy) \
                                  X(cuEventRecord) X(cuEventSynchronize) X(cuEventElapsedTime)               \
                                      X(cuModuleLoadData) X(cuModuleUnload) X(cuModuleGetFunction)           \
                                          X(cuFuncSetAttribute) X(cuLaunchKernel) X(cuLaunchKernelEx)        \
                                              X(cuStreamBeginCapture) X(cuStreamEndCapture)                  \
                                                  X(cuGraphInstantiateWithFlags) X(cuGraphLaunch)            \
                                                      X(cuGraphExecDestroy) X(cuGraphDestroy)

struct Driver {
#define MORI_CUDA_DECLARE(name) decltype(&::name) name = nullptr;
  MORI_CUDA_DRIVER_CALLS(MORI_CUDA_DECLARE)
#undef MORI_CUDA_DECLARE
};

// The NVIDIA libraries keep a cache under $HOME/.nv and create that path, a missing home included, when they
// start. The tools never create a home (docs/reliability.md), and their kernels are cubins the driver need
// not cache: where HOME is set but is not a folder and CUDA_CACHE_PATH is unset, the driver's cache is turned
// off (CUDA_CACHE_DISABLE=1, unless the user set it) before either library is loaded.
void keep_caches_out_of_missing_home() noexcept;

// Loads the driver once (thread-safe). Returns null and sets *why when there is no usable driver.
const Driver* load_driver(std::string* why);
// The loaded driver; only valid after load_driver succeeded.
const Driver& driver();

}  // namespace mori::symm::cuda
