// The container image a trainer runs in, as goldminer-dw needs it to run
// the trainer's Python code with the image's Python and torch
// (docs/ARCHITECTURE-python.md, "Jobs in containers"): the runtime, the
// image and the mounts, from GOLDMINER_CONTAINER_* (the user's, or what
// the SPANK plugin saw of pyxis's options). Plain values; thread-compatible.
#ifndef GOLDMINER_LAUNCH_CONTAINER_IMAGE_H_
#define GOLDMINER_LAUNCH_CONTAINER_IMAGE_H_

#include <string>
#include <utility>
#include <vector>

#include "gmcore/status.h"

namespace goldminer {

// One mount, in pyxis's --container-mounts form SRC[:DST[:FLAGS]] (DST
// defaults to SRC; FLAGS joined by '+', e.g. "ro+rprivate": enroot's
// fstab options).
struct ContainerMount {
  std::string source, target, flags;
  std::string text() const;  // SRC:DST[:FLAGS]
};

struct ContainerImage {
  // "enroot" (an image file: a squashfs path, or a container name enroot
  // knows on the worker's node) or "ch-run" (an image directory); "" when
  // the trainer runs in no container.
  std::string runtime;
  std::string image;
  std::vector<ContainerMount> mounts;
  bool empty() const { return image.empty(); }
};

extern const char* const kContainerRuntimes[];  // "enroot", "ch-run", nullptr

// "" when `runtime` is one goldminer-dw can run a child through, else why not.
std::string check_container_runtime(const std::string& runtime);

// A comma-separated list of mounts; errors name the entry at fault and
// say the form expected. Both paths must be absolute.
Expected<std::vector<ContainerMount>> parse_container_mounts(const std::string& list);

// The image and mounts of GOLDMINER_CONTAINER_* (`runtime` "" = enroot),
// checked for the workers: an absolute image path or, for enroot, the name
// of a container on the workers' nodes; not a registry reference (the
// workers cannot pull one). Errors name the variable and say what to do.
Expected<ContainerImage> container_image_for_workers(const std::string& runtime, const std::string& image,
                                                     const std::string& mounts);

// The image and mounts pyxis was given for the step whose job environment
// is `env`, read the only ways a second SPANK plugin can (pyxis exports
// nothing of its own): an srun step's own --container-image (Slurm's
// _SLURM_SPANK_OPTION_pyxis_container_image, present in the remote init
// only), the batch script's sbatch --container-image
// (SLURM_SPANK__SLURM_SPANK_OPTION_pyxis_container_image), then the
// user's PYXIS_CONTAINER_IMAGE; the mounts from the same source as the
// image. Empty when the step runs in no pyxis container.
struct PyxisContainer {
  std::string image, mounts;
};
PyxisContainer pyxis_container_of(const std::vector<std::string>& env);

// The variables that hand the trainer its container (set by the SPANK
// plugin in user_init): GOLDMINER_CONTAINER_IMAGE and, when pyxis was
// given mounts, GOLDMINER_CONTAINER_MOUNTS; none when the user set
// GOLDMINER_CONTAINER_IMAGE in `env` or pyxis runs no image.
std::vector<std::pair<std::string, std::string>> container_variables(const PyxisContainer& seen,
                                                                      const std::vector<std::string>& env);

}  // namespace goldminer

#endif  // GOLDMINER_LAUNCH_CONTAINER_IMAGE_H_
