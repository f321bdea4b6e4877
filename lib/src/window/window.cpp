// SPDX-License-Identifier: MIT
#include "mori/symm/window/window.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "mori/symm/base/detail/fault.hpp"
#include "mori/symm/base/error.hpp"
#include "mori/symm/base/log.hpp"
#include "mori/symm/comm/bootstrap.hpp"
#include "mori/symm/comm/fd_channel.hpp"
#include "mori/symm/comm/setup_cost.hpp"
#include "mori/symm/window/request.hpp"

namespace mori::symm {
namespace {
// 128 TiB: the user address space of x86-64 and the most any span can take.
constexpr std::size_t kMaxSpanBytes = std::size_t{1} << 47;

std::atomic<RendezvousFailureHook> g_rendezvous_failure_hook{nullptr};
}  // namespace

void set_rendezvous_failure_hook(RendezvousFailureHook hook) noexcept {
  g_rendezvous_failure_hook.store(hook);
}

Window::Window(Runtime& rt, const WindowOptions& opts) : rt_(rt), opts_(opts) {
  SetupStep timed(Setup::allocation);
  count_setup_ops(6);  // granularity, create, reserve, map, access, zero
  const std::size_t gran = rt_.granularity(opts.device, opts.handle_type, true);
  layout_ = compute_layout(opts.bytes, opts.signal_bytes, gran, opts.stride_quantum);
  try {
    local_handle_ = rt_.mem_create(opts.device, layout_.alloc_bytes, opts.handle_type, opts.uncached);
    have_local_handle_ = true;
    local_va_ = rt_.reserve(layout_.alloc_bytes, gran);
    rt_.map(local_va_, layout_.alloc_bytes, local_handle_);
    local_mapped_ = true;
    rt_.set_access(local_va_, layout_.alloc_bytes, opts.device);
    rt_.memset_async(local_va_, 0, layout_.alloc_bytes, nullptr);
    rt_.device_sync();
  } catch (...) {
    teardown_noexcept();
    throw;
  }
}

Window::~Window() {
  teardown_noexcept();
}

void Window::rendezvous(Bootstrap& boot) {
  if (span_) throw UsageError("window: rendezvous called twice");
  boot_ = &boot;
  const auto all = [&] {
    SetupStep timed(Setup::exchange);
    return exchange_requests(boot);
  }();
  const auto& team = boot.team();
  team_rank_ = boot.team_rank();
  slots_.assign(team.size(), Slot{});
  for (std::size_t i = 0; i < team.size(); ++i) slots_[i].global_rank = team[i];

  try {
    // Own slot: a second handle to the local allocation.
    slots_[static_cast<std::size_t>(team_rank_)].handle = rt_.retain(local_va_);
    slots_[static_cast<std::size_t>(team_rank_)].have_handle = true;
    if (opts_.handle_type == HandleType::fabric) {
      SetupStep timed(Setup::exchange);
      import_fabric_handles(boot, all);
    } else {
      SetupStep timed(Setup::exchange);
      exchange_fds(boot);
    }
    map_span(boot);
    detail::fault_point("rendezvous.mapped", boot.rank());
    // Exporters keep their handles until every peer has imported.
    boot.barrier("rendezvous.done");
  } catch (...) {
    // The cheap checks' likely causes, where the tool ran them (the hook the bring-up layer installed).
    if (const auto hook = g_rendezvous_failure_hook.load()) hook(boot);
    teardown_noexcept();
    throw;
  }
}

std::vector<RendezvousRequest> Window::exchange_requests(Bootstrap& boot) {
  const int me = boot.rank();
  // The flat span is stride x team; checked against the world (>= the team) so that every rank fails alike,
  // before any traffic, instead of a wrapped product reserving a span too small for the team.
  const auto world = static_cast<std::size_t>(boot.world());
  if (layout_.stride > kMaxSpanBytes / world)
    throw UsageError("--stride-quantum: the flat span (stride " + std::to_string(layout_.stride) + " x " +
                     std::to_string(world) + " ranks) exceeds the " + std::to_string(kMaxSpanBytes >> 40) +
                     " TiB a process can address");
  spdlog::debug("window: rendezvous of {} bytes per rank, stride {}, team {}", layout_.alloc_bytes,
                layout_.stride, boot.team_size());
  auto req = make_request(me, layout_.alloc_bytes, layout_.buffer_bytes, layout_.signal_bytes, layout_.stride,
                          opts_.device, opts_.handle_type, boot.node_of(me));
  if (opts_.handle_type == HandleType::fabric) {
    SetupStep timed(Setup::handle_export);
    count_setup_ops(1);
    req.blob = rt_.export_fabric(local_handle_);
  }
  detail::fault_point("rendezvous.requests", me);
  auto all = boot.allgather_value("rendezvous.requests", req);
  count_setup_ops(all.size());  // every rank's request checked
  auto problems = validate_requests(all);
  if (!problems.empty()) {
    std::string s = "rendezvous: requests disagree:";
    for (auto& p : problems) s += " " + p + ".";
    throw UsageError(s);
  }
  return all;
}

void Window::import_fabric_handles(Bootstrap& boot, const std::vector<RendezvousRequest>& all) {
  const auto& team = boot.team();
  for (std::size_t i = 0; i < team.size(); ++i) {
    if (static_cast<int>(i) == team_rank_) continue;
    detail::fault_point("rendezvous.import", boot.rank());
    count_setup_ops(1);
    slots_[i].handle = rt_.import_fabric(all[static_cast<std::size_t>(team[i])].blob);
    slots_[i].have_handle = true;
  }
}

void Window::exchange_fds(Bootstrap& boot) {
  const int me = boot.rank();
  Nonce nonce{};
  if (me == 0) nonce = FdChannel::make_nonce();
  boot.broadcast("rendezvous.nonce", nonce.data(), nonce.size(), 0);
  detail::fault_point("rendezvous.nobind.hang", me);  // test-only: a rank that never binds its socket
  // Each rank binds a name with a random key of its own, then the keys travel over MPI: no other process can
  // take a rank's name before it binds (docs/reliability.md, "Hostile senders").
  FdChannel ch(nonce, me, boot.pids(), boot.timeout_s());
  detail::fault_point("rendezvous.bind", me);
  if (detail::fault_armed("rendezvous.slow", me)) sleep(3);  // test-only: a window for hostile senders
  // The allgather of the keys is also the barrier: every rank's socket is bound before anyone sends.
  ch.set_peer_keys(boot.allgather_value("rendezvous.bind", ch.key()));
  std::vector<int> peers;
  for (int r : boot.team())
    if (r != me) peers.push_back(r);
  // One export, sent to every peer (each datagram carries its own copy of the descriptor). Peers in the
  // order me+1, me+2, ...: at any moment the ranks send to different peers, not all to rank 0 first.
  std::rotate(peers.begin(), std::upper_bound(peers.begin(), peers.end(), me), peers.end());
  const std::vector<int> to = detail::fault_armed("rendezvous.send-lost", me) ? std::vector<int>{} : peers;
  const int fd = [&] {
    SetupStep timed(Setup::handle_export);
    count_setup_ops(1);
    return rt_.export_fd(local_handle_);
  }();
  std::vector<int> fds;
  try {
    if (detail::fault_armed("rendezvous.exchange", me)) {
      ch.exchange(fd, to, {}, 1, "rendezvous.fd-exchange");  // the sends alone, then the fault
      detail::fault_point("rendezvous.exchange", me);
    }
    fds = ch.exchange(fd, to, peers, 1, "rendezvous.fd-exchange");
  } catch (...) {
    close(fd);
    throw;
  }
  close(fd);
  count_setup_ops(ch.sends() + ch.reads());  // refused attempts are waiting, not work: cpu_s has them
  try {
    for (std::size_t k = 0; k < peers.size(); ++k) {
      count_setup_ops(1);
      const auto slot = static_cast<std::size_t>(boot.team_rank_of(peers[k]));
      slots_[slot].handle = import_peer_fd(fds[k], peers[k]);
      slots_[slot].have_handle = true;
      close(fds[k]);
      fds[k] = -1;
    }
  } catch (...) {
    for (int f : fds)
      if (f >= 0) close(f);
    throw;
  }
}

PhysHandle Window::import_peer_fd(int fd, int peer) {
  try {
    return rt_.import_fd(fd, layout_.alloc_bytes);
  } catch (const ApiError& e) {
    throw ApiError("import_fd(the descriptor rank " + std::to_string(peer) + " sent)", __FILE__, __LINE__,
                   e.api_error(), e.what());
  }
}

void Window::map_span(Bootstrap& boot) {
  const auto& team = boot.team();
  span_bytes_ = layout_.stride * team.size();
  {
    SetupStep timed(Setup::reserve);
    count_setup_ops(1);
    span_ = rt_.reserve(span_bytes_, layout_.granularity);
  }
  auto* base = static_cast<std::uint8_t*>(span_);
  {
    SetupStep timed(Setup::map);
    for (std::size_t i = 0; i < team.size(); ++i) {
      count_setup_ops(1);
      rt_.map(base + i * layout_.stride, layout_.alloc_bytes, slots_[i].handle);
      slots_[i].mapped = true;
    }
  }
  {
    SetupStep timed(Setup::access);
    for (std::size_t i = 0; i < team.size(); ++i) {
      count_setup_ops(1);
      rt_.set_access(base + i * layout_.stride, layout_.alloc_bytes, opts_.device);
    }
  }
  peers_.assign(static_cast<std::size_t>(boot.world()), nullptr);
  for (std::size_t i = 0; i < team.size(); ++i)
    peers_[static_cast<std::size_t>(team[i])] = base + i * layout_.stride;
  peers_dev_ = static_cast<void**>(rt_.device_alloc(peers_.size() * sizeof(void*)));
  rt_.copy_to_device(peers_dev_, peers_.data(), peers_.size() * sizeof(void*));
}

LsaDescriptor Window::lsa() const noexcept {
  return {span_, layout_.stride, team_rank_, static_cast<int>(slots_.size())};
}

void* Window::signal_pad(int global_rank) const {
  if (global_rank < 0 || global_rank >= static_cast<int>(peers_.size()))
    throw UsageError("window: rank out of range");
  void* p = peers_[static_cast<std::size_t>(global_rank)];
  return p ? static_cast<std::uint8_t*>(p) + layout_.signal_offset : nullptr;
}

void Window::sync_device() {
  rt_.device_sync();
}

void Window::barrier(const std::string& step) {
  if (boot_) boot_->barrier(step);
}

void Window::unmap_slot(int i) {
  auto& s = slots_.at(static_cast<std::size_t>(i));
  if (!s.mapped) return;
  rt_.unmap(static_cast<std::uint8_t*>(span_) + static_cast<std::size_t>(i) * layout_.stride,
            layout_.alloc_bytes);
  s.mapped = false;
}

void Window::unmap_span() {
  if (!span_) return;
  // One call over the whole span; with a stride larger than the allocation the slots are not contiguous, and
  // the unmap then covers the holes too, exactly what a careless caller would do.
  std::size_t bytes = layout_.stride * (slots_.size() - 1) + layout_.alloc_bytes;
  rt_.unmap(span_, bytes);
  for (auto& s : slots_) s.mapped = false;
}

void Window::release_slot(int i) {
  auto& s = slots_.at(static_cast<std::size_t>(i));
  if (!s.have_handle) return;
  rt_.release(s.handle);
  s.have_handle = false;
}

void Window::free_span() {
  if (!span_) return;
  if (peers_dev_) {
    rt_.device_free(peers_dev_);
    peers_dev_ = nullptr;
  }
  rt_.free_reservation(span_, span_bytes_);
  span_ = nullptr;
}

void Window::unmap_local() {
  if (!local_mapped_) return;
  rt_.unmap(local_va_, layout_.alloc_bytes);
  local_mapped_ = false;
}

void Window::release_local() {
  if (!have_local_handle_) return;
  rt_.release(local_handle_);
  have_local_handle_ = false;
}

void Window::free_local() {
  if (!local_va_) return;
  rt_.free_reservation(local_va_, layout_.alloc_bytes);
  local_va_ = nullptr;
}

void Window::teardown() {
  SetupStep timed(Setup::teardown);
  count_setup_ops(2 + 2 * static_cast<std::uint64_t>(team_size()) + 4);
  sync_device();
  barrier("teardown.barrier");
  for (int i = 0; i < team_size(); ++i) unmap_slot(i);
  for (int i = 0; i < team_size(); ++i) release_slot(i);
  unmap_local();
  release_local();
  free_span();
  free_local();
}

bool Window::torn_down() const noexcept {
  for (auto& s : slots_)
    if (s.mapped || s.have_handle) return false;
  return !span_ && !local_va_ && !local_mapped_ && !have_local_handle_;
}

void Window::teardown_noexcept() noexcept {
  auto guarded = [](const char* what, auto&& f) {
    try {
      f();
    } catch (const std::exception& e) {
      spdlog::error("window teardown: {} failed: {}", what, e.what());
    }
  };
  // No barrier here: a destructor may run on one rank alone (an error path) and must not wait for others.
  guarded("device sync", [&] { rt_.device_sync(); });
  for (int i = 0; i < team_size(); ++i) guarded("unmap slot", [&] { unmap_slot(i); });
  for (int i = 0; i < team_size(); ++i) guarded("release slot", [&] { release_slot(i); });
  guarded("unmap local", [&] { unmap_local(); });
  guarded("release local", [&] { release_local(); });
  guarded("free span", [&] { free_span(); });
  guarded("free local", [&] { free_local(); });
}

}  // namespace mori::symm
