// Tests of the Python dataset program's loading (dw_daemon/python_program.h),
// part of tests/dataplane_test: a bad header names its line, a missing
// interpreter and an unloadable pickle say so. The batches themselves are
// tested end to end by tests/session_py_test (goldminer.DataLoader).
#include "dw_daemon/python_program.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

namespace goldminer::dw {
namespace {

std::string load_error(const std::string& bytes) {
  auto p = load_python_program(bytes);
  return p.ok() ? "" : p.status().message();
}

TEST(PythonProgramTest, ABadHeaderNamesItsLine) {
  const std::string magic = kPythonProgramMagic;
  EXPECT_FALSE(is_python_program("PK\x03\x04 a TorchScript zip"));
  EXPECT_TRUE(is_python_program(magic + "python=/x\n\npickle"));
  EXPECT_EQ(load_error(magic + "python=/usr/bin/python3\nbogus\n\npickle"),
            "python dataset: header line 3: expected KEY=VALUE");
  EXPECT_EQ(load_error(magic + "python=/usr/bin/python3\ncolor=blue\n\npickle"),
            "python dataset: header line 3: unknown key 'color'");
  EXPECT_EQ(load_error(magic + "python=/usr/bin/python3\n\n"), "python dataset: no pickled dataset after the header");
  EXPECT_EQ(load_error(magic + "python=/usr/bin/python3\npath=/x"), "python dataset: header line 3 has no end");
  EXPECT_EQ(load_error("not a program"), "python dataset: not a GOLDMINER-PYTHON program");
}

TEST(PythonProgramTest, AMissingInterpreterOrABadPickleSaysSo) {
  const std::string magic = kPythonProgramMagic;
  const std::string missing = load_error(magic + "python=/nonexistent/python3\n\n\x80\x04N.");
  EXPECT_EQ(missing.rfind("python dataset: cannot start /nonexistent/python3: ", 0), 0u) << missing;
  if (access("/usr/bin/python3", X_OK) != 0) GTEST_SKIP() << "no /usr/bin/python3 here";
  const char* path = std::getenv("PYTHONPATH");  // the staged goldminer package (make check sets it)
  if (path == nullptr) GTEST_SKIP() << "PYTHONPATH (the staged goldminer package) not set";
  const std::string garbage = load_error(magic + "python=/usr/bin/python3\n\nnot a pickle at all");
  EXPECT_EQ(garbage.rfind("cannot load the DataLoader's dataset on this worker: UnpicklingError", 0), 0u) << garbage;
}

}  // namespace
}  // namespace goldminer::dw
