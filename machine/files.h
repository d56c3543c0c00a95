#pragma once
// Internal to machine/: reading the small text files of /proc and /sys.
#include <string>

namespace dl::machine {

// The whole of a small file, or "" when it cannot be read.
std::string read_text(const std::string& path);
// Its first line without the newline, or "" when it cannot be read.
std::string first_line(const std::string& path);

}  // namespace dl::machine
