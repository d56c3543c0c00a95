#pragma once
// The doctor's records (wire/record.h): what the doctor asks its peers and
// what they answer (peer.h), a host's facts (facts.h), the lines its probes
// and jobs print (the CUDA probe, dlaunch-nccl-check, `dlaunch bench --json`)
// and the notes of its JSON report (docs/doctor.md lists their fields). Each
// is a struct whose fields() is the one place its JSON names are written;
// no stage reads a field by a string.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace dl::doctor {

// ---- the peer's requests, each with its "op" -------------------------------

// What a host's facts should include (facts.h).
struct FactsRequest {
  static constexpr const char* kOp = "facts";
  std::vector<std::string> vars;  // variables whose values to report
  std::string program;            // --program, or ""
  std::string agent;              // the dlaunch-agent that host would run
  std::string nccl_helper;        // dlaunch-nccl-check, or "" without NCCL
  template <class S, class V> static void fields(S& s, V& v) {
    v("vars", s.vars), v("program", s.program), v("agent", s.agent), v("nccl_helper", s.nccl_helper);
  }
};

struct ClockRequest {
  static constexpr const char* kOp = "clock";
  template <class S, class V> static void fields(S&, V&) {}
};

// Opens the peer's probe listener, answering "who" with `name`.
struct ListenRequest {
  static constexpr const char* kOp = "listen";
  std::string name;
  template <class S, class V> static void fields(S& s, V& v) { v("name", s.name); }
};

// One address of a host: where a peer listens, or a probe's target.
struct EndpointRecord {
  std::string name;  // the host as the hostfile names it ("" in a listen reply)
  std::string ifname;
  std::string addr;
  uint16_t port = 0;
  template <class S, class V> static void fields(S& s, V& v) {
    v("name", s.name), v("ifname", s.ifname), v("addr", s.addr), v("port", s.port);
  }
};

// Connects to every target at once, each within timeout_ms.
struct ProbeRequest {
  static constexpr const char* kOp = "probe";
  long timeout_ms = 3000;
  std::vector<EndpointRecord> targets;
  template <class S, class V> static void fields(S& s, V& v) { v("timeout_ms", s.timeout_ms), v("targets", s.targets); }
};

// Latency (`pings` round trips) and bandwidth (`seconds` each way) to one
// listener; 0 skips either.
struct LinkRequest {
  static constexpr const char* kOp = "link";
  std::string addr;
  uint16_t port = 0;
  double seconds = 0.25;
  int pings = 20;
  long timeout_ms = 5000;
  template <class S, class V> static void fields(S& s, V& v) {
    v("addr", s.addr), v("port", s.port), v("seconds", s.seconds), v("pings", s.pings), v("timeout_ms", s.timeout_ms);
  }
};

// ---- the peer's replies ----------------------------------------------------

// A request that failed, instead of its reply.
struct ErrorReply {
  std::string error;
  template <class S, class V> static void fields(S& s, V& v) { v("error", s.error); }
};

struct ClockReply {
  int64_t time_ns = 0;  // the peer's wall clock
  template <class S, class V> static void fields(S& s, V& v) { v("time_ns", s.time_ns); }
};

struct ListenReply {
  std::vector<EndpointRecord> endpoints;
  template <class S, class V> static void fields(S& s, V& v) { v("endpoints", s.endpoints); }
};

struct ProbeResult {
  bool ok = false;
  std::string error;
  double ms = 0;
  template <class S, class V> static void fields(S& s, V& v) { v("ok", s.ok), v("error", s.error), v("ms", s.ms); }
};

// In the targets' order.
struct ProbeReply {
  std::vector<ProbeResult> results;
  template <class S, class V> static void fields(S& s, V& v) { v("results", s.results); }
};

struct LinkReply {
  double latency_us = 0, out_Bps = 0, in_Bps = 0;
  double seconds = 0;  // the test's own time, at the host that ran it
  template <class S, class V> static void fields(S& s, V& v) {
    v("latency_us", s.latency_us), v("out_Bps", s.out_Bps), v("in_Bps", s.in_Bps), v("seconds", s.seconds);
  }
};

// ---- between peers: the JSON frames of net_probe.h's connections ---------

