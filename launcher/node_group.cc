#include "launcher/node_group.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <cstdio>
#include <map>
#include <thread>

#include "machine/identity.h"
#include "errors/error.h"
#include "errors/exit_codes.h"
#include "launcher/dry_run.h"
#include "launcher/group_torch_store.h"
#include "launcher/job.h"
#include "rendezvous/tcp_store.h"
#include "rendezvous/tcp_store_server.h"
#include "rendezvous/token.h"
#include "wire/handshake.h"
#include "wire/host.h"
#include "wire/record.h"
#include "wire/socket.h"
#include "wire/socket_owner.h"

namespace dl::launcher {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {
constexpr milliseconds kTick{250};        // the watcher's period
constexpr milliseconds kWaitSlice{1000};  // progress refresh while nodes gather

milliseconds secs(double s) { return milliseconds(static_cast<long>(s * 1000)); }

std::string list_ranks(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size() && i < 16; ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
  if (ranks.size() > 16) out += " and " + std::to_string(ranks.size() - 16) + " more";
  return out;
}

// The progress line, only on a terminal; "" clears it.
void progress(const std::string& line) {
  static bool tty = ::isatty(2);
  if (!tty) return;
  write_fully(2, line.empty() ? "\r\033[K" : "\r\033[Kdlaunch: " + line);
}
}  // namespace

RdzvTarget rdzv_target(const RunOptions& o, const rdzv::Environment& env) {
  RdzvTarget t;
  auto get = [&](const char* k) -> std::string {
    auto it = env.find(k);
    return it == env.end() ? "" : it->second;
  };
  t.id = o.rdzv_id;
  if (t.id.empty() && !get("SLURM_JOB_ID").empty())
    t.id = get("SLURM_JOB_ID") + (get("SLURM_STEP_ID").empty() ? "" : "." + get("SLURM_STEP_ID"));
  if (t.id.empty()) t.id = "default";
  if (o.rdzv == RdzvMode::kTcp) {
    t.host = o.rdzv_host, t.port = static_cast<uint16_t>(o.rdzv_port), t.nnodes = o.nnodes, t.node_rank = o.node_rank;
    t.source = "--rdzv";
    return t;
  }
  // One dlaunch per node, started by another launcher: its identity is the node's.
  rdzv::Identity id = rdzv::identity_from_env(env, []() -> rdzv::PmixJobInfo {
    throw UsageError("--rdzv env reads Slurm's, mpirun's or a PMI launcher's variables; PMIx alone is not enough");
  });
  t.source = id.source;
  if (id.local_world_size > 1 || id.local_rank > 0)
    throw UsageError(id.source + " started more than one dlaunch on this node (local rank " +
                     std::to_string(id.local_rank) + "); --rdzv env needs one per node (srun --ntasks-per-node=1, "
                     "mpirun --npernode 1)");
  t.node_rank = o.node_rank >= 0 ? o.node_rank : id.rank;
  t.nnodes = o.nnodes > 0 ? o.nnodes : id.world_size;
  if (o.nnodes > 0 && o.nnodes != id.world_size)
    throw UsageError("--nnodes " + std::to_string(o.nnodes) + " contradicts " + id.source + ", which started " +
                     std::to_string(id.world_size) + " dlaunch processes");
  if (t.node_rank >= t.nnodes)
    throw UsageError("node rank " + std::to_string(t.node_rank) + " is not below the node count " + std::to_string(t.nnodes));
  t.host = id.master_addr;
  if (t.host.empty())
    throw UsageError("the environment (" + id.source + ") does not say which host is node 0: set MASTER_ADDR, or use "
                     "--rdzv tcp://HOST:PORT");
  t.port = static_cast<uint16_t>(o.rdzv_port);
  return t;
}

std::string to_json(const NodeRecord& r) { return wire::encode_record(r); }

NodeRecord node_record_from_json(const std::string& s) {
  return wire::decode_record<NodeRecord>(s, {"the rendezvous' node record"});
}

std::string to_json(const FailedRecord& r) { return wire::encode_record(r); }

FailedRecord failed_record_from_json(const std::string& s) {
  try {
    return wire::decode_record<FailedRecord>(s, {"the rendezvous' failure record"});
  } catch (const wire::RecordError& e) {
    return {exit_codes::kFailure, std::string("another node failed, and ") + e.what()};
  }
}

std::string same_machine_warning(const std::vector<NodeRecord>& nodes) {
  std::map<std::string, std::vector<const NodeRecord*>> by_machine;
  for (const auto& n : nodes)
    if (n.machine && !n.machine->empty()) by_machine[*n.machine].push_back(&n);
  std::string out;
  for (const auto& [machine, same] : by_machine) {
    if (same.size() < 2) continue;
    std::string ranks;
    for (size_t k = 0; k < same.size(); ++k)
      ranks += (k == 0 ? "" : k + 1 == same.size() ? " and " : ", ") + std::to_string(same[k]->node_rank);
    out += "dlaunch: warning: node ranks " + ranks + " run on one machine (" + same.front()->host +
           "): their ranks share LOCAL_RANK values, so `cuda:LOCAL_RANK` puts two ranks on one GPU; run one dlaunch "
           "per machine, with --nproc-per-node for all of its ranks\n";
  }
  return out;
}

hostfiles::Placement world_placement(const std::vector<NodeRecord>& nodes) {
  hostfiles::Placement p;
  int rank = 0;
  for (size_t k = 0; k < nodes.size(); ++k) {
    hostfiles::HostEntry h;
    h.host = nodes[k].host;
    h.slots = nodes[k].nproc;
    h.slots_given = true;
    h.origin = "node rank " + std::to_string(k);
    p.nodes.push_back(h);
    p.local_size.push_back(nodes[k].nproc);
    for (int l = 0; l < nodes[k].nproc; ++l) p.ranks.push_back({rank++, static_cast<int>(k), l});
  }
  return p;
}

namespace {
// The store's host:port as the user gave it, for messages.
std::string where(const RdzvTarget& t) { return t.host + ":" + std::to_string(t.port); }
}  // namespace

std::unique_ptr<NodeGroup> NodeGroup::join(const RunOptions& o, const RdzvTarget& t, const std::string& token) {
  std::unique_ptr<NodeGroup> g(new NodeGroup());
  g->target_ = t;
  g->token_ = token;
  g->keys_ = RdzvKeys(t.id);
  g->hb_timeout_s_ = o.heartbeat_timeout_s;
  g->kill_grace_s_ = o.kill_grace_s;
  const auto deadline = Clock::now() + secs(o.rdzv_timeout_s);
  if (t.node_rank == 0 && wire::is_local_host(t.host)) g->serve_store(deadline);
  auto store = g->connect_store(o.rdzv_timeout_s);
  g->check_joinable(*store);
  g->claim_node_rank(*store, g->own_record(o));
  g->agree_job_id(*store);
  g->wait_for_nodes(*store, deadline, o.rdzv_timeout_s);
  g->read_nodes(*store);
  g->settle(o);
  return g;
}

// Node rank 0 on the store's host serves it. The port may be taken by a
// `dlaunch store` serving it (then this node joins it as a client), or by
// something else: a connection's end that took it as its ephemeral port
// (gone in a moment), or a program that keeps it. The last one is refused
// within seconds, naming the port, rather than node 0 waiting
// --rdzv-timeout (300 s) for a store nobody serves.
void NodeGroup::serve_store(Deadline deadline) {
  const RdzvTarget& t = target_;
  const auto bind_deadline = std::min(deadline, Clock::now() + secs(5));
  for (;;) {
    try {
      server_ = std::make_unique<rdzv::BackgroundStoreServer>(t.host.find(':') != std::string::npos ? "::" : "0.0.0.0",
                                                              t.port, token_);
      return;
    } catch (const IoError& e) {
      // Another user's program there is no store of ours: say whose it is.
      if (auto holder = wire::foreign_holder(t.host, t.port, "store"); !holder.empty())
        throw UsageError("rendezvous: " + holder + ": choose another --rdzv port");
      try {
        (void)wire::connect_tcp(t.host, t.port, std::chrono::milliseconds(300));
        return;  // something listens there: the store, or the client's handshake says what it is
      } catch (const Error&) {
      }
      if (Clock::now() >= bind_deadline)
        throw IoError("rendezvous: node rank 0 cannot listen on port " + std::to_string(t.port) + " (" + e.what() +
                      ") and nothing answers at " + where(t) + ": another program holds the port (`ss -tanp "
                      "'sport = :" + std::to_string(t.port) + "'` names it); pick another with --rdzv-port, or "
                      "the port of --rdzv tcp://HOST:PORT (--master_port)");
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }
}

// The connection join works through, waiting for each answer up to --rdzv-timeout.
std::unique_ptr<rdzv::TcpStore> NodeGroup::connect_store(double timeout_s) {
  const RdzvTarget& t = target_;
  progress("rendezvous: connecting to the store at " + where(t));
  std::unique_ptr<rdzv::TcpStore> store;
  try {
    store = std::make_unique<rdzv::TcpStore>(t.host, t.port, token_, secs(timeout_s));
  } catch (const Error& e) {
    progress("");
    if (wire::is_local_host(t.host))
      if (auto holder = wire::foreign_holder(t.host, t.port, "store"); !holder.empty())
        throw UsageError("rendezvous: " + holder + ": choose another --rdzv port");
    throw IoError("rendezvous: cannot reach the store at " + where(t) + " within " +
                  std::to_string(static_cast<int>(timeout_s)) + " s (" + e.what() +
                  "); node rank 0 serves it when started with that address, or run `dlaunch store --listen " +
                  where(t) + "` there (see --rdzv-timeout)");
  }
  store->set_timeout(secs(timeout_s));
  return store;
}

// A rendezvous that already failed, or whose first node counted the nodes
// otherwise, is not joined.
void NodeGroup::check_joinable(rdzv::TcpStore& store) {
  const RdzvTarget& t = target_;
  if (store.check({keys_.failed(0)})) {
    progress("");
    const FailedRecord f = failed_record_from_json(store.get(keys_.failed(0)));
    throw RemoteError("rendezvous " + t.id + " at " + where(t) + " already failed: " + f.verdict +
                      " (pick a new --rdzv-id to start again)");
  }
  const std::string nn = std::to_string(t.nnodes);
  if (auto first = store.compare_set(keys_.nnodes(), "", nn); first != nn)
    throw UsageError("this node says --nnodes " + nn + " but the nodes already at " + where(t) + " (rendezvous " +
                     t.id + ") said " + first);
}

NodeRecord NodeGroup::own_record(const RunOptions& o) const {
  const RdzvTarget& t = target_;
  NodeRecord me;
  me.node_rank = t.node_rank;
  me.host = wire::host_name();
  me.addr = server_ ? t.host : wire::address_toward(t.host);
  if (me.addr.empty()) me.addr = me.host;
  me.nproc = o.per_node;
  me.master_port = t.node_rank == 0 ? wire::free_tcp_port() : 0;
  if (t.node_rank == 0) me.torch_store = o.torch_store == TorchStoreMode::kServed;
  me.pid = static_cast<int>(::getpid());
  me.machine = machine::machine_identity();
  return me;
}

// Writes this node's record at node/K, unless another node holds rank K.
void NodeGroup::claim_node_rank(rdzv::TcpStore& store, const NodeRecord& me) {
  const RdzvTarget& t = target_;
  const std::string mine = to_json(me);
  if (auto prev = store.compare_set(keys_.node(t.node_rank), "", mine); prev != mine) {
    NodeRecord other = node_record_from_json(prev);
    throw UsageError("node rank " + std::to_string(t.node_rank) + " already joined rendezvous " + t.id + " from " +
                     other.host + " (pid " + std::to_string(other.pid) + "); give each node its own --node-rank");
  }
  store.add(keys_.arrived(), 1);
}

// The first node's proposal is every node's job id.
void NodeGroup::agree_job_id(rdzv::TcpStore& store) {
  job_id_ = store.compare_set(keys_.job_id(), "", "dl-" + wire::to_hex(wire::random_bytes(4)));
  if (job_id_.empty()) job_id_ = store.get(keys_.job_id());
}

// The node ranks without a record yet.
std::vector<int> NodeGroup::absent_nodes(rdzv::TcpStore& store) const {
  std::vector<int> out;
  for (int n = 0; n < target_.nnodes; ++n)
    if (!store.check({keys_.node(n)})) out.push_back(n);
  return out;
}

// Until every node's record is there: a progress line each second, and a
// failure (another node's, or this one's at the deadline) ends the wait.
void NodeGroup::wait_for_nodes(rdzv::TcpStore& store, Deadline deadline, double timeout_s) {
  const RdzvTarget& t = target_;
  const std::vector<std::string> records = keys_.nodes(t.nnodes);
  for (;;) {
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
    try {
      store.wait(records, std::max(milliseconds(1), std::min(left, kWaitSlice)));
      break;
    } catch (const TimeoutError&) {
    }
    if (store.check({keys_.failed(0)})) {
      progress("");
      throw RemoteError(failed_record_from_json(store.get(keys_.failed(0))).verdict);
    }
    if (Clock::now() >= deadline) {
      progress("");
      const auto absent = absent_nodes(store);
      std::string verdict = "rendezvous " + t.id + " at " + where(t) + ": node rank" + (absent.size() > 1 ? "s " : " ") +
                            list_ranks(absent) + " did not arrive within " + std::to_string(static_cast<int>(timeout_s)) +
                            " s (--rdzv-timeout)";
      store.compare_set(keys_.failed(0), "", to_json(FailedRecord{exit_codes::kTimeout, verdict}));
      // The nodes that did come poll once a second: let them read it before
      // the store goes with this process.
      if (server_ && store.add(keys_.arrived(), 0) > 1) std::this_thread::sleep_for(3 * kWaitSlice);
      throw TimeoutError(verdict + "; was dlaunch started there with the same --rdzv and --rdzv-id?");
    }
    const int64_t arrived = store.add(keys_.arrived(), 0);
    std::string line = "rendezvous: " + std::to_string(arrived) + "/" + std::to_string(t.nnodes) + " nodes";
    if (t.nnodes - arrived <= 8)
      line += ", waiting for node rank" + std::string(t.nnodes - arrived > 1 ? "s " : " ") + list_ranks(absent_nodes(store));
    progress(line);
  }
  progress("");
}

void NodeGroup::read_nodes(rdzv::TcpStore& store) {
  for (int n = 0; n < target_.nnodes; ++n) nodes_.push_back(node_record_from_json(store.get(keys_.node(n))));
  if (const std::string w = same_machine_warning(nodes_); !w.empty()) write_fully(2, w);
}

// What the group keeps: the watcher's connection, the identity the nodes
// agreed on, and node 0's torch store.
void NodeGroup::settle(const RunOptions& o) {
  const RdzvTarget& t = target_;
  // From here a store that stops answering is a lost node 0: reconnect for
  // no longer than a heartbeat timeout.
  store_ = std::make_unique<rdzv::TcpStore>(t.host, t.port, token_, secs(o.heartbeat_timeout_s));
  store_->set_timeout(secs(o.heartbeat_timeout_s));
  restarts_ = o.max_restarts > 0;
  const NodeRecord& n0 = nodes_.at(0);
  identity_ = {t.node_rank, token_, job_id_, store_addr(), n0.addr, n0.master_port, n0.torch_store.value_or(false)};
  if (t.node_rank == 0 && identity_.torch_store) serve_torch_store(o.verbose);
}

// Node 0, --torch-store served: torch's c10d store for every node, at the
// MASTER_PORT its record announced. A rank's query the store does not serve
// fails the job on every node, as it does a launcher job.
void NodeGroup::serve_torch_store(bool verbose) {
  std::vector<std::string> hosts, addrs;
  for (const auto& n : nodes_) hosts.push_back(n.host), addrs.push_back(n.addr);
  auto refused = [this](const std::string& why) {
    const std::string verdict = why;
    publish_failure(exit_codes::kUsage, verdict);
    failed(exit_codes::kUsage, verdict);
  };
  auto log = [verbose](const std::string& line) { if (verbose) write_fully(2, "dlaunch: " + line + "\n"); };
  torch_ = std::make_unique<GroupTorchStore>(static_cast<uint16_t>(nodes_.at(0).master_port), world_placement(nodes_),
                                             std::move(hosts), std::move(addrs), std::move(refused), log);
  // torchrun's --master-port names where the nodes meet here, which is
  // dlaunch's own store: MASTER_PORT is another port.
  log("torch's c10d store serves every node on port " + std::to_string(torch_->port()) +
      " (MASTER_PORT); the nodes meet at port " + std::to_string(target_.port) + " (--rdzv, --master-port)");
}

std::vector<std::string> NodeGroup::torch_unfinished() { return torch_ ? torch_->unfinished() : std::vector<std::string>{}; }

NodeGroup::~NodeGroup() {
  stop_ = true;
  restart_stop_ = true;
  if (watcher_.joinable()) watcher_.join();
  if (restarter_.joinable()) restarter_.join();
}

std::string NodeGroup::store_addr() const {
  const std::string& h = target_.host;
  return (h.find(':') != std::string::npos ? "[" + h + "]" : h) + ":" + std::to_string(target_.port);
}

void NodeGroup::watch(std::function<void(int, std::string)> on_failure) {
  {
    std::lock_guard<std::mutex> l(mu_);
    on_failure_ = std::move(on_failure);
  }
  watcher_ = std::thread([this] { watcher_loop(); });
}

void NodeGroup::publish_failure(int code, const std::string& verdict) {
  std::lock_guard<std::mutex> l(mu_);
  if (!to_publish_) {
    to_publish_.emplace(code, "node " + std::to_string(target_.node_rank) + " (" +
                                  nodes_.at(static_cast<size_t>(target_.node_rank)).host + "): " + verdict);
    to_publish_attempt_ = attempt_;
  }
}

void NodeGroup::abandon(int attempt, const std::string& why) {
  std::lock_guard<std::mutex> l(mu_);
  to_abandon_.emplace(attempt, "node " + std::to_string(target_.node_rank) + " (" +
                                   nodes_.at(static_cast<size_t>(target_.node_rank)).host + ") did not restart: " + why);
}

void NodeGroup::next_attempt(int attempt) {
  std::lock_guard<std::mutex> l(mu_);
  attempt_ = attempt;
  to_publish_.reset();
  failure_seen_ = false;
}

void NodeGroup::restart(int attempt, int port, double wait_s, std::function<void(int, std::string)> done) {
  if (restarter_.joinable()) restarter_.join();  // the last restart's thread has called its done()
  restarter_ = std::thread([this, attempt, port, wait_s, done = std::move(done)] {
    try {
      wait_for_restart(attempt, port, wait_s, done);
    } catch (const std::exception& e) {
      done(0, std::string("lost the rendezvous store at ") + store_addr() + " while restarting: " + e.what());
    }
  });
}

// Runs on restarter_, with a store connection of its own (the watcher's is
// the watcher's).
// The nodes other than this one that have left the group (NodeGroup::leave):
// the ranks of each had all ended. One counter read when none has.
std::vector<int> NodeGroup::left_nodes(rdzv::TcpStore& store) const {
  std::vector<int> left;
  if (store.add(keys_.done(), 0) == 0) return left;
  for (int n = 0; n < target_.nnodes; ++n) {
    const std::string hb = keys_.heartbeat(n);
    if (n != target_.node_rank && store.check({hb}) && store.get(hb) == "left") left.push_back(n);
  }
  return left;
}

void NodeGroup::wait_for_restart(int attempt, int port, double wait_s, const std::function<void(int, std::string)>& done) {
  rdzv::TcpStore store(target_.host, target_.port, token_, secs(hb_timeout_s_));
  store.set_timeout(secs(hb_timeout_s_));
  store.set(keys_.ready(attempt, target_.node_rank), std::to_string(port));
  const auto deadline = Clock::now() + secs(wait_s);
  const std::vector<std::string> ready = keys_.ready_all(attempt, target_.nnodes);
  while (!restart_stop_) {
    if (store.check({keys_.abandon(attempt)})) return done(0, store.get(keys_.abandon(attempt)));
    // A node whose ranks had all finished has left the group: a restart of
    // the whole job cannot have it back, so no node waits for it.
    if (const auto left = left_nodes(store); !left.empty()) {
      store.compare_set(keys_.abandon(attempt), "",
                        "node rank" + std::string(left.size() > 1 ? "s " : " ") + list_ranks(left) +
                            " had already finished (all " + (left.size() > 1 ? "their" : "its") +
                            " ranks exited) when this attempt failed; a restart runs every node again");
      return done(0, store.get(keys_.abandon(attempt)));
    }
    if (target_.node_rank == 0 && store.check(ready)) {
      // Every node's ranks of the last attempt are gone: torch's store (its
      // port stays MASTER_PORT) is emptied before any new rank can reach it.
      if (torch_) torch_->clear(), port = torch_->port();
      store.set(keys_.restart_port(attempt), std::to_string(port));
      return done(port, "");
    }
    if (target_.node_rank != 0 && store.check({keys_.restart_port(attempt)}))
      return done(std::stoi(store.get(keys_.restart_port(attempt))), "");
    if (Clock::now() > deadline) {
      std::vector<int> absent;
      for (int n = 0; n < target_.nnodes; ++n)
        if (!store.check({ready[static_cast<size_t>(n)]})) absent.push_back(n);
      const std::string why = "node rank" + std::string(absent.size() > 1 ? "s " : " ") + list_ranks(absent) +
                              " did not get ready to restart within " + std::to_string(static_cast<int>(wait_s)) + " s";
      store.compare_set(keys_.abandon(attempt), "", why);
      return done(0, why);
    }
    std::this_thread::sleep_for(kTick);
  }
}

void NodeGroup::failed(int code, const std::string& verdict) {
  if (failure_seen_.exchange(true)) return;
  std::function<void(int, std::string)> cb;
  {
    std::lock_guard<std::mutex> l(mu_);
    seen_code_ = code, seen_verdict_ = verdict;
    cb = on_failure_;
  }
  if (cb) cb(code, verdict);
}

// Sends this node's failure, if one waits; the first failure of the job wins.
void NodeGroup::publish_pending() {
  std::optional<std::pair<int, std::string>> pub, quit;
  int pub_attempt = 0;
  {
    std::lock_guard<std::mutex> l(mu_);
    pub.swap(to_publish_);
    quit.swap(to_abandon_);
    pub_attempt = to_publish_attempt_;
  }
  if (pub) store_->compare_set(keys_.failed(pub_attempt), "", to_json(FailedRecord{pub->first, pub->second}));
  if (quit) store_->compare_set(keys_.abandon(quit->first), "", quit->second);
}

// The store's host: every node whose heartbeat has not changed for the
// heartbeat timeout is dead, counted once (leave() need not wait for it);
// the first one found fails the job. After a failure the check goes on:
// nodes cut off together (half a partition) are each counted.
void NodeGroup::check_heartbeats(int attempt) {
  const auto now = Clock::now();
  for (const auto& n : nodes_) {
    if (n.node_rank == target_.node_rank || dead_nodes_.count(n.node_rank)) continue;
    const std::string hb = keys_.heartbeat(n.node_rank);
    const std::string v = store_->check({hb}) ? store_->get(hb) : "";
    auto& [last, since] = beats_.try_emplace(n.node_rank, v, now).first->second;
    if (v == "left") continue;
    if (v != last) last = v, since = now;
    if (now - since <= secs(hb_timeout_s_)) continue;
    dead_nodes_.insert(n.node_rank);
    ++dead_;
    const std::string gone = "node " + std::to_string(n.node_rank) + " (" + n.host + ", pid " +
                             std::to_string(n.pid) + ") sent no heartbeat for " +
                             std::to_string(static_cast<int>(hb_timeout_s_)) +
                             " s: its dlaunch was killed or its host is down";
    // Its dlaunch is gone: no restart can have it back (docs/failures.md),
    // and every node's restart says so rather than wait for it.
    store_->compare_set(keys_.abandon(attempt), "", gone);
    if (failure_seen_) {
      // The attempt already failed, often of this (a survivor's rank lost
      // its connection to the dead node's): the cause, as soon as it is known.
      write_fully(2, "dlaunch: " + gone + "\n");
      continue;
    }
    const std::string verdict = gone + "; its ranks count as failed";
    store_->compare_set(keys_.failed(attempt), "", to_json(FailedRecord{exit_codes::kFailure, verdict}));
    failed(exit_codes::kFailure, verdict);
  }
}

void NodeGroup::watcher_loop() {
  int64_t beat = 0;
  try {
    while (!stop_) {
      publish_pending();
      if (!leaving_) store_->set(keys_.heartbeat(target_.node_rank), std::to_string(++beat));
      const int attempt = attempt_;
      if (!failure_seen_ && store_->check({keys_.failed(attempt)})) {
        const FailedRecord f = failed_record_from_json(store_->get(keys_.failed(attempt)));
        failed(f.code, f.verdict);
      }
      if (server_) check_heartbeats(attempt);
      std::this_thread::sleep_for(kTick);
    }
  } catch (const std::exception& e) {
    store_lost_ = true;
    if (!stop_)
      failed(exit_codes::kFailure, "lost the rendezvous store at " + store_addr() +
                                       " (node rank 0's dlaunch hosts it: was it killed?): " + e.what());
  }
}

int NodeGroup::leave(int code) {
  {
    std::lock_guard<std::mutex> l(mu_);
    on_failure_ = nullptr;  // the Job is about to go
  }
  leaving_ = true;
  stop_ = true;  // the watcher's connection is ours from here on
  restart_stop_ = true;
  if (watcher_.joinable()) watcher_.join();
  if (restarter_.joinable()) restarter_.join();
  stop_ = false;
  try {
    if (store_lost_) throw IoError("the store stopped answering earlier");
    publish_pending();
    store_->set(keys_.heartbeat(target_.node_rank), "left");
    const int64_t done = store_->add(keys_.done(), 1);
    // The store's host serves until every node has finished or the job failed.
    if ((server_ || torch_) && done < target_.nnodes) {
      // Keep checking the others' heartbeats meanwhile.
      watcher_ = std::thread([this] { watcher_loop(); });
      while (!failure_seen_ && store_->add(keys_.done(), 0) < target_.nnodes) std::this_thread::sleep_for(kTick);
      // After a failure, give the others their teardown to read the verdict.
      const auto until = Clock::now() + secs(kill_grace_s_) + milliseconds(5000);
      while (store_->add(keys_.done(), 0) + dead_ < target_.nnodes && Clock::now() < until)
        std::this_thread::sleep_for(kTick);
    }
  } catch (const std::exception& e) {
    if (code == 0 && !failure_seen_) {
      write_fully(2, "dlaunch: error: lost the rendezvous store at " + store_addr() + ": " + e.what() + "\n");
      code = exit_codes::kFailure;
    }
  }
  stop_ = true;
  if (watcher_.joinable()) watcher_.join();
  // The last node can publish its failure and count itself done between two
  // of the watcher's reads: the loop above then sees every node done first.
  // One more read, with the watcher stopped, so that failure is not missed.
  if ((server_ || torch_) && !failure_seen_ && !store_lost_) {
    try {
      if (store_->check({keys_.failed(attempt_)})) {
        const FailedRecord f = failed_record_from_json(store_->get(keys_.failed(attempt_)));
        failed(f.code, f.verdict);
      }
    } catch (const std::exception&) {
    }
  }
  if (code == 0 && failure_seen_) {
    std::string why_not;  // a node that would have restarted says why it could not
    try {
      const std::string k = keys_.abandon(attempt_);
      if (restarts_ && store_->check({k})) why_not = "; not restarted: " + store_->get(k);
    } catch (const std::exception&) {
    }
    std::lock_guard<std::mutex> l(mu_);
    write_fully(2, "dlaunch: " + seen_verdict_ + why_not + "\n");
    code = seen_code_ != 0 ? seen_code_ : exit_codes::kFailure;
  }
  return code;
}

int run_per_node(RunOptions o) {
  const RdzvTarget t = rdzv_target(o, rdzv::process_environment());
  auto token = rdzv::load_token(o.token_file);
  if (!token)
    throw UsageError("--rdzv: every node needs the same job token, and it never goes on a command line: "
                     "`export DLAUNCH_TOKEN=$(dlaunch token)` before srun (or on every node), or --token-file FILE "
                     "on a shared filesystem");
  auto group = NodeGroup::join(o, t, *token);
  hostfiles::Placement world = world_placement(group->nodes());
  if (o.dry_run) {
    std::string table;
    try {
      table = rank_map_table(world, o);
    } catch (const Error& e) {
      // What the launch would refuse (too few GPUs or cores): leave the
      // group first, so the other nodes are not kept waiting for this one.
      group->leave(exit_code_for(e.kind()));
      throw;
    }
    std::fputs(table.c_str(), stdout);
    std::fflush(stdout);
    return group->leave(0);
  }
  int code = 0;
  {
    JobParts parts;
    parts.peers = group.get();
    Job job(std::move(o), std::move(world), std::move(parts));
    try {
      code = job.run();
    } catch (...) {
      group->leave(exit_codes::kFailure);
      throw;
    }
    code = group->leave(code);
  }
  return code;
}

}  // namespace dl::launcher
