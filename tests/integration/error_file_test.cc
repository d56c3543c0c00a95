// A failed rank's TORCHELASTIC_ERROR_FILE as the rank may leave it: a link to
// /dev/zero, a FIFO that never gets a writer, a file of 5 MiB, a link to a
// good error file. The agent reads it as errors/user_file.h reads (a regular
// file of at most 1 MiB, opened without waiting, never through a link): the
// job ends at once with the rank's own exit code, the verdict names no text
// of it, and one line says why it was not read. A good file is still on the
// verdict line. The real dlaunch and agent, with a shell rank (the agent
// makes no directory for it: the rank makes it, as the audit's did).
#include <catch2/catch.hpp>

#include "tests/integration/run_command.h"

using namespace dl::it;

namespace {
// Rank 0 makes its error file's directory, runs `make` on "$f" (the file),
// and exits 3; rank 1 exits 0.
RunResult fail_leaving(const std::string& make) {
  RunSpec s;
  s.argv = {bin("dlaunch"), "-n", "2", "--gpus-per-node", "0", "/bin/sh", "-c",
            "[ $RANK = 0 ] || exit 0; f=$TORCHELASTIC_ERROR_FILE; mkdir -p -m700 \"$(dirname \"$f\")\"; " + make +
                "; exit 3"};
  return run(s, 60);
}

// What every bad file must give: the rank's own code, promptly, a verdict
// without the file's text, a bounded stderr and the line saying why.
void check_refused(const RunResult& r, const std::string& why) {
  INFO(r.err.substr(0, 4000));
  CHECK_FALSE(r.timed_out);
  CHECK(r.code == 3);
  CHECK(r.seconds < 8);  // the agent's heartbeat timeout is 10 s: a stalled agent would be lost
  CHECK(r.err.find("exited with code 3\n") != std::string::npos);
  CHECK(r.err.find("rank 0's TORCHELASTIC_ERROR_FILE") != std::string::npos);
  CHECK(r.err.find(why) != std::string::npos);
  CHECK(r.err.size() < 16384);
}

const std::string kGood =
    "{\"message\": {\"message\": \"KeyError: boom\", \"extraInfo\": {\"py_callstack\": \"\", \"timestamp\": \"1\"}}}";
}  // namespace

TEST_CASE("error file: a link to /dev/zero is not read - the job ends with the rank's code", "[integration][torchrun]") {
  check_refused(fail_leaving("ln -s /dev/zero \"$f\""), "is a symbolic link, not a regular file");
}

TEST_CASE("error file: a FIFO is not opened for a writer - the job ends with the rank's code", "[integration][torchrun]") {
  check_refused(fail_leaving("mkfifo \"$f\""), "is a FIFO (named pipe), not a regular file");
}

TEST_CASE("error file: a 5 MiB error file is not read - the job ends with the rank's code", "[integration][torchrun]") {
  // Good JSON, but 5 MiB of message: without the bound its text would be on the verdict.
  const RunResult r = fail_leaving("{ printf '{\"message\": \"Big: '; head -c 5242880 /dev/zero | tr '\\0' x; "
                                   "printf '\"}'; } > \"$f\"");
  check_refused(r, "more than the 1 MiB");
  CHECK(r.err.find("Big:") == std::string::npos);
}

TEST_CASE("error file: a link to a good error file is not followed", "[integration][torchrun]") {
  const RunResult r = fail_leaving("printf '%s' '" + kGood + "' > \"$f.real\"; ln -s \"$f.real\" \"$f\"");
  check_refused(r, "is a symbolic link, not a regular file");
  CHECK(r.err.find("KeyError") == std::string::npos);
}

TEST_CASE("error file: a good one is still on the verdict line, with no warning", "[integration][torchrun]") {
  const RunResult r = fail_leaving("printf '%s' '" + kGood + "' > \"$f\"");
  INFO(r.err);
  CHECK(r.code == 3);
  CHECK(r.err.find("exited with code 3: KeyError: boom\n") != std::string::npos);
  CHECK(r.err.find("TORCHELASTIC_ERROR_FILE") == std::string::npos);
}
