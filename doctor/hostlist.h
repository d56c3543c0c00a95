#pragma once
// Host lists written as Slurm writes them: "node[0101-0137,0140],login1",
// pure, so that a problem shared by a thousand hosts is one line.
#include <string>
#include <vector>

namespace dl::doctor {

// `hosts` compressed: names that differ only in their last run of digits
// (same text before and after it, and the same width when zero-padded) are
// one bracketed range list, the numbers ascending, consecutive ones as
// "a-b"; every other name as it is. Groups appear in the order of their
// first host; a name listed twice is written once. "" for no hosts.
// Example: {"n03", "n01", "n02", "n10", "x"} -> "n[01-03,10],x".
std::string compress_hosts(const std::vector<std::string>& hosts);

// "37 hosts (node[0101-0137])", "node0101" for one host, "" for none: how a
// problem line names the hosts it is about.
std::string name_hosts(const std::vector<std::string>& hosts);

}  // namespace dl::doctor
