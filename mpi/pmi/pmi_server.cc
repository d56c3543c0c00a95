#include "mpi/pmi/pmi_server.h"

#include <cstdlib>

#include "errors/error.h"

namespace dl::mpi::pmi {

namespace {
// Hydra's limits (its PMI_MAXKVSLEN, PMI_MAXKEYLEN, PMI_MAXVALLEN); MPICH
// sizes its PMI-1 values and its business cards by them.
constexpr int kKvsNameMax = 256, kKeyMax = 64, kValMax = 1024;

std::string with_underscores(std::string s) {
  for (char& ch : s)
    if (ch == ' ') ch = '_';
  return s;
}

// MPICH passes MPI_Abort's error code to PMI-1's abort; PMI-2's carries only
// the text ("application called MPI_Abort(MPI_COMM_WORLD, 3) - process 0").
int abort_code_from(const std::string& msg) {
  const auto at = msg.find("MPI_Abort(");
  if (at == std::string::npos) return 1;
  const auto comma = msg.find(',', at);
  if (comma == std::string::npos) return 1;
  char* end = nullptr;
  const long v = std::strtol(msg.c_str() + comma + 1, &end, 10);
  return (end && *end == ')' && v > 0 && v < 256) ? static_cast<int>(v) : 1;
}
// The value of `key` in `c`, "" when absent.
std::string value_of(const Command& c, const char* key) {
  const std::string* v = c.get(key);
  return v ? *v : std::string();
}
}  // namespace

PmiServer::PmiServer(PmiJob job, Hooks hooks) : job_(std::move(job)), hooks_(std::move(hooks)) {}

void PmiServer::on_bytes(int rank, std::string_view data) {
  Conn& c = conns_[rank];
  if (c.closed) return;
  c.buf.append(data);
  while (!c.closed) {
    Parsed p = next_command(c.buf);
    if (p.kind == Parsed::kNeedMore) return;
    const bool v2 = c.buf.rfind("cmd=", 0) != 0 && c.buf.rfind("mcmd=", 0) != 0;
    c.buf.erase(0, p.consumed);
    if (p.kind == Parsed::kCommand) {
      handle(rank, p.command);
      continue;
    }
    warn_once("malformed", "dlaunch-agent: rank " + std::to_string(rank) + " sent a malformed PMI command: " +
                               p.error + (p.fatal ? "; closing its PMI connection" : ""));
    hooks_.reply(rank, encode(v2 ? 2 : 1, "error", {{"rc", "-1"}, {v2 ? "errmsg" : "msg", p.error}}));
    if (p.fatal) {
      c.closed = true;
      hooks_.close(rank);
    }
  }
}

void PmiServer::on_closed(int rank) {
  Conn& c = conns_[rank];
  c.closed = true;
  c.buf.clear();
}

void PmiServer::handle(int rank, const Command& c) {
  if (!job_.serve) return refuse(rank, c);
  if (c.version == 2) return handle_v2(rank, c);
  handle_v1(rank, c);
}

// --mpi pmix: the program speaks PMI; say so instead of serving it, so that
// it fails with that message rather than running as a singleton. MPICH
// answers the refused init with PMI_Abort: that abort ends the job, as any
// MPI_Abort does (closing the socket instead would leave MPICH writing to
// it, and the ranks would die of SIGPIPE).
void PmiServer::refuse(int rank, const Command& c) {
  warn_once("refused", "dlaunch-agent: error: rank " + std::to_string(rank) +
                           " speaks PMI (an MPICH, Intel MPI or MVAPICH program), but this job serves only PMIx "
                           "(--mpi pmix); run it with --mpi pmi or --mpi auto");
  if (c.name == "init")
    return hooks_.reply(rank, encode(c.version, "response_to_init", {{"pmi_version", "1"}, {"pmi_subversion", "1"}, {"rc", "-1"}}));
  if (c.name == "abort") return hooks_.abort(rank, 1, "its PMI client was refused (--mpi pmix)");
  conns_[rank].closed = true;
  hooks_.close(rank);
}

void PmiServer::send(int rank, const Command& req, std::string_view cmd, Pairs args) {
  if (req.version == 2)
    if (const std::string* thrid = req.get("thrid")) args.insert(args.begin(), {"thrid", *thrid});
  hooks_.reply(rank, encode(req.version, cmd, args));
}

void PmiServer::unserved(int rank, const Command& c, const std::string& what) {
  warn_once(c.name, "dlaunch-agent: error: rank " + std::to_string(rank) + " asked for " + what +
                        ", which dlaunch's PMI server does not serve (PMI command '" + c.name + "')");
  const std::string why = "dlaunch does not serve " + what;
  if (c.version == 2) return send(rank, c, c.name + "-response", {{"rc", "-1"}, {"errmsg", why}});
  const std::string reply = c.name == "spawn" ? "spawn_result"
                            : c.name.find("_name") != std::string::npos
                                ? c.name.substr(0, c.name.find("_name")) + "_result"
                                : c.name + "_result";
  send(rank, c, reply, {{"rc", "-1"}, {"msg", with_underscores(why)}});
}

const std::string* PmiServer::lookup(const std::string& key) const {
  if (key == "PMI_process_mapping" && !job_.process_mapping.empty()) return &job_.process_mapping;
  auto it = kvs_.find(key);
  return it == kvs_.end() ? nullptr : &it->second;
}

void PmiServer::handle_v1(int rank, const Command& c) {
  const std::string& n = c.name;
  auto arg = [&](const char* k) { return value_of(c, k); };
  if (n == "init") {
    const std::string v = arg("pmi_version");
    if (v == "1" || v == "2")
      return send(rank, c, "response_to_init",
                  {{"pmi_version", v}, {"pmi_subversion", v == "1" ? "1" : "0"}, {"rc", "0"}});
    return send(rank, c, "response_to_init", {{"pmi_version", "1"}, {"pmi_subversion", "1"}, {"rc", "-1"}});
  }
  if (n == "get_maxes")
    return send(rank, c, "maxes",
                {{"kvsname_max", std::to_string(kKvsNameMax)}, {"keylen_max", std::to_string(kKeyMax)},
                 {"vallen_max", std::to_string(kValMax)}});
  if (n == "get_appnum") return send(rank, c, "appnum", {{"appnum", std::to_string(app_of(job_.map, rank))}});
  if (n == "get_my_kvsname") return send(rank, c, "my_kvsname", {{"kvsname", job_.kvsname()}});
  if (n == "get_universe_size") return send(rank, c, "universe_size", {{"size", std::to_string(universe_size(job_.map))}});
  if (n == "put") {
    if (arg("kvsname") != job_.kvsname())
      return send(rank, c, "put_result", {{"rc", "-1"}, {"msg", "unknown_kvsname_" + arg("kvsname")}});
    if (!c.get("key") || arg("key").empty()) return send(rank, c, "put_result", {{"rc", "-1"}, {"msg", "no_key"}});
    pending_.emplace_back(arg("key"), arg("value"));
    return send(rank, c, "put_result", {{"rc", "0"}, {"msg", "success"}});
  }
  if (n == "get") {
    const std::string* v = arg("kvsname") == job_.kvsname() ? lookup(arg("key")) : nullptr;
    if (!v) return send(rank, c, "get_result", {{"rc", "-1"}, {"msg", "key_" + arg("key") + "_not_found"}});
    return send(rank, c, "get_result", {{"rc", "0"}, {"msg", "success"}, {"value", *v}});
  }
  if (n == "barrier_in") return enter_fence(rank, c);
  if (n == "finalize") {
    conns_[rank].finalized = true;
    return send(rank, c, "finalize_ack", {});
  }
  if (n == "abort") {
    char* end = nullptr;
    const std::string code = arg("exitcode");
    long v = std::strtol(code.c_str(), &end, 10);
    if (code.empty() || *end) v = 1;
    return abort(rank, static_cast<int>(v), "called MPI_Abort (PMI-1 abort, exit code " + std::to_string(v) + ")");
  }
  if (n == "spawn") return unserved(rank, c, "MPI_Comm_spawn");
  if (n == "publish_name" || n == "unpublish_name" || n == "lookup_name")
    return unserved(rank, c, "MPI_Publish_name/MPI_Lookup_name");
  unserved(rank, c, "an unknown PMI-1 command");
}

void PmiServer::handle_v2(int rank, const Command& c) {
  const std::string& n = c.name;
  auto arg = [&](const char* k) { return value_of(c, k); };
  if (n == "fullinit") {
    const std::string* id = c.get("pmirank");
    if (id && *id != "-1" && *id != std::to_string(rank))
      return send(rank, c, "fullinit-response", {{"rc", "-1"}, {"errmsg", "pmirank " + *id + " is not this rank"}});
    return send(rank, c, "fullinit-response",
                {{"pmi-version", "2"}, {"pmi-subversion", "0"}, {"rank", std::to_string(rank)},
                 {"size", std::to_string(job_.map.world_size)}, {"appnum", std::to_string(app_of(job_.map, rank))}, {"debugged", "FALSE"},
                 {"pmiverbose", "FALSE"}, {"rc", "0"}});
  }
  if (n == "job-getid") return send(rank, c, "job-getid-response", {{"jobid", job_.kvsname()}, {"rc", "0"}});
  if (n == "kvs-put") {
    if (arg("key").empty()) return send(rank, c, "kvs-put-response", {{"rc", "-1"}, {"errmsg", "no key"}});
    pending_.emplace_back(arg("key"), arg("value"));
    return send(rank, c, "kvs-put-response", {{"rc", "0"}});
  }
  if (n == "kvs-get") {
    const std::string* v = lookup(arg("key"));
    if (!v) return send(rank, c, "kvs-get-response", {{"found", "FALSE"}, {"rc", "0"}});
    return send(rank, c, "kvs-get-response", {{"found", "TRUE"}, {"value", *v}, {"rc", "0"}});
  }
  if (n == "kvs-fence") return enter_fence(rank, c);
  if (n == "info-putnodeattr") {
    node_attrs_[arg("key")] = arg("value");
    send(rank, c, "info-putnodeattr-response", {{"rc", "0"}});
    auto w = attr_waiters_.find(arg("key"));
    if (w == attr_waiters_.end()) return;
    auto waiters = std::move(w->second);
    attr_waiters_.erase(w);
    for (const auto& x : waiters) {
      Command req;
      req.version = 2;
      if (!x.thrid.empty()) req.args.emplace_back("thrid", x.thrid);
      send(x.rank, req, "info-getnodeattr-response", {{"found", "TRUE"}, {"value", node_attrs_[arg("key")]}, {"rc", "0"}});
    }
    return;
  }
  if (n == "info-getnodeattr") {
    auto it = node_attrs_.find(arg("key"));
    if (it != node_attrs_.end())
      return send(rank, c, "info-getnodeattr-response", {{"found", "TRUE"}, {"value", it->second}, {"rc", "0"}});
    if (arg("wait") == "TRUE") return attr_waiters_[arg("key")].push_back({rank, arg("thrid")});
    return send(rank, c, "info-getnodeattr-response", {{"found", "FALSE"}, {"rc", "0"}});
  }
  if (n == "info-getjobattr") {
    std::string v;
    if (arg("key") == "PMI_process_mapping") v = job_.process_mapping;
    else if (arg("key") == "universeSize") v = std::to_string(universe_size(job_.map));
    if (v.empty()) return send(rank, c, "info-getjobattr-response", {{"found", "FALSE"}, {"rc", "0"}});
    return send(rank, c, "info-getjobattr-response", {{"found", "TRUE"}, {"value", v}, {"rc", "0"}});
  }
  if (n == "finalize") {
    conns_[rank].finalized = true;
    return send(rank, c, "finalize-response", {{"rc", "0"}});
  }
  if (n == "abort") {
    const std::string m = arg("msg");
    return abort(rank, abort_code_from(m), m.empty() ? "called MPI_Abort (PMI-2 abort)" : m);
  }
  if (n == "spawn") return unserved(rank, c, "MPI_Comm_spawn");
  if (n == "name-publish" || n == "name-unpublish" || n == "name-lookup")
    return unserved(rank, c, "MPI_Publish_name/MPI_Lookup_name");
  unserved(rank, c, "an unknown PMI-2 command");
}

void PmiServer::abort(int rank, int status, const std::string& msg) {
  hooks_.abort(rank, status, msg);
  // The client waits for no answer (PMI-1 reads one and ignores it): the
  // launcher's teardown ends the rank.
}

void PmiServer::enter_fence(int rank, const Command& c) {
  Conn& conn = conns_[rank];
  if (conn.in_fence) {
    const bool v2 = c.version == 2;
    return send(rank, c, v2 ? "kvs-fence-response" : "barrier_out",
                {{"rc", "-1"}, {v2 ? "errmsg" : "msg", v2 ? "already in a fence" : "already_in_a_barrier"}});
  }
  conn.in_fence = true;
  conn.fence_version = c.version;
  const std::string* thrid = c.version == 2 ? c.get("thrid") : nullptr;
  conn.fence_thrid = thrid ? *thrid : "";
  if (++in_fence_ < job_.local_ranks().size()) return;
  fence_sent_ = true;
  std::string blob = encode_puts(pending_);
  pending_.clear();
  hooks_.fence(kFenceIdBit | fence_seq_, std::move(blob));
}

void PmiServer::fence_done(uint64_t id, std::string_view all_blobs) {
  if (!fence_sent_ || id != (kFenceIdBit | fence_seq_)) {
    hooks_.warn("dlaunch-agent: PMI fence result for an unexpected fence " + std::to_string(id & ~kFenceIdBit));
    return;
  }
  std::vector<std::pair<std::string, std::string>> puts;
  try {
    puts = decode_puts(all_blobs);
  } catch (const Error& e) {
    hooks_.warn(std::string("dlaunch-agent: PMI fence ") + std::to_string(fence_seq_) + ": " + e.what());
    return fence_failed(id, e.what());
  }
  for (auto& [k, v] : puts) kvs_[std::move(k)] = std::move(v);
  ++fence_seq_;
  fence_sent_ = false;
  in_fence_ = 0;
  for (auto& [rank, conn] : conns_) {
    if (!conn.in_fence) continue;
    conn.in_fence = false;
    Command req;
    req.version = conn.fence_version;
    if (!conn.fence_thrid.empty()) req.args.emplace_back("thrid", conn.fence_thrid);
    if (conn.closed) continue;
    if (req.version == 2) send(rank, req, "kvs-fence-response", {{"rc", "0"}});
    else send(rank, req, "barrier_out", {});
  }
}

void PmiServer::fence_failed(uint64_t id, const std::string& why) {
  if (!fence_sent_ || id != (kFenceIdBit | fence_seq_)) return;
  fence_sent_ = false;
  in_fence_ = 0;
  for (auto& [rank, conn] : conns_) {
    if (!conn.in_fence) continue;
    conn.in_fence = false;
    if (conn.closed) continue;
    // A reply the client does not expect fails its barrier (PMI-1 checks
    // only the command's name); PMI-2 reads rc.
    if (conn.fence_version == 2) {
      Command req;
      req.version = 2;
      if (!conn.fence_thrid.empty()) req.args.emplace_back("thrid", conn.fence_thrid);
      send(rank, req, "kvs-fence-response", {{"rc", "-1"}, {"errmsg", "fence failed: " + why}});
    } else {
      hooks_.reply(rank, encode(1, "barrier_failed", {{"rc", "-1"}, {"msg", with_underscores("fence failed: " + why)}}));
    }
  }
}

void PmiServer::warn_once(const std::string& key, const std::string& line) {
  if (warned_.insert(key).second) hooks_.warn(line);
}

}  // namespace dl::mpi::pmi
