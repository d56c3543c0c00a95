#include "wire/socket_owner.h"

#include <arpa/inet.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <unordered_map>

namespace dl::wire {

namespace {

// One row of a socket table: "ADDR:PORT" of each end as the kernel prints
// them (an address as its raw 32-bit words in %08X, the port in %04X), the
// state (0A: listening), the owner's uid and the socket's inode.
struct Row {
  char local[64], remote[64];
  unsigned state = 0, uid = 0;
  unsigned long inode = 0;
  // A socket no process holds (TIME_WAIT, an orphaned FIN_WAIT2, a request
  // socket) is listed with inode 0 and uid 0: it has no owner, and its uid
  // says nothing (root's, to a reader that trusted it).
  std::optional<unsigned> owner() const { return inode ? std::optional<unsigned>(uid) : std::nullopt; }
};

// Calls `fn` on each row of `table` until it returns false.
void for_each_row(const char* table, const std::function<bool(const Row&)>& fn) {
  std::FILE* f = std::fopen(table, "re");
  if (!f) return;
  char line[512];
  Row r;
  while (std::fgets(line, sizeof line, f)) {
    // sl local rem st tx:rx tr:when retrnsmt uid timeout inode ...
    if (std::sscanf(line, " %*s %63s %63s %x %*s %*s %*s %u %*s %lu", r.local, r.remote, &r.state, &r.uid,
                    &r.inode) != 5)
      continue;
    if (!fn(r)) break;
  }
  std::fclose(f);
}

// An address as a table prints it; IPv4-mapped IPv6 addresses as IPv4 (the
// peer's own socket is an IPv4 one, in /proc/net/tcp). `v6` says which table.
struct TableAddress {
  std::string addr;  // without the port
  uint16_t port = 0;
  bool v6 = false;
  bool loopback = false;
};

std::optional<TableAddress> table_address(const sockaddr_storage& ss) {
  TableAddress t;
  char buf[40];
  if (ss.ss_family == AF_INET) {
    const auto& a = reinterpret_cast<const sockaddr_in&>(ss);
    std::snprintf(buf, sizeof buf, "%08X", a.sin_addr.s_addr);
    t.port = ntohs(a.sin_port);
    t.loopback = (ntohl(a.sin_addr.s_addr) >> 24) == 127;
  } else if (ss.ss_family == AF_INET6) {
    const auto& a = reinterpret_cast<const sockaddr_in6&>(ss);
    uint32_t w[4];
    std::memcpy(w, &a.sin6_addr, sizeof w);
    t.port = ntohs(a.sin6_port);
    if (IN6_IS_ADDR_V4MAPPED(&a.sin6_addr)) {
      std::snprintf(buf, sizeof buf, "%08X", w[3]);
      t.loopback = (ntohl(w[3]) >> 24) == 127;
    } else {
      std::snprintf(buf, sizeof buf, "%08X%08X%08X%08X", w[0], w[1], w[2], w[3]);
      t.v6 = true;
      t.loopback = IN6_IS_ADDR_LOOPBACK(&a.sin6_addr);
    }
  } else {
    return std::nullopt;
  }
  t.addr = buf;
  return t;
}

std::string with_port(const std::string& addr, uint16_t port) {
  char p[8];
  std::snprintf(p, sizeof p, ":%04X", port);
  return addr + p;
}

}  // namespace

std::optional<unsigned> loopback_peer_uid(uint16_t peer_port, uint16_t our_port, const char* table) {
  const std::string want_local = with_port("0100007F", peer_port), want_remote = with_port("0100007F", our_port);
  std::optional<unsigned> uid;
  for_each_row(table, [&](const Row& r) {
    if (want_local != r.local || want_remote != r.remote) return true;
    uid = r.owner();
    return false;
  });
  return uid;
}

namespace {

// A peer's and our end of one accepted socket, as the tables print them,
// with the raw addresses for sock_diag.
struct Ends {
  TableAddress peer, ours;
  sockaddr_storage peer_sa{}, ours_sa{};
};

std::optional<Ends> ends_of(int fd) {
  Ends e;
  socklen_t pl = sizeof e.peer_sa, ol = sizeof e.ours_sa;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&e.peer_sa), &pl) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&e.ours_sa), &ol) != 0)
    return std::nullopt;
  auto p = table_address(e.peer_sa), o = table_address(e.ours_sa);
  if (!p || !o || p->v6 != o->v6) return std::nullopt;
  e.peer = *p, e.ours = *o;
  return e;
}

// The raw address bytes of `ss` (IPv4-mapped IPv6 as IPv4) into `out`.
void raw_address(const sockaddr_storage& ss, bool v6, uint32_t out[4]) {
  if (ss.ss_family == AF_INET) {
    out[0] = reinterpret_cast<const sockaddr_in&>(ss).sin_addr.s_addr;
    return;
  }
  const auto& a = reinterpret_cast<const sockaddr_in6&>(ss).sin6_addr;
  if (v6) std::memcpy(out, &a, 16);
  else std::memcpy(out, reinterpret_cast<const uint8_t*>(&a) + 12, 4);
}

