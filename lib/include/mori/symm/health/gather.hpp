// SPDX-License-Identifier: MIT
// Gathering what mori-probe --health judges (docs/mori-probe.md "Health"): every rank's NVLink state and Xid
// events, read before and after the measurement, the short all-to-all, and every check over them and the peer
// matrix (the verdicts of health.hpp). Collective: every rank of the job takes part.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "mori/symm/base/json.hpp"
#include "mori/symm/health/health.hpp"
#include "mori/symm/matrix/matrix.hpp"
#include "mori/symm/platform/runtime.hpp"

namespace mori::symm {

class Bootstrap;
struct RankFacts;
namespace detail {
class XidWatch;
}

class HealthGather {
 public:
  // Collective, before the measurement: watches this rank's GPU for Xid events from now on (NVML; none on the
  // host runtime) and reads every rank's NVLink state.
  HealthGather(Bootstrap& boot, Runtime& rt, int device);
  ~HealthGather();
  HealthGather(const HealthGather&) = delete;
  HealthGather& operator=(const HealthGather&) = delete;

  // Collective, after the peer matrix: the short all-to-all (one chunk, pointer addressing; not run where the
  // matrix timed out), every rank's NVLink state again, and every check, in order: the doctor's diagnoses of
  // `report` (its diagnoses[]), each node's pairs against each other and against `expectations`, each GPU's
  // links and Xid events, the all-to-all and its expectation. `report` is the mori.probe/1 document so far:
  // its nodes[] name the devices. `handle_type`: the windows' (--handle-type; none: chosen by trying).
  std::vector<HealthCheck> finish(const Json& report, const PeerMatrix& matrix,
                                  const std::vector<RankFacts>& facts,
                                  const std::optional<HandleType>& handle_type,
                                  const Expectations& expectations);
  // After finish: every node's facts, in the order of its first rank (the fleet table's rows).
  const std::vector<NodeFacts>& nodes() const noexcept { return nodes_; }

  // One rank's NVLink state as the checks see it (check_links), with its GPU's PCI bus id ("host" on the host
  // runtime).
  struct RankLinks {
    std::string pci;
    LinkSnapshot links;
  };

 private:
  std::vector<RankLinks> read_all(const char* name, detail::XidWatch* xid);

  Bootstrap& boot_;
  Runtime& rt_;
  int device_;
  std::unique_ptr<detail::XidWatch> xid_;
  std::vector<RankLinks> before_;
  std::vector<NodeFacts> nodes_;
};

}  // namespace mori::symm
