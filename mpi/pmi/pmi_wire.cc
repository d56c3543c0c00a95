#include "mpi/pmi/pmi_wire.h"

#include <cctype>
#include <cstdio>

namespace dl::mpi::pmi {

namespace {
constexpr size_t kLengthField = 6;  // PMI-2's decimal length prefix

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

Parsed error(std::string why, size_t consumed, bool fatal) {
  Parsed p;
  p.kind = Parsed::kError;
  p.error = std::move(why);
  p.consumed = consumed;
  p.fatal = fatal;
  return p;
}

Parsed accepted(Command c, size_t consumed) {
  Parsed p;
  p.kind = Parsed::kCommand;
  p.command = std::move(c);
  p.consumed = consumed;
  return p;
}

// Adds one key=value to `c`: the first must be `first`=NAME (cmd, or mcmd
// for PMI-1's spawn), the rest are arguments. False when the first is not.
bool add_pair(Command& c, const char* first, std::string key, std::string val) {
  if (c.name.empty() && c.args.empty()) {
    if (key != first) return false;
    c.name = std::move(val);
  } else {
    c.args.emplace_back(std::move(key), std::move(val));
  }
  return true;
}

// "cmd=put kvsname=a key=b value=c": space-separated key=value tokens.
Parsed parse_v1_line(std::string_view line, size_t consumed) {
  Command c;
  c.version = 1;
  size_t i = 0;
  while (i < line.size()) {
    if (line[i] == ' ' || line[i] == '\r') { ++i; continue; }
    const size_t end = std::min(line.find(' ', i), line.size());
    const std::string_view tok = line.substr(i, end - i);
    const size_t eq = tok.find('=');
    if (eq == std::string_view::npos || eq == 0)
      return error("expected key=value, got '" + std::string(tok.substr(0, 64)) + "'", consumed, false);
    std::string key(tok.substr(0, eq)), val(tok.substr(eq + 1));
    if (!val.empty() && val.back() == '\r') val.pop_back();
    if (!add_pair(c, "cmd", key, std::move(val)))
      return error("expected cmd= first, got '" + key + "='", consumed, false);
    i = end;
  }
  if (c.name.empty()) return error("expected cmd=NAME, got an empty command", consumed, false);
  return accepted(std::move(c), consumed);
}

// "mcmd=spawn\nnprocs=2\n...endcmd\n": one key=value per line.
Parsed parse_v1_multi(std::string_view buf) {
  const size_t end = buf.find("endcmd\n");
  if (end == std::string_view::npos) {
    if (buf.size() > kMaxCommand) return error("mcmd= command without endcmd within 64 KiB", buf.size(), true);
    return {};
  }
  const size_t consumed = end + 7;
  Command c;
  c.version = 1;
  size_t i = 0;
  while (i < end) {
    const size_t nl = buf.find('\n', i);
    const std::string_view l = buf.substr(i, nl - i);
    i = nl + 1;
    const size_t eq = l.find('=');
    if (l.empty()) continue;
    if (eq == std::string_view::npos || eq == 0)
      return error("expected key=value, got '" + std::string(l.substr(0, 64)) + "'", consumed, false);
    if (!add_pair(c, "mcmd", std::string(l.substr(0, eq)), std::string(l.substr(eq + 1))))
      return error("expected mcmd= first", consumed, false);
  }
  return accepted(std::move(c), consumed);
}

// The body of a PMI-2 command: "cmd=x;k=v;...;", ";;" an escaped ';'.
Parsed parse_v2_body(std::string_view body, size_t consumed) {
  Command c;
  c.version = 2;
  size_t i = 0;
  while (i < body.size()) {
    // Old clients may pad the end of the frame with spaces or NULs.
    if (body[i] == ' ' || body[i] == '\0' || body[i] == '\n') { ++i; continue; }
    const size_t eq = body.find('=', i);
    if (eq == std::string_view::npos || eq == i)
      return error("expected key=value; in a PMI-2 command", consumed, false);
    std::string key(body.substr(i, eq - i)), val;
    if (key.find(';') != std::string::npos) return error("expected key=value; got '" + key + "'", consumed, false);
    size_t j = eq + 1;
    for (;;) {
      if (j >= body.size()) return error("PMI-2 value of '" + key + "' not terminated by ';'", consumed, false);
      if (body[j] == ';') {
        if (j + 1 < body.size() && body[j + 1] == ';') { val += ';'; j += 2; continue; }
        break;
      }
      val += body[j++];
    }
    i = j + 1;
    if (!add_pair(c, "cmd", key, std::move(val)))
      return error("expected cmd= first in a PMI-2 command, got '" + key + "='", consumed, false);
  }
  if (c.name.empty()) return error("expected cmd=NAME; in a PMI-2 command", consumed, false);
  return accepted(std::move(c), consumed);
}

Parsed parse_v2(std::string_view buf) {
  if (buf.size() < kLengthField) return {};
  size_t len = 0, digits = 0;
  for (size_t i = 0; i < kLengthField; ++i) {
    const char ch = buf[i];
    if (ch == ' ' && digits == 0) continue;  // "%6u" pads on the left
    if (ch == ' ' || ch == '\0') {           // old clients: "%d" then spaces
      for (size_t k = i; k < kLengthField; ++k)
        if (buf[k] != ' ' && buf[k] != '\0') return error("bad PMI-2 length field", buf.size(), true);
      break;
    }
    if (!std::isdigit(static_cast<unsigned char>(ch)))
      return error("expected cmd= (PMI-1) or a 6-digit length (PMI-2), got '" +
                       std::string(buf.substr(0, kLengthField)) + "'",
                   buf.size(), true);
    len = len * 10 + static_cast<size_t>(ch - '0'), ++digits;
  }
  if (digits == 0 || len == 0 || len > kMaxCommand) return error("bad PMI-2 length field", buf.size(), true);
  if (buf.size() < kLengthField + len) return {};
  return parse_v2_body(buf.substr(kLengthField, len), kLengthField + len);
}

void append_v1_value(std::string& out, std::string_view v) {
  for (char ch : v) out += (ch == ' ' || ch == '\n' || ch == '\r') ? '_' : ch;
}
}  // namespace

const std::string* Command::get(std::string_view key) const {
  for (const auto& kv : args)
    if (kv.first == key) return &kv.second;
  return nullptr;
}

Parsed next_command(std::string_view buf) {
  if (buf.empty()) return {};
  // Too short to tell "cmd=" / "mcmd=" from a length field: wait.
  if (buf.size() < 5 && (starts_with("cmd=", buf) || starts_with("mcmd=", buf))) return {};
  if (starts_with(buf, "mcmd=")) return parse_v1_multi(buf);
  if (starts_with(buf, "cmd=")) {
    const size_t nl = buf.find('\n');
    if (nl == std::string_view::npos) {
      if (buf.size() > kMaxCommand) return error("PMI-1 line longer than 64 KiB", buf.size(), true);
      return {};
    }
    return parse_v1_line(buf.substr(0, nl), nl + 1);
  }
  return parse_v2(buf);
}

std::string encode(int version, std::string_view cmd, const Pairs& args) {
  std::string out;
  if (version == 1) {
    out = "cmd=";
    out += cmd;
    for (const auto& [k, v] : args) {
      out += ' ';
      out += k;
      out += '=';
      append_v1_value(out, v);
    }
    out += '\n';
    return out;
  }
  std::string body = "cmd=" + std::string(cmd) + ";";
  for (const auto& [k, v] : args) body += k + "=" + v + ";";
  char len[kLengthField + 1];
  std::snprintf(len, sizeof len, "%-6zu", body.size());
  return std::string(len, kLengthField) + body;
}

}  // namespace dl::mpi::pmi
