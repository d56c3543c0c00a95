// Prints control::protocol_reference(), the table of every control message
// and its fields: scripts/check_architecture.py takes the message names
// from it, and docs/wire-protocol.md holds it between its markers
// (tests/control/messages_test.cc checks that they match).
#include <iostream>

#include "control/messages.h"

int main() {
  std::cout << dl::control::protocol_reference();
  return std::cout.flush() ? 0 : 1;
}
