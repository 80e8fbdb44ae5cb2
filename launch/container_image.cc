#include "launch/container_image.h"

#include <optional>

namespace goldminer {

namespace {

std::optional<std::string> lookup(const std::vector<std::string>& env, const std::string& name) {
  const std::string prefix = name + "=";
  for (const std::string& e : env)
    if (e.compare(0, prefix.size(), prefix) == 0) return e.substr(prefix.size());
  return std::nullopt;
}

// pyxis's options as Slurm passes a SPANK option to the remote side: an
// srun step's at its init, a batch script's sbatch option in every
// callback (Slurm's names for the option "container-image" of the plugin
// "pyxis"; a dash becomes an underscore).
constexpr const char* kStepOption = "_SLURM_SPANK_OPTION_pyxis_container_";
constexpr const char* kJobOption = "SLURM_SPANK__SLURM_SPANK_OPTION_pyxis_container_";
constexpr const char* kUserDefault = "PYXIS_CONTAINER_";  // pyxis reads these as its options' defaults

}  // namespace

const char* const kContainerRuntimes[] = {"enroot", "ch-run", nullptr};

std::string ContainerMount::text() const {
  return source + ":" + target + (flags.empty() ? "" : ":" + flags);
}

std::string check_container_runtime(const std::string& runtime) {
  for (const char* const* r = kContainerRuntimes; *r != nullptr; ++r)
    if (runtime == *r) return "";
  return "expected enroot or ch-run";
}

Expected<std::vector<ContainerMount>> parse_container_mounts(const std::string& list) {
  std::vector<ContainerMount> out;
  if (list.empty()) return out;
  size_t at = 0;
  for (int n = 1; at <= list.size(); ++n) {
    size_t comma = list.find(',', at);
    if (comma == std::string::npos) comma = list.size();
    const std::string entry = list.substr(at, comma - at);
    at = comma + 1;
    if (entry.empty()) {
      if (comma == list.size() && n > 1) break;  // a trailing comma
      return Status::error("mount " + std::to_string(n) + " is empty: expected SRC[:DST[:FLAGS]]");
    }
    ContainerMount m;
    const size_t c1 = entry.find(':');
    m.source = entry.substr(0, c1);
    if (c1 != std::string::npos) {
      const size_t c2 = entry.find(':', c1 + 1);
      m.target = entry.substr(c1 + 1, c2 == std::string::npos ? std::string::npos : c2 - c1 - 1);
      if (c2 != std::string::npos) m.flags = entry.substr(c2 + 1);
    }
    if (m.target.empty()) m.target = m.source;
    if (m.source.empty() || m.source[0] != '/' || m.target[0] != '/' ||
        m.flags.find_first_of(": ,\t\n") != std::string::npos)
      return Status::error("mount " + std::to_string(n) + " '" + entry +
                           "': expected SRC[:DST[:FLAGS]] with absolute paths");
    out.push_back(std::move(m));
  }
  return out;
}

Expected<ContainerImage> container_image_for_workers(const std::string& runtime, const std::string& image,
                                                     const std::string& mounts) {
  ContainerImage c;
  c.runtime = runtime.empty() ? "enroot" : runtime;
  c.image = image;
  const std::string what = "GOLDMINER_CONTAINER_IMAGE '" + image + "'";
  if (std::string why = check_container_runtime(c.runtime); !why.empty())
    return Status::error("GOLDMINER_CONTAINER_RUNTIME: invalid value '" + runtime + "': " + why);
  const bool path = !image.empty() && image[0] == '/';
  const bool name = !image.empty() && image.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                                              "0123456789_.-") == std::string::npos;
  if (c.runtime == "ch-run" && !path)
    return Status::error(what + ": ch-run runs an image directory: give its absolute path");
  if (!path && !name)
    return Status::error(what + (image.find("://") != std::string::npos || image.find('#') != std::string::npos
                                     ? ": the data workers cannot pull a registry image: import it once "
                                       "(enroot import) into a squashfs file the workers' nodes see, and give "
                                       "its absolute path"
                                     : ": the data workers run on other nodes and directories: give the "
                                       "image's absolute path (or the name of an enroot container there)"));
  auto m = parse_container_mounts(mounts);
  if (!m.ok()) return Status::error("GOLDMINER_CONTAINER_MOUNTS: " + m.status().message());
  c.mounts = std::move(m).value();
  return c;
}

PyxisContainer pyxis_container_of(const std::vector<std::string>& env) {
  for (const char* source : {kStepOption, kJobOption, kUserDefault}) {
    const std::string name = source;
    auto image = lookup(env, name + (source == kUserDefault ? "IMAGE" : "image"));
    if (!image || image->empty()) continue;
    PyxisContainer c;
    c.image = *image;
    c.mounts = lookup(env, name + (source == kUserDefault ? "MOUNTS" : "mounts")).value_or("");
    return c;
  }
  return {};
}

std::vector<std::pair<std::string, std::string>> container_variables(const PyxisContainer& seen,
                                                                      const std::vector<std::string>& env) {
  auto own = lookup(env, "GOLDMINER_CONTAINER_IMAGE");
  if ((own && !own->empty()) || seen.image.empty()) return {};
  std::vector<std::pair<std::string, std::string>> vars = {{"GOLDMINER_CONTAINER_IMAGE", seen.image}};
  if (!seen.mounts.empty()) vars.emplace_back("GOLDMINER_CONTAINER_MOUNTS", seen.mounts);
  return vars;
}

}  // namespace goldminer
