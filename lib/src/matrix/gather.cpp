// SPDX-License-Identifier: MIT
// The peer matrix's rows on the wire (gather.hpp): fixed size, trivially copyable records of a row, its write
// kernel and its values with their reasons, packed by each source rank and unpacked on every rank.
#include "gather.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <type_traits>

#include "mori/symm/comm/bootstrap.hpp"

namespace mori::symm::detail {
namespace {

template <std::size_t N>
void put_text(char (&dst)[N], const std::string& s) {
  std::snprintf(dst, N, "%s", s.c_str());
}

template <std::size_t N>
std::string get_text(const char (&src)[N]) {
  return std::string(src, strnlen(src, N));
}

struct WireValue {
  double value = 0;
  std::int32_t has = 0;
  char why_not[116] = {};
};

WireValue pack(const Measured& m) {
  WireValue w;
  w.has = m.value ? 1 : 0;
  w.value = m.value.value_or(0);
  put_text(w.why_not, m.value ? std::string() : m.why_not);
  return w;
}

Measured unpack(const WireValue& w) {
  if (w.has) return Measured::of(w.value);
  const std::string why = get_text(w.why_not);
  return Measured::none(why.empty() ? kNotMeasured : why);
}

struct WireWrite {
  char variant[32] = {};
  std::int32_t requested = 0, kernel = 0, fallback = 0, unroll = 0;
  std::uint32_t blocks = 0, threads = 0, tile_bytes = 0;
  std::int32_t verified = 0;
  WireValue gbps, copy_engine_gbps;
};

WireWrite pack(const WriteMeasure& m) {
  WireWrite w;
  put_text(w.variant, m.kernel.variant);
  w.requested = static_cast<std::int32_t>(m.kernel.requested);
  w.kernel = static_cast<std::int32_t>(m.kernel.kernel);
  w.fallback = static_cast<std::int32_t>(m.kernel.fallback);
  w.unroll = m.kernel.unroll;
  w.blocks = m.kernel.blocks;
  w.threads = m.kernel.threads;
  w.tile_bytes = m.kernel.tile_bytes;
  w.verified = m.verified ? 1 : 0;
  w.gbps = pack(m.gbps);
  w.copy_engine_gbps = pack(m.copy_engine_gbps);
  return w;
}

WriteMeasure unpack(const WireWrite& w) {
  WriteMeasure m;
  m.kernel.variant = get_text(w.variant);
  m.kernel.requested = static_cast<WriteKernel>(w.requested);
  m.kernel.kernel = static_cast<WriteKernel>(w.kernel);
  m.kernel.fallback = static_cast<WriteFallback>(w.fallback);
  m.kernel.unroll = w.unroll;
  m.kernel.blocks = w.blocks;
  m.kernel.threads = w.threads;
  m.kernel.tile_bytes = w.tile_bytes;
  m.verified = w.verified != 0;
  m.gbps = unpack(w.gbps);
  m.copy_engine_gbps = unpack(w.copy_engine_gbps);
  return m;
}

struct WireRow {
  std::int32_t src = 0, dst = 0, lsa = 0, timed_out = 0;
  WireWrite write;
  WireValue read_gbps, latency_us_p50;
};
static_assert(std::is_trivially_copyable_v<WireRow>);

WireRow pack(const MatrixRow& r) {
  WireRow w;
  w.src = r.src;
  w.dst = r.dst;
  w.lsa = r.lsa ? 1 : 0;
  w.timed_out = r.timed_out ? 1 : 0;
  w.write = pack(r.write);
  w.read_gbps = pack(r.read_gbps);
  w.latency_us_p50 = pack(r.latency_us_p50);
  return w;
}

MatrixRow unpack(const WireRow& w) {
  MatrixRow r;
  r.src = w.src;
  r.dst = w.dst;
  r.lsa = w.lsa != 0;
  r.timed_out = w.timed_out != 0;
  r.write = unpack(w.write);
  r.read_gbps = unpack(w.read_gbps);
  r.latency_us_p50 = unpack(w.latency_us_p50);
  return r;
}

}  // namespace

// Every rank's rows to every rank, in rank order: `slots` rows per rank (the most any rank measured), each
// with `variants` write variants.
std::vector<MatrixRow> gather_rows(Bootstrap& boot, const std::vector<MatrixRow>& mine,
                                   std::size_t variants) {
  const auto counts = boot.allgather_value("matrix.row-count", static_cast<std::uint64_t>(mine.size()));
  const std::size_t slots = *std::max_element(counts.begin(), counts.end());
  const auto world = static_cast<std::size_t>(boot.world());
  std::vector<WireRow> rows(slots), all_rows(slots * world);
  std::vector<WireWrite> vars(slots * variants), all_vars(slots * variants * world);
  for (std::size_t i = 0; i < mine.size(); ++i) {
    rows[i] = pack(mine[i]);
    for (std::size_t k = 0; k < variants && k < mine[i].variants.size(); ++k)
      vars[i * variants + k] = pack(mine[i].variants[k]);
  }
  if (slots) boot.allgather("matrix.rows", rows.data(), all_rows.data(), slots * sizeof(WireRow));
  if (slots && variants)
    boot.allgather("matrix.variants", vars.data(), all_vars.data(), vars.size() * sizeof(WireWrite));
  std::vector<MatrixRow> out;
  for (std::size_t r = 0; r < world; ++r)
    for (std::size_t i = 0; i < counts[r]; ++i) {
      out.push_back(unpack(all_rows[r * slots + i]));
      for (std::size_t k = 0; k < variants; ++k)
        out.back().variants.push_back(unpack(all_vars[(r * slots + i) * variants + k]));
    }
  return out;
}

}  // namespace mori::symm::detail
