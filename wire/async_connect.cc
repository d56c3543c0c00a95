#include "wire/async_connect.h"

#include <array>
#include <optional>

#include <boost/asio/connect.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>

#include "errors/error.h"
#include "wire/client_retry.h"
#include "wire/frame.h"
#include "wire/handshake.h"

namespace dl::wire {

namespace asio = boost::asio;
using asio::ip::tcp;
using boost::system::error_code;
using Clock = std::chrono::steady_clock;

namespace {
std::string ms(Millis m) { return std::to_string(m.count()) + " ms"; }
}  // namespace

// One connect: tries, each a TCP connect and the handshake under their
// waits, and pauses between them. Every step's callback carries the phase it
// was started in and is ignored once a later phase (the next step, another
// try, the end) has begun: a timer that fired just as its step completed
// does nothing.
struct AsyncConnect::Impl : std::enable_shared_from_this<Impl> {
  asio::io_context& io;
  AsyncConnectTarget target;
  Done done;
  std::vector<tcp::endpoint> endpoints;
  tcp::socket sock;
  asio::steady_timer timer;
  const Clock::time_point started = Clock::now();
  int tries = 0;
  Try t;
  std::string last;  // why the last try failed
  unsigned phase = 0;
  bool ended = false;
  std::optional<ClientHandshake> hs;
  FrameParser parser{kMaxHandshakePayload};
  std::array<char, 512> buf{};
  std::string outgoing;  // the handshake frame being written

  Impl(asio::io_context& c, AsyncConnectTarget tg, Done d)
      : io(c), target(std::move(tg)), done(std::move(d)), sock(c), timer(c) {}

  // fn(args...) if no later phase has begun by the time it is called.
  template <class F>
  auto current(F fn) {
    return [self = shared_from_this(), at = phase, fn = std::move(fn)](auto&&... a) mutable {
      if (!self->ended && at == self->phase) fn(std::forward<decltype(a)>(a)...);
    };
  }

  void begin();
  void attempt();
  void connected();
  void read_answer();
  void answered(const Frame& f);
  void arm(Millis wait, std::string why);
  void failed_try(const std::string& why);
  void finish(const std::string& error);
};

// The endpoints to try: the address itself, or the name's, resolved once.
void AsyncConnect::Impl::begin() {
  error_code ec;
  const auto address = asio::ip::make_address(target.host, ec);
  if (!ec) {
    endpoints = {tcp::endpoint(address, target.port)};
  } else {
    tcp::resolver resolver(io);
    const auto found = resolver.resolve(target.host, std::to_string(target.port), ec);
    if (ec) return finish("cannot resolve " + target.host + " (the " + target.peer + "): " + ec.message());
    for (const auto& e : found) endpoints.push_back(e.endpoint());
  }
  attempt();
}

void AsyncConnect::Impl::attempt() {
  ++phase;
  t = try_budget(++tries, std::chrono::duration_cast<Millis>(started + target.timeout - Clock::now()));
  hs.reset();
  parser = FrameParser(kMaxHandshakePayload);
  sock = tcp::socket(io);
  arm(t.connect_wait, "no TCP connection within " + ms(t.connect_wait));
  asio::async_connect(sock, endpoints, current([this](error_code ec, const tcp::endpoint&) {
    if (ec) return failed_try("could not connect to " + target.host + ":" + std::to_string(target.port) + ": " + ec.message());
    connected();
  }));
}

// The client speaks first: its hello, then the server's answer within the wait.
void AsyncConnect::Impl::connected() {
  ++phase;
  error_code ignored;
  sock.set_option(tcp::no_delay(true), ignored);
  hs.emplace(target.token, target.tag, target.peer);
  arm(t.wait, "no answer to the handshake within " + ms(t.wait));
  outgoing = encode_frame(kHandshake, hs->hello());
  asio::async_write(sock, asio::buffer(outgoing), current([this](error_code ec, size_t) {
    if (ec) failed_try("sending the handshake failed: " + ec.message());
  }));
  read_answer();
}

void AsyncConnect::Impl::read_answer() {
  sock.async_read_some(asio::buffer(buf), current([this](error_code ec, size_t n) {
    if (ec) return failed_try(ec == asio::error::eof ? "the server closed the connection in the handshake"
                                                     : "reading the handshake's answer failed: " + ec.message());
    std::optional<Frame> f;
    try {
      parser.feed(buf.data(), n);
      f = parser.next();
    } catch (const RemoteError& e) {
      return failed_try(e.what());
    }
    if (f) answered(*f);
    else read_answer();
  }));
}

// A server that is not ours is told why the client leaves, and not tried again.
void AsyncConnect::Impl::answered(const Frame& f) {
  ++phase;
  timer.cancel();
  std::string proof;
  try {
    proof = hs->finish(f);
  } catch (const AuthError& e) {
    error_code ignored;
    asio::write(sock, asio::buffer(encode_frame(kErrorText, std::string(ClientHandshake::refusal()))), ignored);
    return finish(e.what());
  }
  outgoing = encode_frame(kHandshake, proof);
  asio::async_write(sock, asio::buffer(outgoing), current([this](error_code ec, size_t) {
    if (ec) return failed_try("sending the handshake's proof failed: " + ec.message());
    finish("");
  }));
}

void AsyncConnect::Impl::arm(Millis wait, std::string why) {
  timer.expires_after(wait);
  timer.async_wait(current([this, why = std::move(why)](error_code ec) {
    if (!ec) failed_try(why);
  }));
}

// Another try after a jittered pause, or the end when it would come too late.
void AsyncConnect::Impl::failed_try(const std::string& why) {
  ++phase;
  error_code ignored;
  sock.close(ignored);
  last = why;
  const Millis pause = retry_pause(tries);
  const auto waited = std::chrono::duration_cast<Millis>(Clock::now() - started);
  if (waited + pause >= target.timeout) return finish(retry_timeout_message(target.peer, waited, tries, last));
  timer.expires_after(pause);
  timer.async_wait(current([this](error_code ec) {
    if (!ec) attempt();
  }));
}

void AsyncConnect::Impl::finish(const std::string& error) {
  ended = true;
  timer.cancel();
  error_code ignored;
  if (!error.empty()) sock.close(ignored);
  Done d = std::move(done);
  done = nullptr;
  d(error, std::move(sock));
}

AsyncConnect::AsyncConnect(asio::io_context& io, AsyncConnectTarget target, Done done)
    : impl_(std::make_shared<Impl>(io, std::move(target), std::move(done))) {
  asio::post(io, [impl = impl_] {
    if (!impl->ended) impl->begin();
  });
}

AsyncConnect::~AsyncConnect() { cancel(); }

void AsyncConnect::cancel() {
  if (impl_->ended) return;
  impl_->ended = true;
  impl_->done = nullptr;
  impl_->timer.cancel();
  error_code ignored;
  impl_->sock.close(ignored);
}

}  // namespace dl::wire
