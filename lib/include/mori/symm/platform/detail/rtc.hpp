// SPDX-License-Identifier: MIT
// A run-time compiler (NVRTC or hiprtc), loaded with dlopen. Private to the JIT.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace mori::symm::detail {

struct RtcOutput {
  std::vector<char> image;                     // cubin (NVIDIA) or code object (AMD)
  std::map<std::string, std::string> lowered;  // name expression -> mangled symbol
  std::string log;
};

class RuntimeCompiler {
 public:
  virtual ~RuntimeCompiler() = default;
  virtual std::string name() const = 0;     // "nvrtc" | "hiprtc"
  virtual std::string version() const = 0;  // "13.0"
  virtual std::string library() const = 0;  // the path that was loaded
  // What tells this toolchain from another of the same reported version (hiprtc says 9.0 in ROCm 5.7, 6.4 and
  // 7.2 alike): the resolved path and build id (or content hash) of the compiler's library and of the
  // libraries it compiles with (comgr), and a hash of the device libraries it links. Part of the JIT cache
  // key (lib/README.md, JIT cache). Computed once, on first use.
  virtual std::string identity() const = 0;
  // The arch option as this compiler wants it ("--gpu-architecture=sm_90", "--offload-arch=gfx942").
  virtual std::string arch_option(const std::string& arch) const = 0;
  // Throws ApiError with the compiler's error name and log.
  // headers: (include name, text) pairs the source may include; the compiler opens no file for them.
  virtual RtcOutput compile(const std::string& source, const std::string& file_name,
                            const std::vector<std::pair<std::string, std::string>>& headers,
                            const std::vector<std::string>& name_expressions,
                            const std::vector<std::string>& options) const = 0;
};

// NVRTC: the loader path first, then $CUDA_HOME/lib64, then /usr/local/cuda/lib64. Null + *why if none.
std::unique_ptr<RuntimeCompiler> load_nvrtc(std::string* why);
// hiprtc: the loader path first, then $ROCM_PATH/lib, then /opt/rocm/lib.
std::unique_ptr<RuntimeCompiler> load_hiprtc(std::string* why);

// dlopen of the first name that loads: each bare name through the loader path, then under each prefix.
void* open_first(const std::vector<std::string>& names, const std::vector<std::string>& prefixes,
                 std::string* path, std::string* why);

}  // namespace mori::symm::detail
