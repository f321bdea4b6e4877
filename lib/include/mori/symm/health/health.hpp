// SPDX-License-Identifier: MIT
// Node health (mori-probe --health, docs/mori-probe.md "Health"): verdicts over what the probe, the peer
// matrix, NVML and a short all-to-all measured.
//
// Every function here is pure, in the manner of doctor.hpp: facts in, checks out, so that each verdict can be
// produced in a unit test. Gathering the facts (NVML counters, the all-to-all) is gather.hpp's.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "mori/symm/base/json.hpp"
#include "mori/symm/matrix/matrix.hpp"

namespace mori::symm {

enum class Verdict { pass, warn, fail, no_reference };
const char* to_string(Verdict v) noexcept;

struct HealthCheck {
  std::string id;       // e.g. "pair.write_gbps", "expect.write_over_copy_engine", "nvlink.links_up"
  std::string subject;  // what was checked: "0->1 ptr", "rank 2", "node vm"
  Verdict verdict = Verdict::no_reference;
  std::optional<double> measured;
  std::string unit;      // "GB/s", "us", "ratio", "count"
  std::string expected;  // the range in words: ">= 0.92 x median 351.2 (warn), >= 0.85 x (fail)"
  std::string source;    // where the expectation comes from (a committed file, a published address, a rule)
  std::string detail;    // the pair's PCI ids and links, a reason for no_reference, what went wrong
  std::string node =
      {};  // on a job of several nodes: the node it concerns (host or node id); "" = the whole job
};

// Outlier thresholds against the node's median (or, with two GPUs, against the other direction): warn below
// `warn` x, fail below `fail` x for bandwidth; latency above 1/warn and 1/fail x. The defaults are set from
// the spread of the committed matrices (docs/mori-probe.md "Health").
struct OutlierLimits {
  double warn = 0.92;
  double fail = 0.85;
  bool latency_can_fail = true;
  std::string source = "rule: 0.92 / 0.85 of the median, from the spread of the committed matrices";
};
// The host runtime's memcpy and ping-pong on shared cores are not performance: only gross outliers count
// there (bandwidth below 0.25 x warns, below 0.05 x fails; latency at most warns).
OutlierLimits host_outlier_limits();

// One row of the peer matrix, as the checks see it (from peer_matrix's rows by pair_facts).
struct PairFact {
  int src = 0, dst = 0;
  std::string addressing;  // "ptr" | "lsa"
  std::optional<double> write_gbps, read_gbps, latency_us, copy_engine_gbps;
  bool verified = true;
  bool timed_out = false;
  std::string
      write_kernel;  // the kernel the row's write ran, as the matrix recorded it: "plain/4x/u4 (ran plain)"
  // Filled from the ranks' facts and NVML (gather.hpp; empty / -1 where unknown).
  std::string src_pci, dst_pci;
  int links = -1;  // NVLink links between the two GPUs (0: none, -1: unknown)
};

// The rows of peer_matrix (matrix.hpp) as facts, without PCI ids and links.
PairFact pair_fact(const MatrixRow& row);
std::vector<PairFact> pair_facts(const PeerMatrix& matrix);

// How the ranks of one node sit on its GPUs.
enum class NodeLayout {
  host,             // the host runtime
  shared_device,    // several ranks on one GPU (MPS or time-sliced)
  two_devices,      // two ranks on two GPUs
  several_devices,  // three or more ranks, one per GPU
};
const char* to_string(NodeLayout p) noexcept;
// From the number of ranks of the node, the number of distinct GPUs they use, and the runtime.
NodeLayout node_layout_of(int ranks, int distinct_devices, bool host_runtime) noexcept;

// Checks that need no table: every row's write and read bandwidth and latency against the median of its
// addressing (several devices, a shared device, the host runtime), or the two directions against each other
// (two devices); every write verified and no ping-pong timed out.
std::vector<HealthCheck> check_pairs(const std::vector<PairFact>& rows, NodeLayout layout,
                                     const OutlierLimits& limits);

// NVLink facts of one GPU, read before and after the measurement (detail/nvml.hpp).
struct LinkSnapshot {
  bool known = false;
  std::string why;  // when not known
  int links_up = 0;
  int links_down = 0;  // links that exist but are not active
  // Error counters summed over the links; nullopt where NVML could not read them.
  std::optional<unsigned long long> replay_errors, crc_errors;
  // Xid events seen by an event set registered before the measurement; nullopt where it could not be watched.
  std::optional<int> xid_events;
};
struct DeviceLinks {
  std::string pci;
  LinkSnapshot before, after;
};
// Every link up, replay/CRC counters unchanged, no new Xid; no_reference with the reason where NVML is
// absent.
std::vector<HealthCheck> check_links(const std::vector<DeviceLinks>& devices, int devices_on_node);

// No diagnosis of severity error (the doctor's JSON diagnoses[]).
std::vector<HealthCheck> check_diagnoses(const Json& diagnoses);

// The short all-to-all: verified (wrong 0); not_run with its reason gives no_reference.
struct A2aFact {
  bool ran = false;
  std::string not_run;  // why it did not run
  int world = 0;        // the ranks that ran it (a node's, on a job of several nodes)
  std::size_t chunk_bytes = 0;
  std::string sync;  // "host" | "device"
  bool graph = false;
  std::optional<double> agg_bw_gbps;
  unsigned long long wrong = 0;
  std::string node;   // on a job of several nodes: the node it ran on (its host, or its MORI_NODE_ID)
  std::string error;  // it started and failed: the error (a fail verdict)
  std::vector<int> wrong_ranks;  // the job's ranks that received them
  std::string wrong_by;          // those ranks as errors name them: "rank 1,2"; "nodeB: 5" on several nodes
};
// "all-to-all 1048576 B device world 4", then " on NODE" where the fact names one.
std::string a2a_subject(const A2aFact& r);
std::vector<HealthCheck> check_a2a(const std::vector<A2aFact>& rows);

// ---- The fleet: a job of several nodes (docs/mori-probe.md "Health on many nodes")
// --------------------------- What one node says of itself, gathered from its ranks.
struct NodeFacts {
  std::string node;     // as users name it: the host, or the node id
  std::string ranks;    // its ranks in the job: "0-3"
  int gpus = 0;         // devices its runtime sees (the most any of its ranks sees)
  std::string model;    // its ranks' device names, distinct, joined with ", "
  std::string driver;   // its ranks' driver versions, likewise
  std::string runtime;  // its ranks' runtime (CUDA, HIP) versions, likewise
  std::string handle;   // the handle type the probe chose for its ranks' devices, likewise
};
// Nodes that disagree with the value most nodes hold, per fact: GPU count (fleet.gpu_count), GPU model
// (fleet.gpu_model), driver (fleet.driver_version), runtime version (fleet.runtime_version) and the handle
// type chosen (fleet.handle_type); one fail per odd node, naming it and the majority, or, where no value
// holds a majority, one fail per node ("no majority"); one pass per fact where all agree. Nothing for one
// node.
std::vector<HealthCheck> check_fleet(const std::vector<NodeFacts>& nodes);
// A node whose short all-to-all is slower than its siblings' (fleet.a2a_slow): mori-a2a's slow_team rule
// (a2a/fleet.hpp) on the aggregate bandwidth, among nodes of the same team size: a fail where the lower
// median of the times (1 / bandwidth) is exceeded by more than 1 + rules.slow_margin; on the host runtime,
// where a loaded core is not a slow node, a warning past rules.host_factor. One pass per size where no node
// is slow; nothing below 2 nodes of a size.
struct A2aFleetRules;
std::vector<HealthCheck> check_fleet_a2a(const std::vector<A2aFact>& nodes, const A2aFleetRules& rules);
// One node's verdict: the worst of the checks that name it, and the ids of those that fail.
struct NodeHealth {
  std::string node, ranks;
  int gpus = 0;
  Verdict verdict = Verdict::pass;
  std::vector<std::string> failing;  // check ids, each once, in the checks' order
};
std::vector<NodeHealth> node_health(const std::vector<NodeFacts>& nodes,
                                    const std::vector<HealthCheck>& checks);
// The fleet table: one line per node (node, ranks, GPUs, verdict, failing checks).
std::string format_node_health(const std::vector<NodeHealth>& nodes);
Json to_json(const NodeHealth& n);
// The nodes whose verdict is fail, in node order.
std::vector<std::string> failing_nodes(const std::vector<NodeHealth>& nodes);

// ---- Expectations (results/expectations/*.json, schema mori.expectations/1) -------------------------------
struct Expectation {
  std::vector<std::string> devices;  // matched as substrings of the device name
  std::string interconnect;          // "nvlink" | "peer" | "same-device" | "host"
  std::string check;  // write_gbps | read_gbps | copy_engine_write_gbps | write_over_copy_engine |
                      // latency_us_p50 | a2a_agg_bw_gbps
  std::optional<double> min, max;
  bool higher_is_better = true;  // false for latency
  int world = 0;                 // a2a: the world the figure was measured at (0: any)
  std::size_t chunk_bytes = 0;   // a2a: the chunk (0: any)
  std::string source;            // a committed file, or the address of a published source
  std::string source_kind;       // "evidence" | "published" | "not_performance"
  std::string note;
};
struct Expectations {
  std::vector<Expectation> entries;
  std::vector<std::string> files;  // where they came from, in order
};

// Parses one expectations document; throws UsageError naming `name` (the file) and the field on bad input.
Expectations parse_expectations(const Json& doc, const std::string& name);
// `site` on top of `base`: a site entry replaces every base entry of the same check, interconnect and device.
Expectations merge_expectations(const Expectations& base, const Expectations& site);
// The entry for this device, interconnect and check (and a2a world/chunk), or null.
const Expectation* find_expectation(const Expectations& e, const std::string& device_name,
                                    const std::string& interconnect, const std::string& check, int world = 0,
                                    std::size_t chunk_bytes = 0);

// The interconnect of a pair: host runtime, the same GPU, NVLink (links > 0), or another peer path.
std::string interconnect_of(bool host_runtime, const PairFact& row);

// Each row's figures against the expectations of its device and interconnect; a device or check without an
// expectation gets no_reference (never pass), a range with only the limit it must not exceed gives
// no_reference within it. write_over_copy_engine is measured where the row has a copy-engine figure.
std::vector<HealthCheck> check_expectations(const std::vector<PairFact>& rows, const std::string& device_name,
                                            bool host_runtime, const Expectations& e);
std::vector<HealthCheck> check_a2a_expectations(const std::vector<A2aFact>& rows,
                                                const std::string& device_name,
                                                const std::string& interconnect, const Expectations& e);

// One measured value against one expectation (the shared rule of check_expectations).
HealthCheck judge(const std::string& id, const std::string& subject, std::optional<double> value,
                  const std::string& unit, const Expectation* x);

// ---- Summary
// -----------------------------------------------------------------------------------------------
bool has_failure(const std::vector<HealthCheck>& checks) noexcept;
Json to_json(const HealthCheck& c);
Json to_json(const std::vector<HealthCheck>& checks);
// Every check that did not pass one per line, then one line per check id with its counts; "" when none.
std::string format_health(const std::vector<HealthCheck>& checks);

}  // namespace mori::symm