// "who" (answered by a WhoReply) or "send" (stream `seconds` of data back).
struct PeerOp {
  std::string op;
  std::optional<double> seconds;
  template <class S, class V> static void fields(S& s, V& v) { v("op", s.op), v("seconds", s.seconds); }
};
struct WhoReply {
  std::string name;  // the host as the doctor's hostfile names it
  template <class S, class V> static void fields(S& s, V& v) { v("name", s.name); }
};
// What the receiving end of a stream measured.
struct RateReply {
  double Bps = 0;
  template <class S, class V> static void fields(S& s, V& v) { v("Bps", s.Bps); }
};

// ---- a host's facts (the facts reply) --------------------------------------

// One GPU of a host (doctor/gpu.h): as the launch's detector finds it
// (machine/gpus.h), and for an NVIDIA GPU nvidia-smi lists, what only
// nvidia-smi knows.
struct GpuFact {
  std::string vendor;      // "nvidia", "amd", "intel"
  std::string id;          // as its vendor's visibility variable takes it
  std::string pci_bus_id;  // "0000:18:00.0", "" when unknown
  int numa = -1;           // its NUMA node, -1 when unknown
  uint64_t memory_bytes = 0;  // 0 when unknown
  std::optional<std::string> name, driver;   // nvidia-smi's
  std::optional<uint64_t> memory_used_bytes;  // nvidia-smi's
  template <class S, class V> static void fields(S& s, V& v) {
    v("vendor", s.vendor), v("id", s.id), v("pci_bus_id", s.pci_bus_id), v("numa", s.numa);
    v("memory_bytes", s.memory_bytes), v("name", s.name), v("driver", s.driver);
    v("memory_used_bytes", s.memory_used_bytes);
  }
};

// What a probe of GPUs prints as its one line: the CUDA driver probe
// (`dlaunch doctor --cuda-probe`) and `dlaunch-nccl-check --probe`.
struct GpuProbe {
  int count = 0;
  std::string error;                     // "" when it could count
  std::optional<std::string> error_name;  // the driver's: "CUDA_ERROR_NO_DEVICE"
  std::optional<int> driver_version;
  std::optional<int> runtime_version;
  template <class S, class V> static void fields(S& s, V& v) {
    v("count", s.count), v("error", s.error), v("error_name", s.error_name), v("driver_version", s.driver_version);
    v("runtime_version", s.runtime_version);
  }
};

// A file the launch would execute there.
struct ExecutableFact {
  std::string path;
  bool ok = false;
  std::string why;                     // "" when ok
  std::optional<std::string> version;  // the agent's, when it ran
  template <class S, class V> static void fields(S& s, V& v) {
    v("path", s.path), v("ok", s.ok), v("why", s.why), v("version", s.version);
  }
};

struct HostFacts {
  std::string version;   // DLAUNCH_VERSION of the dlaunch there
  std::string hostname;
  std::map<std::string, std::optional<std::string>> env;  // null: unset
  int cores = 0;         // in its affinity
  std::optional<uint64_t> mem_bytes, mem_available_bytes, tmp_free_bytes;  // absent: unknown
  std::vector<GpuFact> gpus;              // every GPU the driver lists, vendor by vendor
  std::string gpu_tool;                   // "nvidia-smi", or "" when it is not installed
  std::string gpu_error;                  // what nvidia-smi said instead of a GPU
  std::optional<std::string> cuda_visible_devices;
  std::optional<GpuProbe> cuda;           // with GPUs listed: the driver's count
  std::optional<GpuProbe> cuda_runtime;   // ... and the NCCL check's runtime's
  std::optional<ExecutableFact> program;  // with --program
  std::optional<ExecutableFact> agent;
  // Set by the doctor, not the peer: its ssh round trip and the clock offset.
  std::optional<double> ssh_rtt_us, clock_offset_ms;
  template <class S, class V> static void fields(S& s, V& v) {
    v("version", s.version), v("hostname", s.hostname), v("env", s.env), v("cores", s.cores);
    v("mem_bytes", s.mem_bytes), v("mem_available_bytes", s.mem_available_bytes), v("tmp_free_bytes", s.tmp_free_bytes);
    v("gpus", s.gpus), v("gpu_tool", s.gpu_tool), v("gpu_error", s.gpu_error);
    v("cuda_visible_devices", s.cuda_visible_devices), v("cuda", s.cuda), v("cuda_runtime", s.cuda_runtime);
    v("program", s.program), v("agent", s.agent), v("ssh_rtt_us", s.ssh_rtt_us), v("clock_offset_ms", s.clock_offset_ms);
  }
};