// Exact socket lookups through NETLINK_SOCK_DIAG.
class Diag {
 public:
  Diag() : fd_(::socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG)) {
    const timeval tv{0, 200000};
    if (fd_ >= 0) ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  ~Diag() {
    if (fd_ >= 0) ::close(fd_);
  }
  bool usable() const { return fd_ >= 0 && !broken_; }
  // The uid of the TCP socket whose local end is the peer's and remote end ours.
  std::optional<unsigned> uid_of(const Ends& e) {
    struct {
      nlmsghdr nlh;
      inet_diag_req_v2 r;
    } req{};
    req.nlh.nlmsg_len = sizeof req;
    req.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    req.nlh.nlmsg_flags = NLM_F_REQUEST;
    req.r.sdiag_family = e.peer.v6 ? AF_INET6 : AF_INET;
    req.r.sdiag_protocol = IPPROTO_TCP;
    req.r.idiag_states = ~0u;
    req.r.id.idiag_sport = htons(e.peer.port);
    req.r.id.idiag_dport = htons(e.ours.port);
    raw_address(e.peer_sa, e.peer.v6, req.r.id.idiag_src);
    raw_address(e.ours_sa, e.peer.v6, req.r.id.idiag_dst);
    req.r.id.idiag_cookie[0] = req.r.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
    if (::send(fd_, &req, sizeof req, 0) != static_cast<ssize_t>(sizeof req)) return broken_ = true, std::nullopt;
    alignas(nlmsghdr) char buf[8192];
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n < static_cast<ssize_t>(sizeof(nlmsghdr))) return broken_ = true, std::nullopt;
    const auto* h = reinterpret_cast<const nlmsghdr*>(buf);
    if (h->nlmsg_type == SOCK_DIAG_BY_FAMILY && h->nlmsg_len >= NLMSG_LENGTH(sizeof(inet_diag_msg))) {
      const auto* m = static_cast<const inet_diag_msg*>(NLMSG_DATA(h));
      // Inode 0: a socket no process holds (its client closed it), whose
      // idiag_uid of 0 is nobody's.
      if (m->idiag_inode == 0) return std::nullopt;
      return m->idiag_uid;
    }
    // ENOENT: no such socket (the peer is gone). Anything else: not usable here.
    if (h->nlmsg_type == NLMSG_ERROR && h->nlmsg_len >= NLMSG_LENGTH(sizeof(nlmsgerr)) &&
        static_cast<const nlmsgerr*>(NLMSG_DATA(h))->error != -ENOENT)
      broken_ = true;
    return std::nullopt;
  }

 private:
  int fd_;
  bool broken_ = false;
};

// The tables' answer for the local peers in `ends` still without a uid.
void owners_from_tables(const std::vector<std::optional<Ends>>& ends, std::vector<PeerOwner>& out, const char* table,
                        const char* table6) {
  std::unordered_map<std::string, size_t> want[2];  // "peer ours" as the peer's own row lists them
  for (size_t i = 0; i < ends.size(); ++i) {
    if (!ends[i] || !out[i].local || out[i].uid) continue;
    const Ends& e = *ends[i];
    want[e.peer.v6][with_port(e.peer.addr, e.peer.port) + " " + with_port(e.ours.addr, e.ours.port)] = i;
  }
  for (int v6 = 0; v6 < 2; ++v6) {
    if (want[v6].empty()) continue;
    size_t left = want[v6].size();
    for_each_row(v6 ? table6 : table, [&](const Row& r) {
      auto it = want[v6].find(std::string(r.local) + " " + r.remote);
      if (it == want[v6].end()) return true;
      out[it->second].uid = r.owner();
      return --left > 0;
    });
  }
}

}  // namespace

std::vector<PeerOwner> local_peer_owners(const std::vector<int>& fds, bool ask_kernel, const char* table,
                                         const char* table6) {
  std::vector<PeerOwner> out(fds.size());
  std::vector<std::optional<Ends>> ends(fds.size());
  bool any_local = false;
  for (size_t i = 0; i < fds.size(); ++i) {
    ends[i] = ends_of(fds[i]);
    out[i].local = ends[i] && (ends[i]->peer.loopback || ends[i]->peer.addr == ends[i]->ours.addr);
    any_local = any_local || out[i].local;
  }
  if (!any_local) return out;
  if (ask_kernel) {
    Diag diag;
    for (size_t i = 0; i < fds.size() && diag.usable(); ++i)
      if (out[i].local) out[i].uid = diag.uid_of(*ends[i]);
    if (diag.usable()) return out;
  }
  owners_from_tables(ends, out, table, table6);
  return out;
}

std::optional<unsigned> listener_uid(uint16_t port, const char* table, const char* table6) {
  char suffix[8];
  std::snprintf(suffix, sizeof suffix, ":%04X", port);
  std::optional<unsigned> uid;
  for (const char* t : {table, table6}) {
    for_each_row(t, [&](const Row& r) {
      const size_t n = std::strlen(r.local);
      if (r.state != 0x0A || n < 5 || std::strcmp(r.local + n - 5, suffix) != 0) return true;
      uid = r.owner();
      return false;
    });
    if (uid) break;
  }
  return uid;
}

std::string describe_uid(unsigned uid) {
  passwd pw{}, *found = nullptr;
  char buf[4096];
  const std::string id = "uid " + std::to_string(uid);
  if (::getpwuid_r(uid, &pw, buf, sizeof buf, &found) != 0 || !found) return id;
  return "user " + std::string(found->pw_name) + " (" + id + ")";
}

bool is_loopback_host(const std::string& host) {
  if (host == "localhost" || host == "::1") return true;
  in_addr a{};
  return ::inet_pton(AF_INET, host.c_str(), &a) == 1 && (ntohl(a.s_addr) >> 24) == 127;
}

std::string foreign_holder(const std::string& host, uint16_t port, const std::string& what) {
  const auto uid = listener_uid(port);
  if (!uid || *uid == ::geteuid()) return "";
  return "port " + std::to_string(port) + " on " + host + " is held by " + describe_uid(*uid) + ", not by a dlaunch " +
         what;
}

}  // namespace dl::wire
