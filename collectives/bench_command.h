#pragma once
// Moved to collectives/bench/; kept only until launcher/ includes the new path.
#include "collectives/bench/bench_command.h"
