// How goldminer._session hands a received tensor to Python without a copy:
// a DLPack capsule ("dltensor", a DLManagedTensor viewing the received
// buffer) whose deleter drops its share of the batch's buffer.
#ifndef GOLDMINER_TW_LIB_PYTHON_DLPACK_EXPORT_H_
#define GOLDMINER_TW_LIB_PYTHON_DLPACK_EXPORT_H_

#include <dlpack/dlpack.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "gmcore/tensor.h"

namespace goldminer {

// The DLPack dtype of a wire dtype (bool leaves as int8: DLPack 0.6 has
// none); std::runtime_error for a value the wire does not define.
DLDataType dlpack_dtype(wire::DType d);

// A DLPack capsule of the row-major tensor at `data` (nbytes, as the wire
// checked against dtype and shape), keeping `keepalive` until it is freed.
// Needs the GIL.
pybind11::capsule dlpack_capsule(const std::shared_ptr<const void>& keepalive, DLDataType dtype,
                                 const std::vector<int64_t>& shape, const void* data, uint64_t nbytes);

}  // namespace goldminer

#endif  // GOLDMINER_TW_LIB_PYTHON_DLPACK_EXPORT_H_
