// What the tests that run a built program or a script as a child share
// (sim/cli_test, tests/split): running a shell command
// and collecting what it prints.
#ifndef GOLDMINER_TESTS_TEST_UTIL_H_
#define GOLDMINER_TESTS_TEST_UTIL_H_

#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace goldminer::testing {

struct CommandResult {
  int status = -1;  // the exit status; -1: it could not run or a signal ended it
  std::string out;  // its stdout (stderr too where the command adds 2>&1)
};

// Runs `command` with /bin/sh and waits for it.
inline CommandResult run_command(const std::string& command) {
  CommandResult r;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) r.out.append(buf, n);
  const int status = pclose(pipe);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace goldminer::testing

#endif  // GOLDMINER_TESTS_TEST_UTIL_H_
