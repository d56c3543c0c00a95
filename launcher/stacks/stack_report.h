#pragma once
// The report of where every rank is (docs/hangs.md): the ranks grouped by
// identical stack, odd ones out first, in lines a person reads at a glance,
//   rank 5 on node2: read <- load_batch <- main
//   ranks 0-4, 6-7 (7): all_reduce <- train_step <- main
// and the full stacks, as text and as JSON. Pure: unit-tested on the texts
// the tools print (tests/launcher/stacks/stack_report_test.cc).
//
// A rank's stack for grouping is its main thread's function names,
// innermost first: addresses, arguments, files and line numbers are dropped,
// so ranks at the same place group although their pointers differ; native
// frames outside main (_start, __libc_start_main) are dropped too. A Python
// frame keeps its file's name and line, "step (train.py:12)": there the
// line is the place.
#include <string>
#include <vector>

#include "launcher/membership.h"

namespace dl::launcher {

// One rank's stack as its agent sent it (control::msg::RankStack), with its host.
struct RankStackEntry {
  int rank = 0;
  std::string host;
  int pid = 0;
  std::string how;    // "python", "eu-stack", "gdb"; "" with error
  std::string text;   // every thread, as the tool printed it
  std::string error;  // why there is no stack; "" when there is one
};

// The main thread's frames of `text` printed by `how` for process `pid`:
// Python's faulthandler (the main thread is the last it prints), eu-stack
// ("TID <pid>:") or gdb ("(LWP <pid>)"). Function names, innermost first.
std::vector<std::string> main_thread_frames(const std::string& how, const std::string& text, int pid);
// A native frame line ("#3  0x00007f12 in read (fd=3) at io.c:12",
// "#0  0x00007f12 clock_nanosleep@GLIBC_2.2.5") as its function's name,
// "??" when it has none.
std::string frame_function(const std::string& line);

struct StackGroup {
  std::vector<int> ranks;           // ascending
  std::vector<std::string> hosts;   // distinct, in rank order
  std::vector<std::string> frames;  // innermost first (empty with error)
  std::string error;                // the ranks' shared reason for having no stack
};

// Ranks with the same frames (or the same error) in one group; the
// smallest groups first (the odd ones out), ties by their first rank.
std::vector<StackGroup> group_stacks(const std::vector<RankStackEntry>& stacks);
// "0-4, 6, 8-9" for {0,1,2,3,4,6,8,9}; sorted and deduplicated first.
std::string rank_ranges(std::vector<int> ranks);
// One group as a line: "rank 5 on node2: read <- main",
// "ranks 0-4, 6-7 (7): all_reduce <- main" (a group's hosts are named when
// it shares an error: up to three, else their number), at most
// kSummaryFrames frames, a run of unnamed ones counting once ("?? x9").
std::string summary_line(const StackGroup& g);
inline constexpr size_t kSummaryFrames = 8;

// The report file: `title`, the summary lines, then each rank's full stack.
std::string full_report(const std::string& title, const std::vector<StackGroup>& groups,
                        const std::vector<RankStackEntry>& stacks);
// The same as one JSON document: {"reason", "groups": [{ranks, hosts,
// frames, error?}], "ranks": [{rank, host, pid, how, frames, error?, text}],
// "membership": [{attempt, at_s, kind, host, why, ranks, to_host}]}, the
// job's membership changes so far.
std::string json_report(const std::string& reason, const std::vector<StackGroup>& groups,
                        const std::vector<RankStackEntry>& stacks, const std::vector<MembershipChange>& membership = {});
// The job's report without a stack report: {"membership": [...]}.
std::string json_membership(const std::vector<MembershipChange>& membership);

}  // namespace dl::launcher
