// SPDX-License-Identifier: MIT
#include "mori/symm/matrix/detail/matrix_write.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "mori/symm/base/enum_names.hpp"
#include "mori/symm/base/error.hpp"
#include "mori/symm/jit/detail/kernel_abi.hpp"
#include "mori/symm/jit/jit.hpp"

namespace mori::symm {
namespace {

// Every write kernel's name, in the order of the accepted values of --write-kernel.
constexpr EnumName<WriteKernel> kWriteKernels[] = {
    {WriteKernel::auto_select, "auto"}, {WriteKernel::plain, "plain"},       {WriteKernel::stream, "stream"},
    {WriteKernel::bulk, "bulk"},        {WriteKernel::bulk_tma, "bulk-tma"}, {WriteKernel::all, "all"}};
// What auto runs (the kernel measured before the write kernels had variants).
constexpr WriteKernel kAutoKernel = WriteKernel::plain;

bool is_bulk(WriteKernel k) {
  return k == WriteKernel::bulk || k == WriteKernel::bulk_tma;
}

bool is_vector(WriteKernel k) {
  return k == WriteKernel::plain || k == WriteKernel::stream;
}

// A number of 1..max digits only; -1 otherwise.
int small_number(const std::string& s, int max) {
  if (s.empty() || s.size() > 5 || s.find_first_not_of("0123456789") != std::string::npos) return -1;
  const int n = std::stoi(s);
  return n >= 1 && n <= max ? n : -1;
}

}  // namespace

WriteKernel parse_write_kernel(const std::string& s) {
  if (const auto k = enum_value(kWriteKernels, s)) return *k;
  throw UsageError("--write-kernel: unknown value '" + s + "' (accepted: " + enum_names(kWriteKernels) + ")");
}

const char* to_string(WriteKernel k) noexcept {
  return enum_name(kWriteKernels, k);
}

void parse_write_blocks(const std::string& s, WriteKernelOptions& o) {
  o.blocks = o.blocks_per_sm = 0;
  if (s == "auto") return;
  if (!s.empty() && s.back() == 'x')
    o.blocks_per_sm = small_number(s.substr(0, s.size() - 1), 64);
  else
    o.blocks = small_number(s, 65535);
  if (o.blocks < 0 || o.blocks_per_sm < 0)
    throw UsageError("--write-blocks: '" + s +
                     "' is not auto, a count in 1..65535 or a multiple of the multiprocessors in 1x..64x");
}

void validate_write_kernel(const WriteKernelOptions& o) {
  if (o.blocks < 0 || o.blocks > 65535 || o.blocks_per_sm < 0 || o.blocks_per_sm > 64 ||
      (o.blocks && o.blocks_per_sm))
    throw UsageError("--write-blocks: give one of a count in 1..65535 or a multiple in 1x..64x");
  if (o.unroll != 0 && o.unroll != 4 && o.unroll != 8 && o.unroll != 16)
    throw UsageError("--write-unroll: must be 0 (auto), 4, 8 or 16");
  if (o.tile_kib != 0 && o.tile_kib != 4 && o.tile_kib != 8 && o.tile_kib != 16 && o.tile_kib != 32 &&
      o.tile_kib != 64)
    throw UsageError("--write-tile-kib: must be 0 (auto), 4, 8, 16, 32 or 64");
  // all sweeps both; auto is checked as the kernel it runs.
  const WriteKernel k = o.kernel == WriteKernel::auto_select ? kAutoKernel : o.kernel;
  const std::string as =
      o.kernel == WriteKernel::auto_select ? std::string(" (auto runs ") + to_string(k) + ")" : "";
  if (o.unroll && is_bulk(k))
    throw UsageError(std::string("--write-unroll: applies to plain and stream, not ") + to_string(o.kernel) +
                     as);
  if (o.tile_kib && is_vector(k))
    throw UsageError(std::string("--write-tile-kib: applies to bulk and bulk-tma, not ") +
                     to_string(o.kernel) + as);
}

namespace detail {
namespace {

// One variant as requested, before the device is known: its kernel and its dimensions, defaults filled in.
struct Spec {
  WriteKernel requested;
  WriteKernel kernel;
  int blocks;  // a count, or
  int per_sm;  // blocks per multiprocessor
  int unroll;
  int tile_kib;
};

Spec with_defaults(Spec s) {
  if (s.kernel == WriteKernel::auto_select || s.kernel == WriteKernel::all) s.kernel = kAutoKernel;
  if (!s.blocks && !s.per_sm) s.per_sm = s.kernel == WriteKernel::bulk ? 2 : 4;
  s.unroll = is_vector(s.kernel) ? (s.unroll ? s.unroll : 4) : 0;
  s.tile_kib = is_bulk(s.kernel) ? (s.tile_kib ? s.tile_kib : 16) : 0;
  return s;
}

WriteChoice resolve(const Spec& given, const WriteTarget& t) {
  const Spec s = with_defaults(given);
  WriteChoice c;
  c.variant = std::string(to_string(s.kernel)) + "/" +
              (s.blocks ? std::to_string(s.blocks) : std::to_string(s.per_sm) + "x") + "/" +
              (s.unroll ? "u" + std::to_string(s.unroll) : "t" + std::to_string(s.tile_kib) + "k");
  c.requested = s.requested;
  c.kernel = s.kernel;
  c.blocks = static_cast<unsigned>(s.blocks ? s.blocks : s.per_sm * std::max(t.multiprocessors, 1));
  c.threads = s.kernel == WriteKernel::bulk_tma ? 32 : 512;
  c.unroll = s.unroll;
  c.tile_bytes = static_cast<std::uint32_t>(s.tile_kib) * 1024;
  if (t.host) {
    c.kernel = WriteKernel::plain;
    c.blocks = c.threads = 0;
    c.unroll = 0;
    c.tile_bytes = 0;
    c.fallback = WriteFallback::host;
  } else if (is_bulk(s.kernel) && !t.bulk_copy) {
    c.kernel = WriteKernel::plain;
    c.threads = 512;
    c.unroll = 4;
    c.tile_bytes = 0;
    c.fallback = WriteFallback::no_bulk_copy;
  }
  return c;
}

}  // namespace

WriteChoice write_choice(const WriteKernelOptions& o, const WriteTarget& t) {
  const WriteKernel k = o.kernel == WriteKernel::all ? WriteKernel::auto_select : o.kernel;
  // all: the rows keep the auto kernel, so the dimensions given for the sweep do not apply to it.
  if (o.kernel == WriteKernel::all) return resolve({k, k, 0, 0, 0, 0}, t);
  return resolve({k, k, o.blocks, o.blocks_per_sm, o.unroll, o.tile_kib}, t);
}

std::vector<WriteChoice> write_variants(const WriteKernelOptions& o, const WriteTarget& t) {
  std::vector<WriteChoice> out;
  if (o.kernel != WriteKernel::all) return out;
  std::vector<std::pair<int, int>> grids;  // (count, per multiprocessor)
  if (o.blocks || o.blocks_per_sm)
    grids.emplace_back(o.blocks, o.blocks_per_sm);
  else
    for (int m : {1, 2, 4}) grids.emplace_back(0, m);
  const std::vector<int> unrolls = o.unroll ? std::vector<int>{o.unroll} : std::vector<int>{4, 8, 16};
  const std::vector<int> tiles = o.tile_kib ? std::vector<int>{o.tile_kib} : std::vector<int>{4, 8, 16};
  for (auto k : {WriteKernel::plain, WriteKernel::stream, WriteKernel::bulk, WriteKernel::bulk_tma})
    for (const auto& [count, per_sm] : grids)
      for (int x : is_bulk(k) ? tiles : unrolls)
        out.push_back(resolve({k, k, count, per_sm, is_bulk(k) ? 0 : x, is_bulk(k) ? x : 0}, t));
  return out;
}

}  // namespace detail

Json to_json(const WriteChoice& c) {
  auto positive = [](std::uint64_t x) { return x ? Json(x) : Json(nullptr); };
  Json j = {{"variant", c.variant},
            {"requested", to_string(c.requested)},
            {"kernel", to_string(c.kernel)},
            {"blocks", positive(c.blocks)},
            {"threads", positive(c.threads)},
            {"unroll", positive(static_cast<std::uint64_t>(c.unroll))},
            {"tile_bytes", positive(c.tile_bytes)}};
  if (c.fallback == WriteFallback::host)
    j["fallback"] = "host runtime: a memcpy stands in for every write kernel";
  if (c.fallback == WriteFallback::no_bulk_copy)
    j["fallback"] = "bulk copies need NVIDIA sm_90 or newer: the plain kernel ran";
  return j;
}

namespace detail {

Json request_json(const WriteKernelOptions& o) {
  const std::string blocks = o.blocks          ? std::to_string(o.blocks)
                             : o.blocks_per_sm ? std::to_string(o.blocks_per_sm) + "x"
                                               : "auto";
  return {{"requested", to_string(o.kernel)},
          {"blocks", blocks},
          {"unroll", o.unroll ? Json(o.unroll) : Json("auto")},
          {"tile_kib", o.tile_kib ? Json(o.tile_kib) : Json("auto")}};
}

void launch_write(Runtime& rt, const KernelModule& mod, const WriteChoice& c, WriteArgs a, Stream s) {
  if (is_bulk(c.kernel)) {
    const auto f = kernel(mod, matrix_bulk_name(a.lsa != 0, c.kernel == WriteKernel::bulk_tma));
    const MatrixBulkArgs b{
        static_cast<void* const*>(a.peers), a.lsa_base, a.stride, a.idx, a.local, a.bytes, c.tile_bytes};
    launch(rt, f, {c.blocks}, {c.threads}, 2 * static_cast<std::size_t>(c.tile_bytes), s, b);
    return;
  }
  const auto f = kernel(mod, matrix_copy_name(a.lsa != 0, c.unroll, c.kernel == WriteKernel::stream));
  const MatrixCopyArgs k{
      static_cast<void* const*>(a.peers), a.lsa_base, a.stride, a.idx, 0, a.local, a.bytes / 16};
  launch(rt, f, {c.blocks}, {c.threads}, 0, s, k);
}

namespace {

constexpr std::size_t kChunk = 16u << 20;

std::uint64_t pattern_word(int rank, std::uint64_t word) {
  std::uint64_t x = (word + 1) * 0x9e3779b97f4a7c15ull ^ (static_cast<std::uint64_t>(rank) << 56);
  x ^= x >> 29;
  return x;
}

void pattern_chunk(std::vector<std::uint64_t>& buf, std::size_t offset, std::size_t bytes, int rank) {
  buf.resize(bytes / 8);
  for (std::size_t i = 0; i < buf.size(); ++i) buf[i] = pattern_word(rank, offset / 8 + i);
}

}  // namespace

void fill_pattern(Runtime& rt, void* dst, std::size_t bytes, int rank) {
  std::vector<std::uint64_t> buf;
  for (std::size_t off = 0; off < bytes; off += kChunk) {
    const std::size_t n = std::min(kChunk, bytes - off);
    pattern_chunk(buf, off, n, rank);
    rt.copy_to_device(static_cast<char*>(dst) + off, buf.data(), n);
  }
}

bool holds_pattern(Runtime& rt, const void* src, std::size_t bytes, int rank) {
  std::vector<std::uint64_t> want, got;
  for (std::size_t off = 0; off < bytes; off += kChunk) {
    const std::size_t n = std::min(kChunk, bytes - off);
    pattern_chunk(want, off, n, rank);
    got.resize(n / 8);
    rt.copy_to_host(got.data(), static_cast<const char*>(src) + off, n);
    if (got != want) return false;
  }
  return true;
}

}  // namespace detail
}  // namespace mori::symm
