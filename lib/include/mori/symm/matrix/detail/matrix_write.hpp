// SPDX-License-Identifier: MIT
// The peer matrix's write kernels (docs/mori-probe.md "Peer matrix"): a request resolved for one source
// rank's device, the variants of --write-kernel all, and their launch (kernels/matrix.hip). Private to the
// matrix.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mori/symm/base/json.hpp"
#include "mori/symm/matrix/matrix.hpp"
#include "mori/symm/platform/runtime.hpp"

namespace mori::symm {
class KernelModule;
}

namespace mori::symm::detail {

using mori::symm::WriteChoice;  // matrix.hpp: carried in the rows
using mori::symm::WriteFallback;

// What a source rank's device offers.
struct WriteTarget {
  std::int32_t host = 0;             // the host runtime: every write is a memcpy
  std::int32_t bulk_copy = 0;        // arch_has_bulk_copy (jit.hpp)
  std::int32_t multiprocessors = 1;  // for "Nx" block counts
};

// The write kernel of every row (with WriteKernel::all: the auto one).
WriteChoice write_choice(const WriteKernelOptions& o, const WriteTarget& t);
// WriteKernel::all: every variant (kernels x blocks 1x, 2x, 4x x unroll 4, 8, 16 or tile 4, 8, 16 KiB; a
// dimension that o fixes is not swept), in a fixed order; otherwise none.
std::vector<WriteChoice> write_variants(const WriteKernelOptions& o, const WriteTarget& t);
// The request as given: {requested, blocks, unroll, tile_kib}.
Json request_json(const WriteKernelOptions& o);

// One write launch: o.bytes from `local` to the peer's slot (pointer array or LSA addressing).
struct WriteArgs {
  void* peers = nullptr;  // the device's pointer array
  char* lsa_base = nullptr;
  std::uint64_t stride = 0;
  int idx = 0;  // global rank (ptr) or team rank (lsa)
  int lsa = 0;
  void* local = nullptr;
  std::uint64_t bytes = 0;
};
void launch_write(Runtime& rt, const KernelModule& mod, const WriteChoice& c, WriteArgs a, Stream s);

// The source of every write: 64-bit words that depend on the rank and on their offset, so that a missing,
// misplaced or partial tile is seen. fill_pattern writes `bytes` (a multiple of 8) at dst; holds_pattern
// reads them back from src (any address the runtime copies from, a peer's slot included) and compares. Both
// go through a host buffer of at most 16 MiB.
void fill_pattern(Runtime& rt, void* dst, std::size_t bytes, int rank);
bool holds_pattern(Runtime& rt, const void* src, std::size_t bytes, int rank);

}  // namespace mori::symm::detail
