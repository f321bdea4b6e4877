// SPDX-License-Identifier: MIT
// The one-shot all-to-all benchmark behind mori-a2a (docs/mori-a2a.md, "The contract" in particular).
//
// Every rank pushes chunk p of its source into rank p's window, then all ranks synchronise; repeat. The
// driver (this header) is the same for every backend: it verifies each configuration over several
// back-to-back epochs with rank skew, times it, and measures its references in the same run (push alone,
// synchronisation alone, the best copy of the same bytes, the physical limit). A backend engine
// (a2a/detail/engine.hpp) only enqueues the steps.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "mori/symm/a2a/types.hpp"
#include "mori/symm/base/json.hpp"
#include "mori/symm/platform/runtime.hpp"

namespace mori::symm {

class Bootstrap;

class A2aBench {
 public:
  // Collective over boot: allocates the window (2 x world x pitch of the largest chunk) and rendezvouses.
  A2aBench(Runtime& rt, Bootstrap& boot, int device, const A2aConfig& cfg);
  ~A2aBench();  // returns what is left without any collective step; never throws
  A2aBench(const A2aBench&) = delete;
  A2aBench& operator=(const A2aBench&) = delete;

  // Collective. progress(line) is called on rank 0 once per chunk size. job: where this bench runs within one
  // load/store team of a job of several (a2a/fleet.hpp), the job's Bootstrap: every team starts each chunk
  // and each row together (a bounded barrier over the job before each, outside the timed loops), so that
  // every team is measured at the same time; teams whose plans hold fewer rows wait at the rows they lack.
  std::vector<A2aResult> run(const std::function<void(const std::string&)>& progress,
                             Bootstrap* job = nullptr);
  // Collective: the ordered window teardown (device sync, barrier, unmap, release, free).
  void finish();
  // Collective: every rank's JIT cold/warm times (null on the host runtime).
  Json gather_jit_json();

  std::string handle_type() const;
  bool time_sliced() const;  // ranks share a GPU without MPS
  // The plan's note on the automatic tables it reads ("" when none); logged by the job's rank 0.
  const std::string& plan_note() const;
  Json extra_meta() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mori::symm
