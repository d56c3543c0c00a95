#include "mpi/pmix/listener_seal.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "mpi/pmix/front_door.h"
#include "wire/socket_owner.h"
#include "errors/error.h"

namespace dl::mpi::pmix {
namespace {

// This process's socket descriptors.
std::vector<int> own_sockets() {
  std::vector<int> out;
  DIR* d = ::opendir("/proc/self/fd");
  if (d == nullptr) return out;
  const int self = ::dirfd(d);
  while (dirent* e = ::readdir(d)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == self) continue;
    struct stat st;
    if (::fstat(static_cast<int>(fd), &st) == 0 && S_ISSOCK(st.st_mode)) out.push_back(static_cast<int>(fd));
  }
  ::closedir(d);
  return out;
}

bool listening(int fd) {
  int on = 0;
  socklen_t len = sizeof on;
  return ::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &on, &len) == 0 && on != 0;
}

// The loopback port `fd` is bound to, or 0 when it is not an IPv4 loopback socket.
uint16_t loopback_port(int fd) {
  sockaddr_in a{};
  socklen_t len = sizeof a;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0 || a.sin_family != AF_INET ||
      a.sin_addr.s_addr != htonl(INADDR_LOOPBACK))
    return 0;
  return ntohs(a.sin_port);
}

int unix_listener(const std::string& path) {
  sockaddr_un a{};
  if (path.size() >= sizeof a.sun_path) throw IoError("pmix: the socket path " + path + " is too long");
  a.sun_family = AF_UNIX;
  std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) throw_errno("pmix: cannot create a Unix socket for the PMIx server");
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, SOMAXCONN) != 0) {
    const int e = errno;
    ::close(fd);
    errno = e;
    throw_errno("pmix: cannot listen on " + path);
  }
  return fd;
}

}  // namespace

ListenerSeal::ListenerSeal(uint16_t port, const std::string& path) {
  int listener = -1;
  for (int fd : own_sockets())
    if (listening(fd) && loopback_port(fd) == port) listener = fd;
  if (listener < 0)
    throw IoError("pmix: libpmix's listener on 127.0.0.1:" + std::to_string(port) +
                  " is not among this process's sockets; refusing to serve it to every local user");
  const int fresh = unix_listener(path);
  old_ = ::fcntl(listener, F_DUPFD_CLOEXEC, 0);
  if (old_ < 0 || ::dup3(fresh, listener, O_CLOEXEC) < 0) {
    const int e = errno;
    if (old_ >= 0) ::close(old_);
    ::close(fresh);
    ::unlink(path.c_str());
    errno = e;
    throw_errno("pmix: cannot put the Unix listener in place of libpmix's TCP listener");
  }
  ::close(fresh);
}

ListenerSeal::~ListenerSeal() { wake(); }

void ListenerSeal::wake() {
  std::lock_guard<std::mutex> lock(mu_);
  if (old_ < 0) return;
  ::shutdown(old_, SHUT_RDWR);
  ::close(old_);
  old_ = -1;
}

int TcpClientSweeper::sweep() {
  std::lock_guard<std::mutex> lock(mu_);
  int n = 0;
  for (int fd : own_sockets()) {
    struct stat st;
    if (listening(fd) || loopback_port(fd) != port_ || ::fstat(fd, &st) != 0 || !cut_.insert(st.st_ino).second)
      continue;
    sockaddr_in peer{};
    socklen_t len = sizeof peer;
    long uid = -1;
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) == 0 && peer.sin_family == AF_INET) {
      if (auto u = wire::loopback_peer_uid(ntohs(peer.sin_port), port_, wire::kTcpTable)) uid = static_cast<long>(*u);
    }
    ::shutdown(fd, SHUT_RDWR);
    ++n;
    // The agent's own user may connect anyway: only others are named.
    if (refused_ && uid != static_cast<long>(::geteuid())) refused_(uid);
  }
  return n;
}

}  // namespace dl::mpi::pmix
