// The command line and environment of a Python child: see
// python_child_command.h.
#include "dw_daemon/python_child_command.h"

#include <limits.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "gm_paths.h"

namespace goldminer::dw {

const char* const kImagePackageDir = "/opt/goldminer/python";

namespace {

bool starts_with(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

bool is_dir(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// The interpreter's own arguments: goldminer._dw_child, as a TorchScript
// child when the payload is one.
std::vector<std::string> python_arguments(const PythonProgramHeader& h) {
  std::vector<std::string> args = {h.python, "-u", "-m", "goldminer._dw_child"};
  if (h.torchscript)
    args.insert(args.end(), {"--torchscript", "--threads=" + std::to_string(h.threads), "--saved-by=" + h.saved_by});
  return args;
}

std::string joined(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : ":") + p;
  return out;
}

// The child's environment: `environment` with PYTHONPATH = `first`, the
// trainer's sys.path, then (outside a container only) this process's own
// PYTHONPATH; GOLDMINER_PY_MAIN names the training script.
std::vector<std::string> python_environment(const PythonProgramHeader& h, const std::vector<std::string>& environment,
                                            const std::vector<std::string>& first, bool keep_own_path) {
  std::vector<std::string> paths = first, env;
  paths.insert(paths.end(), h.paths.begin(), h.paths.end());
  for (const std::string& v : environment) {
    if (starts_with(v, "PYTHONPATH=")) {
      if (keep_own_path && v.size() > 11) paths.push_back(v.substr(11));
      continue;
    }
    if (starts_with(v, "GOLDMINER_PY_MAIN=")) continue;
    env.push_back(v);
  }
  env.push_back("PYTHONPATH=" + joined(paths));
  if (!h.main.empty()) env.push_back("GOLDMINER_PY_MAIN=" + h.main);
  return env;
}

// Variables of the host that mean nothing in the image (as pyxis keeps
// them from a container: paths of the host's programs and libraries).
bool host_only(const std::string& name) {
  return name == "PATH" || name == "LD_LIBRARY_PATH" || name == "LD_PRELOAD" || name == "PYTHONHOME" ||
         name == "HOME" || starts_with(name, "ENROOT_");
}

ChildCommand enroot_command(const PythonProgramHeader& h, std::vector<std::string> env, const std::string& package) {
  ChildCommand c;
  // enroot's --mount is an fstab line with colons for blanks. The
  // trainer's mounts first: mounted in order, the package goes on top of
  // one that covers /opt/goldminer/python (the trainer's own package).
  c.argv = {"enroot", "start"};
  for (const ContainerMount& m : h.container.mounts) {
    std::string flags = m.flags;
    std::replace(flags.begin(), flags.end(), '+', ',');
    c.argv.insert(c.argv.end(),
                  {"--mount", m.source + ":" + m.target + ":none:x-create=auto,rbind" + (flags.empty() ? "" : "," + flags)});
  }
  c.argv.insert(c.argv.end(),
                {"--mount", package + "/goldminer:" + kImagePackageDir + "/goldminer:none:x-create=dir,rbind,ro"});
  // enroot start gives the container only the variables it is told, by
  // name (values from this environment): one per line of its environment
  // file, so a value with a newline stays out.
  for (const std::string& v : env) {
    const size_t eq = v.find('=');
    if (eq == std::string::npos || host_only(v.substr(0, eq)) || v.find('\n') != std::string::npos) continue;
    c.argv.insert(c.argv.end(), {"--env", v.substr(0, eq)});
  }
  c.argv.push_back(h.container.image);
  c.env = std::move(env);
  return c;
}

Expected<ChildCommand> ch_run_command(const PythonProgramHeader& h, std::vector<std::string> env,
                                      const std::string& package) {
  const std::string& image = h.container.image;
  if (!is_dir(image))
    return Status::error(std::string(h.what()) + ": ch-run image " + image + " is not a directory on this node");
  // ch-run binds only onto directories the (read-only) image has.
  if (!is_dir(image + kImagePackageDir + "/goldminer"))
    return Status::error(std::string(h.what()) + ": ch-run image " + image + " has no directory " + kImagePackageDir +
                         "/goldminer to bind goldminer-dw's package onto (ch-run binds only onto existing "
                         "directories): mkdir -p " + image + kImagePackageDir + "/goldminer");
  ChildCommand c;
  // The package last, on top of a trainer's mount that covers its place.
  c.argv = {"ch-run"};
  for (const ContainerMount& m : h.container.mounts) c.argv.insert(c.argv.end(), {"-b", m.source + ":" + m.target});
  c.argv.insert(c.argv.end(), {"-b", package + "/goldminer:" + kImagePackageDir + "/goldminer"});
  for (const char* name : {"LD_LIBRARY_PATH", "LD_PRELOAD", "PYTHONHOME"})
    c.argv.push_back(std::string("--unset-env=") + name);
  c.argv.insert(c.argv.end(), {image, "--"});
  // ch-run refuses to start without $USER.
  if (std::none_of(env.begin(), env.end(), [](const std::string& v) { return starts_with(v, "USER="); })) {
    if (const passwd* pw = ::getpwuid(::getuid()); pw != nullptr) env.push_back(std::string("USER=") + pw->pw_name);
  }
  c.env = std::move(env);
  return c;
}

}  // namespace

Expected<ChildCommand> child_command(const PythonProgramHeader& h, const std::vector<std::string>& environment,
                                     const std::string& package) {
  const bool contained = !package.empty() && !h.container.empty();
  std::vector<std::string> env =
      contained ? python_environment(h, environment, {kImagePackageDir}, false) : python_environment(h, environment, {}, true);
  ChildCommand c;
  if (!contained) {
    c.env = std::move(env);
  } else if (h.container.runtime == "ch-run") {
    auto r = ch_run_command(h, std::move(env), package);
    if (!r.ok()) return r.status();
    c = std::move(r).value();
  } else {
    c = enroot_command(h, std::move(env), package);
  }
  const std::vector<std::string> python = python_arguments(h);
  c.argv.insert(c.argv.end(), python.begin(), python.end());
  c.describe = h.python + (contained ? " in " + h.container.runtime + " image " + h.container.image : "");
  return c;
}

Expected<std::string> find_python_package() {
  std::vector<std::string> places;
  char exe[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    std::string dir(exe, static_cast<size_t>(n));
    dir = dir.substr(0, dir.rfind('/'));
    places.push_back(dir + "/python");
    places.push_back(dir.substr(0, dir.rfind('/')) + "/python");  // a build tree's tests/
  }
  places.push_back(GOLDMINER_PYTHON_PKGDIR);
  for (const std::string& p : places)
    if (::access((p + "/goldminer/_dw_child.py").c_str(), R_OK) == 0) return p;
  std::string looked;
  for (const std::string& p : places) looked += (looked.empty() ? "" : " or ") + p + "/goldminer";
  return Status::error("goldminer-dw's goldminer package is in neither " + looked +
                       ": a container image gets it mounted from there (reinstall the suite)");
}

}  // namespace goldminer::dw
