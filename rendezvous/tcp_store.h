#pragma once
// The TCP store client: a Store backed by a TcpStoreServer, over one
// blocking connection that passes the job-token handshake. An operation is
// one send and one recv (SO_RCVTIMEO bounds the recv, in slices of at most
// 5 s). Connecting tries again, with growing pauses, while the server is
// starting or busy: a refused or reset connection, or a handshake answer
// that does not come, until the connect timeout (wire/client_retry.h). A
// port on this host's loopback held by another user's program is named at
// once (AuthError: "port P on 127.0.0.1 is held by user X (uid N), not by a
// dlaunch store").
//
// Pipelined sets: set() sends its request and returns without waiting for
// the answer (as torch's TCPStore, whose set has none). The answers are read,
// in order, before the next request of any other kind is sent, by flush(), and
// every kMaxPendingSets sets; a refused set (a key or value over the server's
// limits) makes that call throw RemoteError naming the key, and the request
// it was about to make is not sent. The connection stays usable. If the
// connection breaks while answers are outstanding, the error names the keys
// whose sets may be lost. The destructor reads outstanding answers for at
// most kCloseFlushTimeout and cannot report them: call flush() first when a
// refusal must not go unnoticed (docs/rendezvous.md, "Pipelined sets").
//
// Thread-safety: every operation holds one mutex for its round trip, so one
// TcpStore may be shared by threads (their operations are serialized; a
// thread parked in wait() or get() delays the others: give each waiting
// thread its own TcpStore when that matters).
// Failure: TimeoutError naming the keys (and the ranks of rank keys) when a
// wait runs out; AuthError when the server does not hold our token (thrown
// by the constructor: it waits for the server's accept); RemoteError when
// the server refuses a request (key or value over the limits) or closes;
// IoError/TimeoutError naming host:port when the server cannot be reached.
// After a broken connection the next call reconnects.
#include <deque>
#include <memory>
#include <mutex>

#include "rendezvous/spin_policy.h"
#include "rendezvous/store.h"
#include "rendezvous/store_protocol.h"
#include "wire/client_retry.h"
#include "wire/socket.h"

namespace dl::rdzv {

// How long a client keeps retrying while the server starts.
inline constexpr Millis kDefaultConnectTimeout{60000};
// Extra time a client allows the server past a wait's own timeout.
inline constexpr Millis kReplyGrace{10000};
// Brief busy-polling for replies: spin_policy.h.
// Sets sent before their answers are collected (see "Pipelined sets" above):
// small enough that the answers (6 bytes each) always fit the socket buffers.
inline constexpr size_t kMaxPendingSets = 256;
// How long the destructor waits for the answers of outstanding sets.
inline constexpr Millis kCloseFlushTimeout{1000};

// A host's store door (store_door.h): the AF_UNIX socket at `path`.
struct StoreDoorPath {
  std::string path;
};

class TcpStore : public Store {
 public:
  // Connects now, trying again until connect_timeout (see above).
  TcpStore(std::string host, uint16_t port, std::string token, Millis connect_timeout = kDefaultConnectTimeout);
  // Connects to a host's store door instead, the same way: the same protocol
  // and handshake over an AF_UNIX socket.
  TcpStore(StoreDoorPath door, std::string token, Millis connect_timeout = kDefaultConnectTimeout);
  ~TcpStore() override;

  // Sends the set and returns; see "Pipelined sets" above.
  void set(const std::string& key, const Bytes& value) override;
  // Reads the answers of every outstanding set; throws RemoteError naming the
  // first refused key, or naming the keys whose answers a broken connection lost.
  void flush() override;
  Bytes get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t delta) override;
  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override;
  void wait(const std::vector<std::string>& keys, Millis timeout) override;
  using Store::wait;
  bool check(const std::vector<std::string>& keys) override;
  bool delete_key(const std::string& key) override;
  int64_t num_keys() override;
  // One round trip: the server adds and parks the reply (store_protocol.h).
  int64_t barrier(const std::string& key, int64_t count, Millis timeout) override;
  using Store::barrier;
  // One round trip: the server keeps the value and parks the reply until the
  // last rank's arrives (store_protocol.h).
  std::vector<Bytes> all_gather(const std::string& prefix, int64_t rank, int64_t count, const Bytes& value,
                                Millis timeout) override;
  using Store::all_gather;

  // "host:port" of the server.
  const std::string& peer() const { return peer_; }
  // Keeps a server this process hosts (a BackgroundStoreServer) alive as long
  // as this client: rank 0 hosting the job's store. Type-erased, so the
  // client does not depend on the server's header.
  void own_server(std::shared_ptr<void> server);

 private:
  void connect();
  void connect_once(const wire::Try& t);
  void throw_if_foreign();
  proto::Reply call(const proto::Request& req, Millis reply_timeout);
  // REQUIRES mu_ held. Reads the answers of pending_ (see flush()).
  void collect_pending(Millis timeout);
  // REQUIRES mu_ held. Closes the connection; returns " (the sets of keys
  // ... may be lost)" when answers were outstanding, else "".
  std::string drop_connection();
  // With `spin`, polls without sleeping for up to store_spin() first.
  wire::Frame read_frame(Millis timeout, size_t max_payload, bool spin = false);
  void set_recv_timeout(Millis t);

  std::shared_ptr<void> hosted_;  // destroyed last
  std::string host_, token_, peer_;
  uint16_t port_ = 0;
  std::string door_;  // the AF_UNIX path when connected through a store door
  Millis connect_timeout_;
  std::mutex mu_;
  wire::Socket sock_;
  std::string inbuf_;
  std::string outbuf_;  // the frame being sent, kept to reuse its allocation
  std::deque<std::string> pending_;  // keys of the sets sent whose answers are not read yet
  Millis recv_timeout_{-1};  // SO_RCVTIMEO last set on sock_, -1 for none
  bool fast_ = false;        // the last immediate request's round trip was under kSpinWhenFaster
  SpinBackoff spin_backoff_;  // requests not to spin for after a spin that found nothing
};

}  // namespace dl::rdzv
