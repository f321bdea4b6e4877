// SPDX-License-Identifier: MIT
#include "cuda_driver.hpp"

#include <dlfcn.h>

#include <mutex>

#include "mori/symm/platform/runtime.hpp"

namespace mori::symm::cuda {
namespace {

constexpr int kDriverAbi = 12000;
Driver g_driver;
std::string g_error;
bool g_ok = false;

void load_once() {
  prepare_process_environment();
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* e = dlerror();
    g_error = std::string("no NVIDIA driver: dlopen(libcuda.so.1) failed: ") + (e ? e : "unknown");
    return;
  }
  using GetProc = CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
  auto get_proc = reinterpret_cast<GetProc>(dlsym(lib, "cuGetProcAddress_v2"));
  if (!get_proc) {
    g_error = "the NVIDIA driver is too old: no cuGetProcAddress_v2 (CUDA 12 or newer needed)";
    return;
  }
  // Each entry point is asked for in the CUDA 12.0 ABI, which is what the un-suffixed declarations in cuda.h
  // describe. Asking for CUDA_VERSION (13000) would return newer ABIs whose signatures differ from those
  // declarations: cuCtxSynchronize at 13000 is cuCtxSynchronize_v2(CUcontext).
#define MORI_CUDA_LOAD(name)                                                                        \
  {                                                                                                 \
    void* fn = nullptr;                                                                             \
    CUdriverProcAddressQueryResult q{};                                                             \
    if (get_proc(#name, &fn, kDriverAbi, CU_GET_PROC_ADDRESS_DEFAULT, &q) != CUDA_SUCCESS || !fn) { \
      g_error = "the NVIDIA driver lacks " #name " (a driver for CUDA 12.0 or newer is needed)";    \
      return;                                                                                       \
    }                                                                                               \
    g_driver.name = reinterpret_cast<decltype(g_driver.name)>(fn);                                  \
  }
  MORI_CUDA_DRIVER_CALLS(MORI_CUDA_LOAD)
#undef MORI_CUDA_LOAD
  g_ok = true;
}

}  // namespace

const Driver* load_driver(std::string* why) {
  static std::once_flag once;
  std::call_once(once, load_once);
  if (!g_ok) {
    if (why) *why = g_error;
    return nullptr;
  }
  return &g_driver;
}

const Driver& driver() {
  return g_driver;
}

}  // namespace mori::symm::cuda
