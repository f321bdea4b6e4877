// SPDX-License-Identifier: MIT
#include "mori/symm/platform/runtime.hpp"
#include "mori/symm/base/env.hpp"

#include <sys/stat.h>

#include <cstdlib>

#include "mori/symm/base/error.hpp"

namespace mori::symm {

void prepare_process_environment() noexcept {
  const char* home = env_read("HOME");
  struct stat st {};
  if (!home || !*home || (stat(home, &st) == 0 && S_ISDIR(st.st_mode))) return;
  // The NVIDIA libraries keep a cache under $HOME/.nv and create that path when they start; the kernels are
  // cubins the driver need not cache.
  if (const char* cache = env_read("CUDA_CACHE_PATH"); !(cache && *cache))
    setenv("CUDA_CACHE_DISABLE", "1", 0);
  // MPI_Init discovers the topology with hwloc, whose OpenCL component loads every OpenCL driver; one of them
  // (pocl, found on the GPU machine) makes its kernel cache under $HOME/.cache. The topology MPI needs has no
  // OpenCL devices in it.
  if (!env_read("HWLOC_COMPONENTS")) setenv("HWLOC_COMPONENTS", "-opencl", 0);
}

const char* to_string(Platform p) noexcept {
  switch (p) {
    case Platform::host:
      return "host";
    case Platform::cuda:
      return "cuda";
    case Platform::amd:
      return "amd";
  }
  return "?";
}

const char* to_string(HandleType t) noexcept {
  return t == HandleType::fabric ? "fabric" : "posix_fd";
}

HandleType parse_handle_type(const std::string& s) {
  if (s == "posix_fd") return HandleType::posix_fd;
  if (s == "fabric") return HandleType::fabric;
  throw UsageError("--handle-type: unknown value '" + s + "' (accepted: auto, posix_fd, fabric)");
}

std::optional<HandleType> parse_handle_choice(const std::string& s) {
  if (s == "auto") return std::nullopt;
  return parse_handle_type(s);
}

const char* to_string(const std::optional<HandleType>& t) noexcept {
  return t ? to_string(*t) : "auto";
}

Backend parse_backend(const std::string& s) {
  if (s == "auto") return Backend::auto_select;
  if (s == "gpu") return Backend::gpu;
  if (s == "host") return Backend::host;
  throw UsageError("--backend: unknown value '" + s + "' (accepted: auto, gpu, host)");
}

std::unique_ptr<Runtime> select_runtime(Backend b, std::string* notice) {
  if (b == Backend::host) return make_host_runtime();
  std::string why;
  auto gpu = make_gpu_runtime(&why);
  if (gpu) return gpu;
  if (b == Backend::gpu) throw ApiError("select_runtime(gpu)", __FILE__, __LINE__, "NO_GPU_RUNTIME", why);
  if (notice) *notice = "no GPU runtime (" + why + "); using the host runtime";
  return make_host_runtime();
}

}  // namespace mori::symm
