// SPDX-License-Identifier: MIT
// A program that uses the installed mori symmetric-memory library as a user would (examples/README.md): an
// MPI session, a runtime, the bootstrap, one window and its rendezvous; then every rank stores a value into
// the next rank's slot, once through the pointer array and once through LSA addressing (base + team rank *
// stride), checks what the previous rank stored into its own, and tears the window down.
//
//   mpirun -n 4 ./ring_store [--backend host|gpu|auto]
//
// Exit 0: every rank received both values; 1: a wrong value; 2: bad arguments; 3: a system error; 4: a
// timeout.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <string>

#include "mori/symm/base/error.hpp"
#include "mori/symm/base/log.hpp"
#include "mori/symm/comm/bootstrap.hpp"
#include "mori/symm/platform/runtime.hpp"
#include "mori/symm/window/window.hpp"

namespace ms = mori::symm;

namespace {

constexpr double kTimeoutS = 30;

std::uint64_t value_from(int writer, int model) {
  return 0x6d6f72690000ull + writer * 16ull + model;
}

// Stores this rank's value at word `model` of the next rank's slot, through the pointer array (model 0) or
// LSA addressing (model 1). The next rank is on this node here (one team): both addresses are valid.
void store_to_next(ms::Runtime& rt, ms::Bootstrap& boot, ms::Window& w, int model) {
  const int next = (boot.rank() + 1) % boot.world();
  void* slot = nullptr;
  if (model == 0) {
    slot = w.peer_ptrs()[static_cast<std::size_t>(next)];
  } else {
    const ms::LsaDescriptor lsa = w.lsa();
    slot =
        static_cast<std::uint8_t*>(lsa.base) + static_cast<std::size_t>(boot.team_rank_of(next)) * lsa.stride;
  }
  if (slot == nullptr) throw ms::UsageError("rank " + std::to_string(next) + " is not on this node");
  const std::uint64_t v = value_from(boot.rank(), model);
  rt.copy_to_device(static_cast<std::uint64_t*>(slot) + model, &v, sizeof v);
}

int run(ms::Backend backend) {
  std::string notice;
  std::unique_ptr<ms::Runtime> rt = ms::select_runtime(backend, &notice);
  ms::Bootstrap boot(kTimeoutS);
  ms::log::set_rank(boot.rank());
  ms::WindowOptions opts;
  opts.bytes = 4096;
  ms::Window w(*rt, opts);
  w.rendezvous(boot);
  for (int model = 0; model < 2; ++model) store_to_next(*rt, boot, w, model);
  rt->device_sync();
  boot.barrier("example.stored");
  std::uint64_t got[2] = {};
  rt->copy_to_host(got, w.local(), sizeof got);
  const int prev = (boot.rank() + boot.world() - 1) % boot.world();
  int wrong = 0;
  for (int model = 0; model < 2; ++model) wrong += got[model] != value_from(prev, model);
  boot.barrier("example.checked");
  w.teardown();
  std::printf("rank %d of %d: %s from rank %d through the pointer array and LSA (%s runtime)\n", boot.rank(),
              boot.world(), wrong ? "WRONG values" : "both values", prev,
              rt->platform() == ms::Platform::host ? "host" : "GPU");
  return wrong ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  ms::prepare_process_environment();
  ms::log::init();
  ms::Backend backend = ms::Backend::host;
  ms::MpiSession mpi(&argc, &argv);
  try {
    if (argc == 3 && std::strcmp(argv[1], "--backend") == 0) {
      backend = ms::parse_backend(argv[2]);
    } else if (argc != 1) {
      throw ms::UsageError("usage: ring_store [--backend host|gpu|auto]");
    }
    return mpi.finish_with(run(backend), kTimeoutS);
  } catch (const ms::Error& e) {
    std::fprintf(stderr, "ring_store: %s\n", e.what());
    return mpi.finish_with(static_cast<int>(e.code()), kTimeoutS);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ring_store: %s\n", e.what());
    return mpi.finish_with(3, kTimeoutS);
  }
}
