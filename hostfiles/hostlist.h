#pragma once
// Slurm-style host ranges: "node[01-04,07]" names node01 node02 node03 node04
// node07. Zero padding follows the width of each range's first number; several
// bracket groups multiply out left to right ("rack[1-2]-n[1-2]" is rack1-n1
// rack1-n2 rack2-n1 rack2-n2). Used by hostfiles, -H lists and the Slurm env
// reader (SLURM_JOB_NODELIST), so it lives here, free of any file format.
#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace dl::hostfiles {

// The most names one pattern or list may expand to; more is an error, so a
// typo like "n[0-99999999]" fails fast instead of eating memory.
inline constexpr std::size_t kMaxExpandedHosts = 65536;

// A syntax error at a byte offset within the text handed to the parser. The
// parsers of this folder throw it; their public entry points turn it into a
// dl::ParseError that names the file:line:col or the -H item.
class HostSyntaxError : public std::runtime_error {
 public:
  HostSyntaxError(std::size_t offset, const std::string& what) : std::runtime_error(what), offset_(offset) {}
  std::size_t offset() const { return offset_; }

 private:
  std::size_t offset_;
};

// Expands one host name that may hold bracket groups ("gpu[1-3]x"). Names may
// use letters, digits, '-', '.' and '_'. `base` is added to error offsets.
// Throws HostSyntaxError on an empty name, a bad character, an unclosed or
// nested bracket, a backwards range (5-2) or too many names.
std::vector<std::string> expand_host_pattern(std::string_view pattern, std::size_t base = 0);

// Splits a comma-separated list at the commas outside brackets, so
// "node[01-03],gpu5" is two items. Returns each item with its offset.
std::vector<std::pair<std::string_view, std::size_t>> split_host_items(std::string_view list);

// Expands a Slurm node list such as SLURM_JOB_NODELIST ("node[01-03],gpu5,
// c[1-2]", commas inside brackets allowed) into host names, in list order.
// Throws dl::ParseError naming `what`, the list and the column on bad syntax or
// an empty item.
std::vector<std::string> expand_hostlist(std::string_view list, std::string_view what = "host list");

}  // namespace dl::hostfiles
