#include "doctor/doctor.h"

#include <netdb.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <ctime>
#include <future>
#include <iostream>
#include <sstream>
#include <thread>

#include "doctor/analysis.h"
#include "doctor/cuda_probe.h"
#include "doctor/peer.h"
#include "errors/error.h"
#include "hostfiles/allocation.h"
#include "launcher/launch_tree.h"
#include "remote/agent_starter.h"
#include "remote/start_method.h"
#include "remote/ssh/quote.h"
#include "wire/handshake.h"
#include "wire/host.h"
#include "wire/private_dir.h"

namespace dl::doctor {

namespace {
std::string self_exe() {
  char buf[PATH_MAX] = {};
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "dlaunch";
}

// What makes two hostfile entries one machine: "local" for this one, else
// every address its name resolves to, with the ssh port; a simulated host
// (the test bed's names resolve to nothing) is its name.
std::vector<std::string> identity(const hostfiles::HostEntry& e, bool sim) {
  const std::string port = ":" + std::to_string(e.port ? e.port : 22);
  if (wire::is_local_host(e.host)) return {"local" + port};
  if (sim) return {e.host + port};
  addrinfo hints{}, *res = nullptr;
  hints.ai_socktype = SOCK_STREAM;
  std::vector<std::string> keys;
  if (::getaddrinfo(e.host.c_str(), nullptr, &hints, &res) != 0) return {e.host + port};
  for (addrinfo* a = res; a; a = a->ai_next) {
    char buf[NI_MAXHOST];
    if (::getnameinfo(a->ai_addr, a->ai_addrlen, buf, sizeof buf, nullptr, 0, NI_NUMERICHOST) == 0)
      keys.push_back(buf + port);
  }
  ::freeaddrinfo(res);
  return keys;
}

void write_healthy(const std::string& path, const std::vector<hostfiles::HostEntry>& entries, const Report& r) {
  std::ostringstream f;
  int passed = 0;
  for (size_t h = 0; h < entries.size(); ++h) passed += r.host_passed(static_cast<int>(h)) ? 1 : 0;
  std::time_t now = std::time(nullptr);
  char when[64];
  std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", std::localtime(&now));
  f << "# written by dlaunch doctor at " << when << ": " << passed << " of " << entries.size() << " hosts passed\n";
  for (size_t h = 0; h < entries.size(); ++h) {
    if (!r.host_passed(static_cast<int>(h))) continue;
    const auto& e = entries[h];
    f << hostfiles::describe(e) << " slots=" << e.slots;
    if (e.max_slots > 0) f << " max_slots=" << e.max_slots;
    f << "\n";
  }
  try {
    wire::write_private_file(path, f.str());
  } catch (const Error& e) {
    throw IoError(std::string("--write-healthy: ") + e.what());
  }
}
}  // namespace

namespace {
// --launcher as the doctor takes it: auto is libssh (inside Slurm too: srun
// starts every agent of a job in one step, the doctor's peers one by one).
std::string doctor_method(const std::string& asked) {
  if (asked == "auto") return "libssh";
  const char* job = std::getenv("SLURM_JOB_ID");
  const std::string m = remote::word(remote::resolve_start_method(asked, job ? job : ""));
  if (m == "slurm")
    throw UsageError("dlaunch doctor starts its peers with --launcher libssh, ssh or auto, not slurm; inside an allocation "
                     "it reaches the allocation's hosts over ssh");
  return m;
}
}  // namespace

Doctor::Doctor(DoctorOptions o) : o_(std::move(o)), tty_(::isatty(2) == 1) {
  self_exe_ = self_exe();
  method_ = doctor_method(o_.launcher);
  sim_ = method_ == "sim";
  // Simulated hosts run this dlaunch: they are this machine.
  remote_exe_ = o_.prefix.empty() || sim_ ? self_exe_ : o_.prefix + "/bin/dlaunch";
  token_ = wire::new_token();
  // Every simulated host shares this machine's cores: streams at once would
  // divide them, and a slow host would not stand out.
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  link_parallel_ = o_.link_parallel >= 0 ? o_.link_parallel : sim_ ? static_cast<int>(std::max(8u, 16 * cores)) : 0;
  // The first pass's pings fewer still, 2 pairs a core: a round trip waits
  // for both of its ends to be given a core, and with more ping-pong pairs
  // than cores it measures the scheduler (64 simulated hosts on 2 cores:
  // 45-52 of 125 pairs suspects with 32 pairs pinging at once, 6-8 with 4).
  ping_parallel_ = o_.link_parallel >= 0 ? o_.link_parallel : sim_ ? static_cast<int>(2 * cores) : 0;
  seed_ = std::hash<std::string>{}(token_);
}

Doctor::~Doctor() = default;  // the fan closes every peer's link, each its own subtree's

std::vector<int> Doctor::alive() const {
  std::vector<int> out;
  for (size_t h = 0; h < dropped_.size(); ++h)
    if (!dropped_[h]) out.push_back(static_cast<int>(h));
  return out;
}

void Doctor::fail(int host, Check c, const std::string& cell, const std::string& what, const std::string& fix) {
  report_->set(host, c, Mark::kFail, cell);
  report_->add({Mark::kFail, c, {name(host)}, what, fix});
  dropped_[static_cast<size_t>(host)] = true;
}

void Doctor::progress(const std::string& text) const {
  if (!tty_) return;
  std::cerr << "\r\033[K" << (text.empty() ? "" : "dlaunch doctor: " + text) << std::flush;
}

namespace {
// The hosts to check: --hostfile or -H, else those of the allocation the
// doctor runs in, else this machine (as `dlaunch run` picks them).
std::vector<hostfiles::HostEntry> hosts_to_check(const DoctorOptions& o) {
  if (!o.hostfile.empty()) return hostfiles::parse_hostfile(o.hostfile);
  if (!o.hosts.empty()) return hostfiles::parse_host_list(o.hosts);
  if (auto alloc = hostfiles::detect_allocation()) {
    std::cerr << "dlaunch doctor: the hosts of the allocation of " << alloc->scheduler << " job " << alloc->job_id
              << ": " << alloc->source << "\n";
    return alloc->hosts;
  }
  std::cerr << "dlaunch doctor: no --hostfile or -H: checking this machine\n";
  return hostfiles::parse_host_list("localhost");
}
}  // namespace

void Doctor::stage_hostfile() {
  entries_ = hosts_to_check(o_);
  std::vector<std::string> names;
  for (const auto& e : entries_) names.push_back(hostfiles::describe(e));
  report_ = std::make_unique<Report>(names);
  dropped_.assign(entries_.size(), false);
  endpoints_.resize(entries_.size());
  data_endpoint_.resize(entries_.size());
  std::vector<std::vector<std::string>> keys(entries_.size());
  for (size_t i = 0; i < entries_.size(); ++i) keys[i] = identity(entries_[i], sim_);
  auto dup = find_duplicates(entries_.size(), [&](size_t i) { return keys[i]; });
  int slots = 0;
  for (size_t i = 0; i < entries_.size(); ++i) {
    const int h = static_cast<int>(i);
    if (dup[i] >= 0) {
      const std::string& first = name(dup[i]);
      fail(h, Check::kHostfile, "twice",
           name(h) + " (" + entries_[i].origin + ") is the same host as " + first + " (" + entries_[static_cast<size_t>(dup[i])].origin +
               "): it is listed twice and would get twice its ranks",
           "remove one of the two lines");
      continue;
    }
    slots += entries_[i].slots;
    report_->set(h, Check::kHostfile, Mark::kOk, std::to_string(entries_[i].slots) + (entries_[i].slots == 1 ? " slot" : " slots"));
  }
  if (o_.np > slots)
    report_->add({Mark::kFail, Check::kHostfile, {}, "the hosts give " + std::to_string(slots) + " slots, -n " + std::to_string(o_.np) + " needs " + std::to_string(o_.np),
                  "add hosts or slots= to the hostfile, or run with --oversubscribe"});
}

TreeNode Doctor::tree_node(int h, int below) const {
  const auto& e = entries_[static_cast<size_t>(h)];
  return {h, name(h), e.host, e.user, e.port, below};
}

void Doctor::stage_ssh() {
  const auto t0 = std::chrono::steady_clock::now();
  fan_ = std::make_unique<PeerFan>(token_);
  std::vector<int> remote;
  std::vector<TreeNode> local;
  for (int h : alive()) {
    if (wire::is_local_host(entries_[static_cast<size_t>(h)].host)) local.push_back(tree_node(h, 0));
    else remote.push_back(h);
  }
  StartHow how{method_, remote_exe_, o_.ssh_config, static_cast<long>(o_.ssh_timeout_s * 1000), o_.ssh_accept_new,
               o_.ssh_parallel};
  // The launcher's own host is not reached over ssh, as a job's is not: its peer is a child process.
  for (const auto& f : fan_->start(local, StartHow{"local", self_exe_, "", how.ssh_timeout_ms, false, 1}, false))
    fail(f.node, Check::kSsh, "", f.error);
  for (const auto& n : local)
    if (!dropped_[static_cast<size_t>(n.node)]) report_->set(n.node, Check::kSsh, Mark::kOk, "local");
  // The others through the launch tree, as a job's agents: with more of
  // them than --fanout, the peers started here start the rest.
  const launcher::LaunchTree tree(remote, entries_.size(), o_.fanout);
  std::vector<TreeNode> order;
  for (int h : remote) {
    if (tree.parent(h) >= 0) continue;
    const auto sub = tree.subtree(h);
    if (sub.empty()) order.push_back(tree_node(h, 0));
    for (const auto& a : sub) order.push_back(tree_node(a.node, a.below));
  }
  progress("starting peers on " + std::to_string(remote.size()) + " hosts" +
           (tree.flat() ? "" : " (a launch tree of depth " + std::to_string(tree.depth()) + ")"));
  for (const auto& f : fan_->start(order, how, sim_)) {
    if (f.reached) report_->set(f.node, Check::kSsh, Mark::kOk);  // ssh worked; dlaunch did not start there
    fail(f.node, f.reached ? Check::kDlaunch : Check::kSsh, "", f.error);
  }
  report_->notes().tree = TreeNote{method_, o_.fanout, tree.depth(), static_cast<int>(fan_->children())};
  // What a process per host takes to start here: stage 6's jobs start two (job_bounds).
  peers_start_s_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

const Report& Doctor::run() {
  std::map<std::string, double> seconds;
  auto timed = [&](const char* stage, void (Doctor::*fn)()) {
    const auto t0 = std::chrono::steady_clock::now();
    (this->*fn)();
    seconds[stage] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  timed("hostfile", &Doctor::stage_hostfile);
  timed("ssh", &Doctor::stage_ssh);
  timed("env", &Doctor::stage_environment);
  if (!o_.quick) {
    timed("network", &Doctor::stage_network);
    timed("links", &Doctor::stage_links);
    timed("all_reduce", &Doctor::stage_all_reduce);
    timed("nccl", &Doctor::stage_nccl);
  }
  progress("");
  report_->notes().stage_seconds = std::move(seconds);
  rusage self{};
  ::getrusage(RUSAGE_SELF, &self);
  report_->notes().doctor_cpu_s = self.ru_utime.tv_sec + self.ru_stime.tv_sec + (self.ru_utime.tv_usec + self.ru_stime.tv_usec) / 1e6;
  return *report_;
}

int run_doctor_command(const std::vector<std::string>& args) {
  bool help = false;
  DoctorOptions o = parse_doctor_options(args, &help);
  if (help) {
    std::cout << doctor_options_help();
    return 0;
  }
  if (o.peer) return run_peer();
  if (o.cuda_probe) return run_cuda_probe();
  // A file the hostfile could not be written to safely is refused before the checks run.
  try {
    if (!o.write_healthy.empty()) wire::check_private_file(o.write_healthy);
  } catch (const Error& e) {
    throw UsageError(std::string("--write-healthy: ") + e.what());
  }
  Doctor d(o);
  const Report& r = d.run();
  if (o.json) std::cout << r.to_json() << "\n";
  else std::cout << r.render(true, o.verbose);
  if (!o.write_healthy.empty()) write_healthy(o.write_healthy, d.entries(), r);
  return r.exit_code();
}

}  // namespace dl::doctor
