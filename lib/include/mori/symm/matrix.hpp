// Peer matrix (mori-probe --matrix): for ordered pairs of ranks of one load/store team, through a real
// symmetric window: write and read bandwidth at a large size, and one-way put-with-signal latency (p50 of
// round trips / 2), with pointer-array and LSA addressing. GPU: kernels/matrix.hip; host runtime: the same
// algorithm in C++ with atomics.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "mori/symm/json.hpp"
#include "mori/symm/runtime.hpp"

namespace mori::symm {

class Bootstrap;

// The kernel that writes local -> peer for the write bandwidth (docs/mori-probe.md "Peer matrix"). auto: the
// default (today plain, 4 blocks per multiprocessor, 4 loads in flight); plain / stream: 16-byte loads, plain
// or streaming stores; bulk / bulk-tma: tiles staged in shared memory (by loads / by a bulk copy) and written
// with bulk copies (NVIDIA sm_90 and newer, else plain); all: every variant, each against the copy engine.
enum class WriteKernel { auto_select, plain, stream, bulk, bulk_tma, all };

struct WriteKernelOptions {
  WriteKernel kernel = WriteKernel::auto_select;
  int blocks = 0;         // > 0: this many blocks
  int blocks_per_sm = 0;  // > 0: this many per multiprocessor; both 0: the kernel's default
  int unroll = 0;         // plain, stream: 16-byte loads in flight per thread, 4, 8 or 16 (0: 4)
  int tile_kib = 0;       // bulk, bulk-tma: KiB per staging buffer, 4, 8, 16, 32 or 64 (0: 16)
};

// "auto" | "plain" | "stream" | "bulk" | "bulk-tma" | "all"; throws UsageError naming --write-kernel.
WriteKernel parse_write_kernel(const std::string& s);
const char* to_string(WriteKernel k) noexcept;
// --write-blocks: "auto", a count "N" (1..65535) or "Nx", N per multiprocessor (1x..64x), into o.
void parse_write_blocks(const std::string& s, WriteKernelOptions& o);
// The values and their combinations (--write-unroll for plain and stream, --write-tile-kib for the bulk
// kernels; auto and all take both); throws UsageError naming the option.
void validate_write_kernel(const WriteKernelOptions& o);

struct MatrixOptions {
  std::size_t bytes = 64u << 20;  // per bandwidth transfer
  int iterations = 5;             // timed transfers per direction (median)
  int rounds = 1000;              // ping-pong round trips
  int pairs = 0;                  // 0 = every ordered pair, else a fixed sample of that many
  WriteKernelOptions write;       // the write kernel
};

// The ordered pairs (src, dst) of one team that the matrix measures: all, or `sample` of them chosen by a
// fixed seed (the same on every rank), sorted.
std::vector<std::pair<int, int>> matrix_pairs(const Bootstrap& boot, int sample);

// Collective. Returns {bytes, iterations, rounds, write_kernel (the request), writes_wrong, rows: [{src, dst,
// addressing, write_gbps, write_kernel (what wrote), write_verified, read_gbps, copy_engine_write_gbps (GPU:
// the copy engine's write of the same bytes, timed interleaved with the kernel's; else null),
// write_over_copy_engine, latency_us_p50, link_gbps[, link_reason][, write_variants (WriteKernel::all)]}]} on
// every rank. Each write is checked once against the source's pattern; writes_wrong counts those that left
// wrong bytes. A ping-pong that exceeded its bound leaves null values and status "timeout"; *timed_out is
// then true.
Json peer_matrix(Bootstrap& boot, Runtime& rt, int device, HandleType ht, const MatrixOptions& o,
                 bool* timed_out);

}  // namespace mori::symm
