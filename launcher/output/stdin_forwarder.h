#pragma once
// dlaunch's stdin, for the one rank that reads it (--stdin). A terminal or a
// pipe is read on a thread of its own (a blocking read(2): making the shared
// descriptor non-blocking would change it for the shell too), each chunk
// posted to the job's io_context as it arrives, then the end. A regular file
// or /dev/null never blocks: it is read on the io_context itself, a chunk per
// turn, with no thread (a thread's start and end beside the first rank's
// start cost that start up to a millisecond on a 2-core machine;
// docs/benchmarks.md).
#include <boost/asio.hpp>
#include <functional>
#include <string>

namespace dl::launcher {

// False for a background job on a terminal: reading it would stop dlaunch with SIGTTIN.
bool may_read_stdin();

// True when fd `fd` is a regular file or a character device that never
// blocks a read (/dev/null, /dev/zero): it can be read without a thread.
bool never_blocks(int fd);

// Starts forwarding: the reader thread (detached: it may sit in read(2)
// until dlaunch exits), or, for stdin that never blocks, reads posted to `io`.
void forward_stdin(boost::asio::io_context& io, std::function<void(std::string)> data, std::function<void()> eof);

}  // namespace dl::launcher
