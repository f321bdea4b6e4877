// SPDX-License-Identifier: MIT
// The all-to-all's configuration: the names of its enumerations, its option values parsed, and its validation
// (the automatic choices it checks against are the plan's: lib/src/a2a/plan.cpp).
#include <algorithm>
#include <string>

#include "mori/symm/a2a/chunk.hpp"
#include "mori/symm/a2a/plan.hpp"
#include "mori/symm/a2a/types.hpp"
#include "mori/symm/base/enum_names.hpp"
#include "mori/symm/base/error.hpp"

namespace mori::symm {

const char* to_string(Addressing a) noexcept {
  return a == Addressing::lsa ? "lsa" : "ptr";
}
const char* to_string(SyncMode s) noexcept {
  return s == SyncMode::device ? "device" : "host";
}
const char* to_string(Protocol p) noexcept {
  static constexpr EnumName<Protocol> kNames[] = {{Protocol::simple, "simple"},
                                                  {Protocol::direct, "direct"},
                                                  {Protocol::ll, "ll"},
                                                  {Protocol::copy, "copy"}};
  return enum_name(kNames, p);  // a value outside the enumeration prints as "?", never as a real protocol
}

SignalScope parse_signal_scope(const std::string& text) {
  if (text == "auto") return SignalScope::auto_select;
  if (text == "system") return SignalScope::system;
  if (text == "device") return SignalScope::device;
  throw UsageError("--signal-scope: unknown value '" + text + "' (accepted: auto, system, device)");
}

SourceCache parse_source_cache(const std::string& text) {
  if (text == "auto") return SourceCache::auto_select;
  if (text == "normal") return SourceCache::normal;
  if (text == "evict-first") return SourceCache::evict_first;
  throw UsageError("--source-cache: unknown value '" + text + "' (accepted: auto, normal, evict-first)");
}

std::vector<Protocol> parse_protocols(const std::string& text) {
  if (text == "auto") return {};
  if (text == "both") return {Protocol::simple, Protocol::direct};
  if (text == "all") return {Protocol::simple, Protocol::direct, Protocol::ll, Protocol::copy};
  std::vector<Protocol> out;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t end = std::min(text.find(',', pos), text.size());
    const std::string name = text.substr(pos, end - pos);
    Protocol p = Protocol::simple;
    if (name == "direct") {
      p = Protocol::direct;
    } else if (name == "ll") {
      p = Protocol::ll;
    } else if (name == "copy") {
      p = Protocol::copy;
    } else if (name != "simple") {
      throw UsageError("--protocol: unknown value '" + name +
                       "' (accepted: simple, direct, ll, copy, comma-separated, or both, all, auto)");
    }
    if (std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
    pos = end + 1;
  }
  return out;
}

void validate_a2a(const A2aConfig& c, int world, std::uint64_t device_memory, bool host_runtime) {
  if (c.chunks.empty()) throw UsageError("--chunk-kib / -b -e -f: no chunk size given");
  // The direct protocol's wait gives one thread of a 512-thread block to each peer. Checked first: with at
  // most 512 ranks and the chunk limit (a2a/chunk.hpp), 3 x world x pitch cannot overflow.
  if (world > 512) throw UsageError("world size: at most 512 ranks");
  for (std::size_t i = 0; i < c.chunks.size(); ++i) {
    const std::size_t ch = c.chunks[i];
    const std::string item = "chunk " + std::to_string(i + 1) + " of " + std::to_string(c.chunks.size());
    check_a2a_chunk(item, ch);
    // Source (world slots) and window (two parity buffers of world slots), each slot a pitch; the ll
    // protocol's staging (two parity buffers of world staging slots) where it may run.
    long double need = 3.0L * static_cast<long double>(world) * static_cast<long double>(a2a_pitch(ch));
    for (bool remote : {false, true}) {
      const auto ps = a2a_protocols(c, ch, remote, world);
      if (std::find(ps.begin(), ps.end(), Protocol::ll) != ps.end()) {
        need += 2.0L * static_cast<long double>(world) * static_cast<long double>(a2a_ll_pitch(ch));
        break;
      }
    }
    if (device_memory && need > 0.9L * static_cast<long double>(device_memory))
      throw UsageError(item + ": chunk size: " + std::to_string(ch) + " bytes needs " +
                       std::to_string(static_cast<unsigned long long>(need / (1 << 20))) +
                       " MiB per rank (3 x world x pitch), more than 90% of the device's " +
                       std::to_string(device_memory >> 20) + " MiB");
  }
  if (c.addressing.empty()) throw UsageError("--addressing: nothing selected");
  if (c.syncs.empty()) throw UsageError("--sync: nothing selected");
  if (c.graph < 0 || c.graph > 10000) throw UsageError("--graph: must be in 0..10000");
  if (c.graph > 0 && std::find(c.syncs.begin(), c.syncs.end(), SyncMode::device) == c.syncs.end())
    throw UsageError("--graph: needs --sync device or both (the graph captures push + device barrier)");
  if (c.graph > 0 && host_runtime)
    throw UsageError("--graph: needs the GPU runtime (the host runtime has no graphs)");
  if (c.blocks_per_peer < 0 || c.blocks_per_peer > 65535)
    throw UsageError("--blocks-per-peer: must be in 0..65535");
  if (c.iters < 1 || c.iters > 1000000) throw UsageError("--iters: must be in 1..1000000");
  if (c.warmup < 0 || c.warmup > 100000) throw UsageError("--warmup: must be in 0..100000");
  if (c.unroll != 0 && c.unroll != 4 && c.unroll != 8) throw UsageError("--unroll: must be 0 (auto), 4 or 8");
  if (c.verify_epochs < 2 || c.verify_epochs > 64)
    throw UsageError("--verify-epochs: must be in 2..64 (back-to-back epochs are what the check is for)");
  if (c.skew_us > 1e6) throw UsageError("--skew-us: at most 1000000 (1 s)");
  if (std::find(c.protocols.begin(), c.protocols.end(), Protocol::copy) != c.protocols.end() &&
      !a2a_copy_fits_graphs(c))
    throw UsageError("--protocol copy (or all) with --graph: --graph (" + std::to_string(c.graph) +
                     ") and --verify-epochs (" + std::to_string(c.verify_epochs) +
                     ") must be even (the copies' receive buffers alternate by launch and a graph replays "
                     "fixed ones)");
}

}  // namespace mori::symm
