#include <charconv>

#include "errors/error.h"
#include "remote/ssh/session.h"

namespace dl::ssh {

std::string Target::str() const {
  std::string s = user.empty() ? "" : user + "@";
  bool v6 = host.find(':') != std::string::npos;
  s += v6 ? "[" + host + "]" : host;
  if (port) s += ":" + std::to_string(port);
  return s;
}

Target parse_target(std::string_view s, std::string_view what) {
  Target t;
  std::string w(what);
  if (auto at = s.rfind('@'); at != std::string_view::npos) {
    t.user = std::string(s.substr(0, at));
    if (t.user.empty()) throw UsageError(w + ": empty user name before '@' in '" + std::string(s) + "'");
    s.remove_prefix(at + 1);
  }
  std::string_view port;
  if (!s.empty() && s.front() == '[') {
    auto close = s.find(']');
    if (close == std::string_view::npos)
      throw UsageError(w + ": missing ']' in '" + std::string(s) + "'");
    t.host = std::string(s.substr(1, close - 1));
    auto rest = s.substr(close + 1);
    if (!rest.empty() && rest.front() != ':')
      throw UsageError(w + ": expected ':port' after ']' in '" + std::string(s) + "'");
    if (!rest.empty()) port = rest.substr(1);
  } else if (auto colon = s.find(':'); colon != std::string_view::npos && s.rfind(':') == colon) {
    t.host = std::string(s.substr(0, colon));
    port = s.substr(colon + 1);
  } else {
    t.host = std::string(s);  // a name, or a bare IPv6 address without a port
  }
  if (t.host.empty()) throw UsageError(w + ": empty host name in '" + std::string(s) + "'");
  if (port.data() != nullptr) {
    unsigned v = 0;
    auto [p, ec] = std::from_chars(port.data(), port.data() + port.size(), v);
    if (ec != std::errc() || p != port.data() + port.size() || v == 0 || v > 65535)
      throw UsageError(w + ": bad port '" + std::string(port) + "' (want 1..65535)");
    t.port = static_cast<uint16_t>(v);
  }
  return t;
}

}  // namespace dl::ssh
