// How goldminer-dw starts one Python child of a GOLDMINER-PYTHON program
// (python_program.h): the interpreter itself, or, for a trainer that runs
// in a container image (the header's runtime= and image=), the container
// runtime that enters that image on this node and runs the image's
// interpreter there (docs/ARCHITECTURE-python.md, "Jobs in containers"):
//   enroot start [--mount SRC:DST:none:x-create=auto,rbind[,FLAGS]]...
//       --mount PKG/goldminer:/opt/goldminer/python/goldminer:none:x-create=dir,rbind,ro
//       --env NAME... IMAGE PYTHON -u -m goldminer._dw_child ...
//   ch-run [-b SRC:DST]... -b PKG/goldminer:/opt/goldminer/python/goldminer
//       IMAGE_DIR -- PYTHON -u -m goldminer._dw_child ...
// (the trainer's mounts first, so that the package is mounted over one
// that covers its place, such as the trainer's own package)
// The child needs only the pure-Python modules of goldminer-dw's own
// goldminer package, mounted in: nothing of the suite's inside the image.
// Internal to dw_daemon/python_program.cc; plain functions.
#ifndef GOLDMINER_DW_DAEMON_PYTHON_CHILD_COMMAND_H_
#define GOLDMINER_DW_DAEMON_PYTHON_CHILD_COMMAND_H_

#include <string>
#include <vector>

#include "dw_daemon/python_program_header.h"
#include "gmcore/status.h"

namespace goldminer::dw {

// Where the goldminer package is mounted in the image (put first on the
// child's PYTHONPATH, so that the child's protocol is this worker's).
extern const char* const kImagePackageDir;  // "/opt/goldminer/python"

struct ChildCommand {
  std::vector<std::string> argv;  // argv[0] is run through PATH
  std::vector<std::string> env;   // "NAME=value"
  std::string describe;           // how logs and errors name it: "/usr/bin/python3 in enroot image /x.sqsh"
};

// The command that starts one child for `h`, from this process's
// environment `environment`. `package` ("" = run no container: none is
// named, or this process runs inside it already) is the directory that
// holds goldminer-dw's goldminer package (find_python_package()).
Expected<ChildCommand> child_command(const PythonProgramHeader& h, const std::vector<std::string>& environment,
                                     const std::string& package);

// The directory holding this goldminer-dw's goldminer package
// (goldminer/_dw_child.py): python/ beside the program or in its parent
// directory (a build tree, its tests/), else the installed package's. The error names the places.
Expected<std::string> find_python_package();

}  // namespace goldminer::dw

#endif  // GOLDMINER_DW_DAEMON_PYTHON_CHILD_COMMAND_H_
