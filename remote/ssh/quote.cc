#include "remote/ssh/quote.h"

namespace dl::ssh {

namespace {
bool is_plain(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         std::string_view("_./:@%+,-").find(c) != std::string_view::npos;
}
}  // namespace

std::string shell_quote(std::string_view s) {
  bool plain = !s.empty();
  for (char c : s) plain = plain && is_plain(c);
  // '=' is never plain: an unquoted NAME=value first word is an assignment.
  if (plain) return std::string(s);
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += "'\\''";
    else out += c;
  }
  out += '\'';
  return out;
}

std::string join_quoted(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) {
    if (!out.empty()) out += ' ';
    out += shell_quote(w);
  }
  return out;
}

}  // namespace dl::ssh
