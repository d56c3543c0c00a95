#pragma once
// The doctor's side of one peer (`dlaunch doctor --peer` on a host): JSON
// requests, one line each, on the peer's stdin; one JSON reply line each on
// its stdout. A remote peer runs over its ssh channel; the launcher's own
// host gets a forked child, as the launcher starts its local agent.
//
// Threading: one thread at a time may use a PeerLink (an ssh session is not
// thread-safe); different PeerLinks may be used from different threads.
#include <chrono>
#include <memory>
#include <string>

#include "doctor/records.h"
#include "remote/ssh/fan_out.h"
#include "wire/record.h"

namespace dl::doctor {

using Millis = std::chrono::milliseconds;

class PeerLink {
 public:
  virtual ~PeerLink() = default;
  // Sends `request` (a request record of records.h), returns its reply.
  // Throws RemoteError naming the host when the peer ended (with what it
  // said: "dlaunch not found at ..."), TimeoutError naming the host and the
  // request when no reply came within `timeout`, RemoteError when the reply
  // was an ErrorReply or not a `Reply`.
  template <class Reply, class Request> Reply call(const Request& request, Millis timeout) {
    std::string line = "{\"op\":";
    wire::append_json_string(line, Request::kOp);
    wire::append_fields(line, request, false);
    line += "}\n";
    const std::string reply = exchange(Request::kOp, line, timeout);
    return wire::decode_record<Reply>(reply, reply_name(Request::kOp));
  }
  const std::string& host() const { return host_; }

 protected:
  explicit PeerLink(std::string host) : host_(std::move(host)) {}
  virtual void send_line(const std::string& line) = 0;
  // Returns the next complete line of stdout, or throws as call() says.
  virtual std::string read_line(Millis timeout, const std::string& waiting_for) = 0;

 private:
  // Sends the request line, returns the reply line; throws as call() says.
  std::string exchange(const char* op, const std::string& line, Millis timeout);
  wire::RecordName reply_name(const char* op) const;
  std::string host_;
};

// The peer on this machine: forks `exe doctor --peer`, writes the token line.
std::unique_ptr<PeerLink> start_local_peer(const std::string& exe, const std::string& token, const std::string& host);

// Takes over a peer that ssh::start_all started (its stdin already got the
// token). `command` is the remote command line, for messages.
std::unique_ptr<PeerLink> adopt_remote_peer(ssh::Started started, const std::string& host,
                                            const std::string& command);

}  // namespace dl::doctor
