// SPDX-License-Identifier: MIT
// The CUDA driver API, loaded at run time: dlopen("libcuda.so.1") + cuGetProcAddress. Nothing links against
// libcuda, so the tools start on machines without an NVIDIA driver and say so.
#pragma once

#include <cuda.h>

#include <string>

namespace mori::symm::cuda {

#define MORI_CUDA_DRIVER_CALLS(X)                                                                          \
  X(cuInit)                                                                                                \
  X(cuDriverGetVersion)                                                                                    \
  X(cuGetErrorName)                                                                                        \
  X(cuDeviceGetCount)                                                                                      \
  X(cuDeviceGet)                                                                                           \
  X(cuDeviceGetName)                                                                                       \
  X(cuDeviceGetAttribute) X(cuDeviceTotalMem) X(cuDeviceGetPCIBusId) X(cuDevicePrimaryCtxRetain)           \
      X(cuDevicePrimaryCtxRelease) X(cuCtxSetCurrent) X(cuCtxSynchronize) X(cuMemGetAllocationGranularity) \
          X(cuMemCreate) X(cuMemExportToShareableHandle) X(cuMemImportFromShareableHandle)                 \
              X(cuMemAddressReserve) X(cuMemMap) X(cuMemSetAccess) X(cuMemUnmap) X(cuMemRelease)           \
                  X(cuMemAddressFree) X(cuMemRetainAllocationHandle) X(cuMemAlloc) X(cuMemFree)            \
                      X(cuMemcpyHtoD) X(cuMemcpyDtoH) X(cuMemcpyDtoDAsync) X(cuMemsetD8Async)              \
                          X(cuMemGetInfo) X(cuStreamCreate) X(cuStreamDestroy) X(cuStreamSynchronize)      \
                              X(cuStreamWaitEvent) X(cuEventCreate) X(cuEventDestroy) X(cuEventRecord)     \
                                  X(cuEventSynchronize) X(cuEventElapsedTime) X(cuModuleLoadData)          \
                                      X(cuModuleUnload) X(cuModuleGetFunction) X(cuFuncSetAttribute)       \
                                          X(cuLaunchKernel) X(cuLaunchKernelEx) X(cuStreamBeginCapture)    \
                                              X(cuStreamEndCapture) X(cuGraphInstantiateWithFlags)         \
                                                  X(cuGraphLaunch) X(cuGraphExecDestroy) X(cuGraphDestroy) \
                                                      X(cuOccupancyMaxActiveBlocksPerMultiprocessor)

struct Driver {
#define MORI_CUDA_DECLARE(name) decltype(&::name) name = nullptr;
  MORI_CUDA_DRIVER_CALLS(MORI_CUDA_DECLARE)
#undef MORI_CUDA_DECLARE
};

// Loads the driver once (thread-safe). Returns null and sets *why when there is no usable driver.
const Driver* load_driver(std::string* why);
// The loaded driver; only valid after load_driver succeeded.
const Driver& driver();

}  // namespace mori::symm::cuda
