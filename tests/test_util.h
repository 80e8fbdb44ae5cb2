// What the tests that run a built program, a script or a forked child
// share (sim/cli_test, tests/split, the tests that fork into a namespace or
// an affinity of their own): running a shell command, or waiting for a
// child, and collecting what it prints.
#ifndef GOLDMINER_TESTS_TEST_UTIL_H_
#define GOLDMINER_TESTS_TEST_UTIL_H_

#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

namespace goldminer::testing {

struct CommandResult {
  int status = -1;  // the exit status; -1: it could not run or a signal ended it
  std::string out;  // its stdout (stderr too where the command adds 2>&1)
};

// Whether `text` holds each of `parts`; the failure names the first
// missing one and shows the text.
inline ::testing::AssertionResult contains_all(const std::string& text, const std::vector<std::string>& parts) {
  for (const std::string& part : parts)
    if (text.find(part) == std::string::npos)
      return ::testing::AssertionFailure() << "no '" << part << "' in:\n" << text;
  return ::testing::AssertionSuccess();
}

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

// What `command` prints, when it exits 0; "" otherwise.
inline std::string output_if_ok(const std::string& command) {
  const CommandResult r = run_command(command);
  return r.status == 0 ? r.out : std::string();
}

// For a child forked with the pipe `out` (it writes to out[1]): closes the
// parent's write end, reads out[0] to its end, closes it and waits for
// `child`; returns what the child wrote.
inline std::string output_of_child(const int out[2], pid_t child) {
  close(out[1]);
  std::string got;
  char buf[512];
  for (ssize_t n; (n = read(out[0], buf, sizeof buf)) > 0;) got.append(buf, static_cast<size_t>(n));
  close(out[0]);
  waitpid(child, nullptr, 0);
  return got;
}

}  // namespace goldminer::testing

#endif  // GOLDMINER_TESTS_TEST_UTIL_H_
