#pragma once
// The doctor's side of one peer (`dlaunch doctor --peer` on a host): JSON
// requests, one line each, on the peer's stdin; one JSON reply line each on
// its stdout. A remote peer runs over its ssh channel (libssh), or through a
// child process (the OpenSSH client; the launcher's own host's and the test
// bed's peers are children themselves, as the launcher starts its local agent).
//
// Threading: one thread at a time may use a PeerLink (an ssh session is not
// thread-safe); different PeerLinks may be used from different threads.
#include <poll.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

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
    const std::string reply = call_line(Request::kOp, request_line(request), timeout);
    return wire::decode_record<Reply>(reply, reply_name(Request::kOp));
  }
  // The same with the request as its JSON line (request_line, no newline):
  // returns the reply line, or throws as call() says.
  std::string call_line(const std::string& op, const std::string& line, Millis timeout);
  const std::string& host() const { return host_; }
  wire::RecordName reply_name(const std::string& op) const;

  // Many links waited on by one thread (PeerFan::route): a link that is a
  // child process of ours (its socket and its stderr) can be sent a request
  // line with send_request(), then polled: its kPollFds pollfds (poll_fds)
  // and, each time the poll returns, take_line() with them, which reads
  // what is there and returns the reply line once it is whole, nullopt
  // until then, or throws as call() does when the peer ended. reply_of()
  // then checks and decodes it as call() does. A link that cannot (an ssh
  // channel of libssh) is not pollable(), and only call() serves.
  static constexpr size_t kPollFds = 2;
  virtual bool pollable() const { return false; }
  void send_request(const std::string& line) { send_line(line + "\n"); }
  virtual void poll_fds(pollfd* into) const;
  virtual std::optional<std::string> take_line(const pollfd* ready);
  template <class Reply> Reply reply_of(const std::string& op, const std::string& line) const {
    return wire::decode_record<Reply>(checked(op, line), reply_name(op));
  }
  // What call() throws when no reply came within `timeout` to `waiting_for`
  // ("'route'"), as its text.
  std::string no_answer(Millis timeout, const std::string& waiting_for) const;

  // A request record as the line a peer reads: {"op":kOp,...}, no newline.
  template <class Request> static std::string request_line(const Request& request) {
    std::string line = "{\"op\":";
    wire::append_json_string(line, Request::kOp);
    wire::append_fields(line, request, false);
    line += '}';
    return line;
  }

 protected:
  explicit PeerLink(std::string host) : host_(std::move(host)) {}
  virtual void send_line(const std::string& line) = 0;
  // Returns the next complete line of stdout, or throws as call() says.
  virtual std::string read_line(Millis timeout, const std::string& waiting_for) = 0;

 private:
  // `reply` to `op`, or the RemoteError of the ErrorReply it is.
  const std::string& checked(const std::string& op, const std::string& reply) const;
  std::string host_;
};

// A peer reached through a child process of ours: `argv` (argv[0] a path,
// no PATH search) with `env` as its whole environment, its stdin and stdout
// one socket of a socketpair (the token line written first), its stderr
// kept for messages; it dies with this process (PR_SET_PDEATHSIG) and is
// killed with its process group when the link is destroyed after its stdin
// closed and it did not exit within 3 s. `ssh` names the host it reaches
// when the child is an ssh client (its exit 255 is ssh's failure), "" when
// the child is the peer itself. Throws RemoteError when it cannot be forked.
std::unique_ptr<PeerLink> start_process_peer(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                                             const std::string& token, const std::string& host, bool ssh);

// Takes over a peer that ssh::start_all started (its stdin already got the
// token). `command` is the remote command line, for messages.
std::unique_ptr<PeerLink> adopt_remote_peer(ssh::Started started, const std::string& host,
                                            const std::string& command);

}  // namespace dl::doctor
