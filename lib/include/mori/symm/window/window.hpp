// SPDX-License-Identifier: MIT
// Symmetric memory windows (lib/README.md, Windows; Teardown policy).
//
// clang-format off
//   Window w(rt, opts);     // local: create -> reserve -> map -> set access -> zero (never collective)
//   w.rendezvous(boot);     // collective: requests validated on every rank, handles exchanged, every team
//                           // member's memory mapped into one flat span of team_size x stride
//   w.peer_ptrs()           // pointer array by global rank (null outside the load/store team)
//   w.lsa()                 // {base, stride, lsa_rank, lsa_size}
//   w.teardown();           // the default ordered teardown
// clang-format on
//
// Teardown is an explicit policy: each step is a public method, so a repro tool can run any other order
// on purpose. Steps are idempotent where that is meaningful (a step whose resource is gone does nothing).
// The destructor returns whatever is left, in the default order, logs failures and never throws.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "mori/symm/platform/runtime.hpp"
#include "mori/symm/window/layout.hpp"

namespace mori::symm {

class Bootstrap;
struct RendezvousRequest;

// Run on this rank when a rendezvous fails, before the window returns what it made; never throws. The window
// layer knows nothing above it: the bring-up layer installs the hook that logs the doctor's kept causes for
// `boot` (cheap_diagnoses, bringup/environment.hpp; lib/README.md, Layers). None installed: nothing runs.
using RendezvousFailureHook = void (*)(const Bootstrap& boot) noexcept;
void set_rendezvous_failure_hook(RendezvousFailureHook hook) noexcept;

struct WindowOptions {
  std::size_t bytes = 0;           // usable buffer per rank
  std::size_t signal_bytes = 0;    // optional signal pad after the buffer
  std::size_t stride_quantum = 0;  // 0 = stride is the allocation size
  HandleType handle_type = HandleType::posix_fd;
  bool uncached = false;
  int device = 0;
};

// The LSA window: peer p's slot is at base + p * stride (p = team rank).
struct LsaDescriptor {
  void* base = nullptr;
  std::uint64_t stride = 0;
  int lsa_rank = 0;
  int lsa_size = 0;
};

class Window {
 public:
  Window(Runtime& rt, const WindowOptions& opts);
  ~Window();
  Window(const Window&) = delete;
  Window& operator=(const Window&) = delete;

  void rendezvous(Bootstrap& boot);

  const Layout& layout() const noexcept { return layout_; }
  const WindowOptions& options() const noexcept { return opts_; }
  void* local() const noexcept { return local_va_; }  // this rank's buffer (own mapping)
  bool rendezvoused() const noexcept { return span_ != nullptr; }
  // By global rank; null for ranks outside the team. Host copy and device copy.
  const std::vector<void*>& peer_ptrs() const noexcept { return peers_; }
  void* const* peer_ptrs_device() const noexcept { return peers_dev_; }
  LsaDescriptor lsa() const noexcept;
  int team_size() const noexcept { return static_cast<int>(slots_.size()); }
  void* signal_pad(int global_rank) const;  // peer's signal pad through the window (null outside the team)

  // --- teardown steps (each journaled by callers that want it) ------------------------------------------
  void sync_device();
  void barrier(const std::string& step = "teardown.barrier");
  void unmap_slot(int team_index);    // one peer's (or the own alias's) slot
  void unmap_span();                  // one unmap over every mapped slot at once (ROCR#285)
  void release_slot(int team_index);  // the imported (or retained) handle behind a slot
  void free_span();                   // the span's address range
  void unmap_local();
  void release_local();
  void free_local();
  // The default order: sync -> barrier -> unmap each slot -> release imported -> unmap/release own -> free
  // span.
  void teardown();
  // True once every resource is returned.
  bool torn_down() const noexcept;

 private:
  struct Slot {
    int global_rank = -1;
    PhysHandle handle = 0;
    bool have_handle = false;
    bool mapped = false;
  };
  // The steps of rendezvous().
  std::vector<RendezvousRequest> exchange_requests(Bootstrap& boot);
  void import_fabric_handles(Bootstrap& boot, const std::vector<RendezvousRequest>& all);
  void exchange_fds(Bootstrap& boot);
  // The runtime's import of the descriptor `peer` sent, its error naming that rank.
  PhysHandle import_peer_fd(int fd, int peer);
  void map_span(Bootstrap& boot);
  void teardown_noexcept() noexcept;

  Runtime& rt_;
  Bootstrap* boot_ = nullptr;
  WindowOptions opts_;
  Layout layout_;
  PhysHandle local_handle_ = 0;
  bool have_local_handle_ = false;
  void* local_va_ = nullptr;
  bool local_mapped_ = false;
  void* span_ = nullptr;
  std::size_t span_bytes_ = 0;
  std::vector<Slot> slots_;  // by team rank
  int team_rank_ = 0;
  std::vector<void*> peers_;
  void** peers_dev_ = nullptr;
};

}  // namespace mori::symm
