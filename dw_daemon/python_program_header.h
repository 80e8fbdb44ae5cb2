// The header of a GOLDMINER-PYTHON program (the format is in
// python_program.h): which interpreter runs the payload, with which
// sys.path and training script, and whether the payload is a Dataset's
// pickle or a TorchScript module. Internal to dw_daemon/python_program.cc
// (split off to keep that file to the child it runs); plain values,
// thread-compatible.
#ifndef GOLDMINER_DW_DAEMON_PYTHON_PROGRAM_HEADER_H_
#define GOLDMINER_DW_DAEMON_PYTHON_PROGRAM_HEADER_H_

#include <string>
#include <vector>

#include "gmcore/status.h"
#include "launch/container_image.h"

namespace goldminer::dw {

struct PythonProgramHeader {
  std::string python;
  std::vector<std::string> paths;
  std::string main;
  bool iterable = false;     // mode=iterable: an IterableDataset, one shard per split
  bool torchscript = false;  // mode=torchscript: the payload is a TorchScript module
  std::string saved_by;      // torch=: the trainer's torch version (torchscript)
  std::string payload;       // the pickle, or the TorchScript zip
  int threads = 1;           // intra-op threads of a TorchScript child
  // runtime=, image=, mount=: the trainer's container, which goldminer-dw
  // on the host enters to start the child (empty: none).
  ContainerImage container;
  // Where goldminer-dw's goldminer package is, when this process (on the
  // host) enters `container` to start the child; "": it does not (none,
  // or this process runs in the image already).
  std::string package_dir;
  // How errors name the program.
  const char* what() const { return torchscript ? "torchscript program" : "python dataset"; }
  // The same, naming the image the child runs in, if any.
  std::string described() const {
    return std::string(what()) +
           (entered() ? " (" + container.runtime + " image " + container.image + ")" : std::string());
  }
  bool entered() const { return !package_dir.empty() && !container.empty(); }
};

// The header and payload of `bytes`; `python`, when not empty, replaces
// the header's interpreter. Errors name the header line at fault.
Expected<PythonProgramHeader> parse_python_program_header(const std::string& bytes, const std::string& python);

// `program` with the container's runtime=, image= and mount= lines (after
// the magic line) when it is a GOLDMINER-PYTHON program that names no
// image itself; any other program unchanged.
std::string with_container(const std::string& program, const ContainerImage& container);

}  // namespace goldminer::dw

#endif  // GOLDMINER_DW_DAEMON_PYTHON_PROGRAM_HEADER_H_
