// The header of a GOLDMINER-PYTHON program: see python_program_header.h.
#include "dw_daemon/python_program_header.h"

#include <cstring>

#include "dw_daemon/python_program.h"

namespace goldminer::dw {

namespace {
constexpr const char* kWhat = "python dataset";  // how errors name a program before its mode is known
}  // namespace

Expected<PythonProgramHeader> parse_python_program_header(const std::string& bytes, const std::string& python) {
  if (!is_python_program(bytes)) return Status::error(std::string(kWhat) + ": not a GOLDMINER-PYTHON program");
  PythonProgramHeader h;
  size_t at = std::strlen(kPythonProgramMagic);
  for (int line = 2;; ++line) {
    size_t nl = bytes.find('\n', at);
    if (nl == std::string::npos)
      return Status::error(std::string(kWhat) + ": header line " + std::to_string(line) + " has no end");
    std::string l = bytes.substr(at, nl - at);
    at = nl + 1;
    if (l.empty()) break;
    size_t eq = l.find('=');
    std::string key = l.substr(0, eq), value = eq == std::string::npos ? "" : l.substr(eq + 1);
    if (eq == std::string::npos || value.empty())
      return Status::error(std::string(kWhat) + ": header line " + std::to_string(line) + ": expected KEY=VALUE");
    if (key == "python") h.python = value;
    else if (key == "path") h.paths.push_back(value);
    else if (key == "main") h.main = value;
    else if (key == "torch") h.saved_by = value;
    else if (key == "image") h.container.image = value;
    else if (key == "runtime" && check_container_runtime(value).empty()) h.container.runtime = value;
    else if (key == "runtime")
      return Status::error(std::string(kWhat) + ": header line " + std::to_string(line) + ": runtime '" + value +
                           "': " + check_container_runtime(value));
    else if (key == "mount") {
      auto m = parse_container_mounts(value);
      if (!m.ok() || m->size() != 1)
        return Status::error(std::string(kWhat) + ": header line " + std::to_string(line) + ": " +
                             (m.ok() ? "expected one mount" : m.status().message()));
      h.container.mounts.push_back(m->front());
    }
    else if (key == "mode" && (value == "map" || value == "iterable" || value == "torchscript")) {
      h.iterable = value == "iterable";
      h.torchscript = value == "torchscript";
    } else if (key == "mode")
      return Status::error(std::string(kWhat) + ": header line " + std::to_string(line) + ": mode '" + value +
                           "': expected map, iterable or torchscript");
    else return Status::error(std::string(kWhat) + ": header line " + std::to_string(line) + ": unknown key '" + key + "'");
  }
  if (!h.container.runtime.empty() && h.container.image.empty())
    return Status::error(std::string(kWhat) + ": runtime=" + h.container.runtime + " without image=");
  if (!h.container.image.empty() && h.container.runtime.empty()) h.container.runtime = "enroot";
  if (!python.empty()) h.python = python;
  if (h.python.empty()) return Status::error(std::string(h.what()) + ": no python= in the header (and no $GOLDMINER_PYTHON)");
  if (h.torchscript && h.saved_by.empty())
    return Status::error(std::string(h.what()) + ": no torch= in the header (the trainer's torch version)");
  h.payload = bytes.substr(at);
  if (h.payload.empty())
    return Status::error(std::string(h.what()) + (h.torchscript ? ": no TorchScript module after the header"
                                                                  : ": no pickled dataset after the header"));
  return h;
}

std::string with_container(const std::string& program, const ContainerImage& container) {
  if (container.empty() || !is_python_program(program)) return program;
  const size_t head = std::strlen(kPythonProgramMagic);
  const size_t end = program.find("\n\n", head - 1);
  const std::string header = program.substr(head - 1, end == std::string::npos ? std::string::npos : end - head + 2);
  if (header.find("\nimage=") != std::string::npos || header.find("\nruntime=") != std::string::npos) return program;
  std::string lines = "runtime=" + (container.runtime.empty() ? std::string("enroot") : container.runtime) +
                      "\nimage=" + container.image + "\n";
  for (const ContainerMount& m : container.mounts) lines += "mount=" + m.text() + "\n";
  return program.substr(0, head) + lines + program.substr(head);
}

}  // namespace goldminer::dw
