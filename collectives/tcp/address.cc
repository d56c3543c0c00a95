#include "collectives/tcp/address.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <sstream>
#include <vector>

#include "control/env_names.h"
#include "errors/error.h"
#include "wire/host.h"
#include "wire/socket.h"

namespace dl::coll::tcp {
namespace {

struct Iface { std::string name, addr; bool loopback, up; };

std::vector<Iface> list_ipv4() {
  std::vector<Iface> out;
  ifaddrs* ifs = nullptr;
  if (::getifaddrs(&ifs) != 0) return out;
  for (ifaddrs* i = ifs; i; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
    char buf[INET_ADDRSTRLEN];
    ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, buf, sizeof buf);
    out.push_back({i->ifa_name, buf, (i->ifa_flags & IFF_LOOPBACK) != 0, (i->ifa_flags & IFF_UP) != 0});
  }
  ::freeifaddrs(ifs);
  return out;
}

bool matches(const std::string& name, std::string spec) {
  bool exclude = !spec.empty() && spec[0] == '^';
  if (exclude) spec.erase(0, 1);
  bool exact = !spec.empty() && spec[0] == '=';
  if (exact) spec.erase(0, 1);
  bool hit = false;
  std::stringstream ss(spec);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty() && (exact ? name == item : name.rfind(item, 0) == 0)) hit = true;
  return exclude ? !hit : hit;
}

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

}  // namespace

std::string interface_address(const std::string& spec) {
  for (const auto& i : list_ipv4())
    if (i.up && matches(i.name, spec)) return i.addr;
  return "";
}

std::string choose_address(const std::string& explicit_addr, const std::string& ifname) {
  if (!explicit_addr.empty()) return explicit_addr;
  std::string spec = ifname, source = "the interface option";
  for (const char* var : {dl::env::kDlSocketIfname, "NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"}) {
    if (!spec.empty()) break;
    if (const char* v = env(var)) spec = v, source = std::string("$") + var;
  }
  if (!spec.empty()) {
    std::string a = interface_address(spec);
    if (!a.empty()) return a;
    std::string have;
    for (const auto& i : list_ipv4()) have += (have.empty() ? "" : ", ") + i.name + " (" + i.addr + ")";
    throw UsageError(source + "='" + spec + "' matches no interface with an IPv4 address that is up; this host has: " +
                     (have.empty() ? "none" : have));
  }
  std::string store_host;
  if (const char* v = env(dl::env::kDlStoreAddr)) {
    try { store_host = wire::split_host_port(v, dl::env::kDlStoreAddr).first; } catch (const Error&) {}
  }
  if (store_host.empty())
    if (const char* v = env(dl::env::kMasterAddr)) store_host = v;
  if (!store_host.empty()) {
    std::string a = wire::address_toward(store_host);
    if (!a.empty()) return a;
  }
  for (const auto& i : list_ipv4())
    if (i.up && !i.loopback) return i.addr;
  return "127.0.0.1";
}

}  // namespace dl::coll::tcp
