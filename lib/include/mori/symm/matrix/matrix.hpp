// SPDX-License-Identifier: MIT
// Peer matrix (mori-probe --matrix): for ordered pairs of ranks of one load/store team, through a real
// symmetric window: write and read bandwidth at a large size, and one-way put-with-signal latency (p50 of
// round trips / 2), with pointer-array and LSA addressing. GPU: kernels/matrix.hip; host runtime: the same
// algorithm in C++ with atomics.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "mori/symm/base/json.hpp"
#include "mori/symm/platform/runtime.hpp"

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

// Why a write kernel other than the one asked for ran.
enum class WriteFallback { none, host, no_bulk_copy };

// One write kernel as it runs on a source rank: decided once there, before it measures, and carried in the
// rows it measured.
struct WriteChoice {
  std::string
      variant;  // the request with its defaults filled in: "plain/4x/u4", "bulk-tma/2x/t16k", "stream/96/u8"
  WriteKernel requested = WriteKernel::auto_select;
  WriteKernel kernel = WriteKernel::plain;  // what runs: plain, stream, bulk or bulk_tma
  unsigned blocks = 0;                      // 0 on the host runtime
  unsigned threads = 0;                     // 0 on the host runtime
  int unroll = 0;                           // plain, stream; else 0
  std::uint32_t tile_bytes = 0;             // bulk, bulk_tma; else 0
  WriteFallback fallback = WriteFallback::none;
};

// A measured value, or why there is none (serialised as null with the reason beside it).
struct Measured {
  std::optional<double> value;
  std::string why_not;  // "" when there is a value

  static Measured of(double v) { return {v, ""}; }
  static Measured none(std::string why) { return {std::nullopt, std::move(why)}; }
};

// One write kernel's measurement of a pair: the row's own, or one variant of --write-kernel all.
struct WriteMeasure {
  WriteChoice kernel;         // what wrote
  Measured gbps;              // its write of MatrixOptions::bytes into the peer's slot
  Measured copy_engine_gbps;  // GPU: the copy engine's write of the same bytes, timed interleaved with it
  bool verified = false;      // one write put exactly the pattern into the peer's slot

  // gbps / copy_engine_gbps where both were measured.
  std::optional<double> over_copy_engine() const;
};

// One measured ordered pair with one addressing (pointer array or LSA), as its source rank measured it.
struct MatrixRow {
  int src = 0, dst = 0;
  bool lsa = false;
  WriteMeasure write;
  Measured read_gbps;                  // the load/store kernel copying the peer's slot into a local buffer
  Measured latency_us_p50;             // one-way put-with-signal: p50 of the round trips / 2
  bool timed_out = false;              // the ping-pong exceeded its bound
  Measured link_gbps;                  // the physical link rate from NVML (not a measurement of this run)
  std::vector<WriteMeasure> variants;  // WriteKernel::all

  const char* addressing() const noexcept { return lsa ? "lsa" : "ptr"; }
};

struct PeerMatrix {
  std::size_t bytes = 0;
  int iterations = 0, rounds = 0;
  WriteKernelOptions request;   // the write kernel as asked for
  std::vector<MatrixRow> rows;  // every measured row, the same on every rank

  // Writes (the rows' and their variants') that left wrong bytes in the peer's slot.
  std::size_t writes_wrong() const noexcept;
  // Whether a ping-pong exceeded its bound.
  bool timed_out() const noexcept;
};

// The ordered pairs (src, dst) of one team that the matrix measures: all, or `sample` of them chosen by a
// fixed seed (the same on every rank), sorted.
std::vector<std::pair<int, int>> matrix_pairs(const Bootstrap& boot, int sample);

// Collective: every pair of matrix_pairs measured by its source rank, gathered to every rank. Each write is
// checked once against the source's pattern; a ping-pong that exceeded its bound leaves the latency empty and
// the row timed_out.
PeerMatrix peer_matrix(Bootstrap& boot, Runtime& rt, int device, HandleType ht, const MatrixOptions& o);

// {variant, requested, kernel, blocks, threads, unroll, tile_bytes[, fallback]}; 0 values are null.
Json to_json(const WriteChoice& c);
// {src, dst, addressing, write_gbps, write_kernel (what wrote), write_verified, read_gbps,
// copy_engine_write_gbps, write_over_copy_engine, latency_us_p50, link_gbps[, write_reason][, read_reason]
// [, copy_engine_reason][, latency_reason][, link_reason][, write_variants][, status: "timeout"]}: a value
// not measured is null with its reason in the matching *_reason (docs/mori-probe.md "Peer matrix").
Json to_json(const MatrixRow& r);
// {bytes, iterations, rounds, write_kernel (the request), writes_wrong, rows}.
Json to_json(const PeerMatrix& m);
// The table mori-probe prints: one line per row with the write kernel the row records, a note per fallback,
// and with variants one line per (row, variant) against the copy engine.
std::string format_matrix(const PeerMatrix& m);

}  // namespace mori::symm