// ---- what the stage-6 jobs print -------------------------------------------

// dlaunch-nccl-check's result line.
struct NcclCheckResult {
  int ranks = 0;
  uint64_t bytes = 0;
  double time_us = 0, algbw = 0, busbw = 0;  // GB/s
  long long wrong = 0;
  template <class S, class V> static void fields(S& s, V& v) {
    v("ranks", s.ranks), v("bytes", s.bytes), v("time_us", s.time_us), v("algbw", s.algbw), v("busbw", s.busbw);
    v("wrong", s.wrong);
  }
};

// ---- the report's notes ----------------------------------------------------

struct Retested {
  double latency_us = 0, Bps = 0, reference_latency_us = 0, reference_Bps = 0;
  template <class S, class V> static void fields(S& s, V& v) {
    v("latency_us", s.latency_us), v("Bps", s.Bps), v("reference_latency_us", s.reference_latency_us);
    v("reference_Bps", s.reference_Bps);
  }
};

// One pair of stage 5, both directions.
struct LinkNote {
  std::string a, b;
  double latency_us = 0, a_to_b_Bps = 0, b_to_a_Bps = 0, seconds = 0;
  std::string error;
  std::optional<std::vector<Retested>> retested;  // a suspect pair's retests
  template <class S, class V> static void fields(S& s, V& v) {
    v("a", s.a), v("b", s.b), v("latency_us", s.latency_us), v("a_to_b_Bps", s.a_to_b_Bps);
    v("b_to_a_Bps", s.b_to_a_Bps), v("seconds", s.seconds), v("error", s.error), v("retested", s.retested);
  }
};

struct NcclNote {
  bool ran = false;
  std::string reason;  // why not, when it did not run
  int ranks = 0;
  std::optional<double> busbw_Bps;
  template <class S, class V> static void fields(S& s, V& v) {
    v("ran", s.ran), v("reason", s.reason), v("ranks", s.ranks), v("busbw_Bps", s.busbw_Bps);
  }
};

// The peers' launch tree: its start method, fan-out and depth, and how many
// peers the doctor itself started (the rest were started by peers).
struct TreeNote {
  std::string method;
  int fanout = 0, depth = 1, direct = 0;
  template <class S, class V> static void fields(S& s, V& v) {
    v("method", s.method), v("fanout", s.fanout), v("depth", s.depth), v("direct", s.direct);
  }
};

// Facts shown under the table and in the JSON; absent: that stage did not
// get there.
struct Notes {
  std::optional<std::string> interface;   // the interface line
  std::optional<std::string> ifname;      // NCCL_SOCKET_IFNAME's value
  std::optional<int> link_rounds;
  std::optional<std::string> link_plan;      // "full" (every pair) or "sparse" (ring + random matchings)
  std::optional<int> link_tests;             // pairs measured, retests included
  std::optional<std::string> links_summary;  // the links line under the table
  std::optional<std::vector<LinkNote>> links;
  std::optional<std::string> all_reduce;  // its summary line
  std::optional<double> busbw_Bps;        // the all_reduce job's
  std::optional<std::string> nccl;        // its summary line
  std::optional<NcclNote> nccl_check;
  std::optional<std::map<std::string, double>> stage_seconds;
  std::optional<TreeNote> tree;              // how the peers were started
  std::optional<double> doctor_cpu_s;        // the doctor process's own CPU, its peers' not counted
  template <class S, class V> static void fields(S& s, V& v) {
    v("interface", s.interface), v("ifname", s.ifname), v("link_rounds", s.link_rounds), v("link_plan", s.link_plan);
    v("link_tests", s.link_tests), v("links_summary", s.links_summary), v("links", s.links);
    v("all_reduce", s.all_reduce), v("busbw_Bps", s.busbw_Bps), v("nccl", s.nccl), v("nccl_check", s.nccl_check);
    v("stage_seconds", s.stage_seconds), v("tree", s.tree), v("doctor_cpu_s", s.doctor_cpu_s);
  }
};

}  // namespace dl::doctor
