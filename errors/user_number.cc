#include "errors/user_number.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "errors/error.h"

namespace dl {
namespace {

std::string number_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.15g", v);
  return buf;
}

// "1000000 (11.5 days)" for bounds of a day or more.
std::string seconds_text(double s) {
  if (s < 86400) return number_text(s);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.15g (%.3g days)", s, s / 86400);
  return buf;
}

double parse_range(const std::string& option, const std::string& text, double above, const std::string& range,
                   double at_most, bool zero_ok) {
  const char* begin = text.c_str();
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(begin, &end);
  const bool whole = end != begin && *end == '\0' && text.find_first_of(" \t\n") == std::string::npos;
  const bool in_range = std::isfinite(v) && errno != ERANGE && ((v > above && v <= at_most) || (zero_ok && v == 0));
  if (!whole || !in_range) throw UsageError(option + " takes " + range + ", got '" + text + "'");
  return v;
}

}  // namespace

double parse_number(const std::string& option, const std::string& text, double above, double at_most, bool zero_ok) {
  return parse_range(option, text, above,
                     "a number above " + number_text(above) + " and at most " + number_text(at_most) +
                         (zero_ok ? ", or 0" : ""),
                     at_most, zero_ok);
}

double parse_seconds(const std::string& option, const std::string& text, double max_s, const char* zero_means) {
  return parse_range(option, text, 0,
                     "seconds: a number above 0 and at most " + seconds_text(max_s) +
                         (zero_means ? ", or 0 (" + std::string(zero_means) + ")" : std::string()),
                     max_s, zero_means != nullptr);
}

}  // namespace dl
