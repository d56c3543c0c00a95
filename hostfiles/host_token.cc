#include "hostfiles/host_token.h"

#include <cctype>

#include "hostfiles/hostlist.h"

namespace dl::hostfiles {
namespace {

constexpr std::size_t npos = std::string_view::npos;

std::string quoted(std::string_view s) { return "'" + std::string(s) + "'"; }

bool all_digits(std::string_view s) {
  if (s.empty() || s.size() > 9) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

void check_user(std::string_view user) {
  if (user.empty()) throw HostSyntaxError(0, "expected a user name before '@', got nothing");
  for (std::size_t i = 0; i < user.size(); ++i) {
    char c = user[i];
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '.' && c != '_') {
      throw HostSyntaxError(i, std::string("expected a user name (letters, digits, '-', '.', '_'), got '") + c +
                                   "' in " + quoted(user));
    }
  }
}

// Index of the ']' that closes the '[' at s[0], counting nested range brackets.
std::size_t matching_bracket(std::string_view s) {
  int depth = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '[') ++depth;
    if (s[i] == ']' && --depth == 0) return i;
  }
  return npos;
}

void check_ipv6(std::string_view addr, std::size_t at) {
  for (std::size_t i = 0; i < addr.size(); ++i) {
    char c = addr[i];
    // Hex digits, ':' and '.' for the address; letters, '_', '-' for a "%eth0" zone.
    if (!std::isalnum(static_cast<unsigned char>(c)) && std::string_view(":.%_-").find(c) == npos) {
      throw HostSyntaxError(at + i, std::string("expected an IPv6 address inside '[...]', got '") + c + "' in " +
                                        quoted(addr));
    }
  }
}

// "name[:N]" starting at offset `at` of the whole spec.
void parse_plain(std::string_view s, std::size_t at, HostSpec& spec) {
  std::size_t colon = npos;
  int depth = 0;
  for (std::size_t i = 0; i < s.size() && colon == npos; ++i) {
    if (s[i] == '[') ++depth;
    if (s[i] == ']' && depth > 0) --depth;
    if (s[i] == ':' && depth == 0) colon = i;
  }
  std::string_view name = s.substr(0, colon);
  if (name.empty()) throw HostSyntaxError(at, "expected a host name before ':', got nothing");
  spec.hosts = expand_host_pattern(name, at);
  if (colon == npos) return;
  std::string_view tail = s.substr(colon + 1);
  if (std::size_t second = tail.find(':'); second != npos) {
    throw HostSyntaxError(at + colon + 1 + second,
                          "expected nothing after 'host:N' (N is MPICH's slot count; for an ssh port or an IPv6 "
                          "address use brackets: '[host]:port', '[::1]:port'), got " +
                              quoted(tail.substr(second)));
  }
  spec.slots = parse_positive(tail, at + colon + 1, "'host:N'");
  spec.slots_given = true;
}

// "[name-or-address][:port[:N]]" starting at offset `at`.
void parse_bracketed(std::string_view s, std::size_t at, HostSpec& spec) {
  std::size_t close = matching_bracket(s);
  if (close == npos) throw HostSyntaxError(at, "expected ']' to close this '[', got the end of the host");
  std::string_view inner = s.substr(1, close - 1);
  if (inner.empty()) throw HostSyntaxError(at + 1, "expected a host name or address inside '[]', got nothing");
  if (inner.find(':') != npos) {
    check_ipv6(inner, at + 1);
    spec.hosts = {std::string(inner)};
  } else {
    spec.hosts = expand_host_pattern(inner, at + 1);
  }
  std::string_view rest = s.substr(close + 1);
  if (rest.empty()) return;
  if (rest[0] != ':') {
    throw HostSyntaxError(at + close + 1, "expected ':port' or the end after '[...]', got " + quoted(rest));
  }
  std::size_t port_at = at + close + 2;
  std::string_view fields = rest.substr(1);
  std::size_t colon = fields.find(':');
  spec.port = parse_port(fields.substr(0, colon), port_at, "'[host]:port'");
  if (colon == npos) return;
  std::string_view slots = fields.substr(colon + 1);
  if (slots.find(':') != npos) {
    throw HostSyntaxError(port_at + colon + 1 + slots.find(':'),
                          "expected nothing after '[host]:port:N', got " + quoted(slots.substr(slots.find(':'))));
  }
  spec.slots = parse_positive(slots, port_at + colon + 1, "'[host]:port:N'");
  spec.slots_given = true;
}

}  // namespace

int parse_positive(std::string_view text, std::size_t at, std::string_view what) {
  int v = all_digits(text) ? std::stoi(std::string(text)) : 0;
  if (v <= 0) throw HostSyntaxError(at, std::string(what) + " needs a positive number, got " + quoted(text));
  return v;
}

uint16_t parse_port(std::string_view text, std::size_t at, std::string_view what) {
  int v = all_digits(text) ? std::stoi(std::string(text)) : 0;
  if (v <= 0 || v > 65535) {
    throw HostSyntaxError(at, std::string(what) + " needs a port number 1-65535, got " + quoted(text));
  }
  return static_cast<uint16_t>(v);
}

HostSpec parse_host_spec(std::string_view text) {
  HostSpec spec;
  std::size_t start = 0;
  std::size_t at_sign = text.find('@');
  if (at_sign != npos) {
    check_user(text.substr(0, at_sign));
    spec.user = std::string(text.substr(0, at_sign));
    start = at_sign + 1;
  }
  std::string_view rest = text.substr(start);
  if (rest.empty()) throw HostSyntaxError(start, "expected a host name, got nothing");
  if (rest[0] == '[') {
    parse_bracketed(rest, start, spec);
  } else {
    parse_plain(rest, start, spec);
  }
  return spec;
}

}  // namespace dl::hostfiles
