#include "wire/host.h"

#include <ifaddrs.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <unistd.h>

#include <set>

namespace dl::wire {

std::string host_name() {
  char name[HOST_NAME_MAX + 1] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "";
  return name;
}

std::string numeric_address(const sockaddr* addr, socklen_t len) {
  if (!addr || (addr->sa_family != AF_INET && addr->sa_family != AF_INET6)) return "";
  char buf[NI_MAXHOST] = {};
  if (::getnameinfo(addr, len, buf, sizeof buf, nullptr, 0, NI_NUMERICHOST) != 0) return "";
  return buf;
}

std::string address_toward(const std::string& host) {
  addrinfo hints{}, *res = nullptr;
  hints.ai_socktype = SOCK_DGRAM;
  if (host.empty() || ::getaddrinfo(host.c_str(), "9", &hints, &res) != 0 || !res) return "";
  std::string out;
  for (addrinfo* a = res; a && out.empty(); a = a->ai_next) {
    const int fd = ::socket(a->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    sockaddr_storage me{};
    socklen_t len = sizeof me;
    if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0 && ::getsockname(fd, reinterpret_cast<sockaddr*>(&me), &len) == 0)
      out = numeric_address(reinterpret_cast<sockaddr*>(&me), len);
    ::close(fd);
  }
  ::freeaddrinfo(res);
  return out;
}

namespace {
std::set<std::string> own_names() {
  std::set<std::string> names;
  const std::string full = host_name();
  if (!full.empty()) names.insert(full);
  if (auto dot = full.find('.'); dot != std::string::npos) names.insert(full.substr(0, dot));
  ifaddrs* ifs = nullptr;
  if (::getifaddrs(&ifs) != 0) return names;
  for (ifaddrs* i = ifs; i; i = i->ifa_next) {
    if (!i->ifa_addr) continue;
    const socklen_t len = i->ifa_addr->sa_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    if (std::string a = numeric_address(i->ifa_addr, len); !a.empty()) names.insert(a);
  }
  ::freeifaddrs(ifs);
  return names;
}
}  // namespace

bool is_local_host(const std::string& host) {
  if (host == "localhost" || host == "127.0.0.1" || host == "::1" || host.rfind("127.", 0) == 0) return true;
  static const std::set<std::string> own = own_names();
  return own.count(host) > 0;
}

}  // namespace dl::wire
