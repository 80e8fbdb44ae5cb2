// DLPack capsules of received tensors: see dlpack_export.h.
#include "tw_lib/python/dlpack_export.h"

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "gmcore/wire.h"

namespace goldminer {
namespace {

// One tensor handed out: the DLManagedTensor, the arrays it points to and
// its share of the batch's buffer, freed together by its deleter (called
// by the consumer, which may not hold the GIL: no Python here).
struct ExportedTensor {
  DLManagedTensor managed{};
  std::vector<int64_t> shape, strides;
  std::shared_ptr<const void> keepalive;
};

// Where a tensor with no bytes points (DLPack wants an address; aligned as
// the wire aligns tensors).
alignas(wire::kDataAlignment) unsigned char no_bytes[wire::kDataAlignment];

// Frees a capsule that no consumer took (one that did renamed it
// "used_dltensor" and owns the tensor).
void free_untaken_capsule(PyObject* capsule) {
  if (!PyCapsule_IsValid(capsule, "dltensor")) return;
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, "dltensor"));
  managed->deleter(managed);
}

}  // namespace

// DLPack 0.6 has no bool (kDLBool came with 0.8, and torch 1.13 reads
// none): a bool tensor leaves as int8, a dtype the wire does not have, which
// goldminer/session.py views as bool again (same bytes, no copy).
DLDataType dlpack_dtype(wire::DType d) {
  switch (d) {
    case wire::DType::kUInt8: return {kDLUInt, 8, 1};
    case wire::DType::kInt32: return {kDLInt, 32, 1};
    case wire::DType::kInt64: return {kDLInt, 64, 1};
    case wire::DType::kFloat32: return {kDLFloat, 32, 1};
    case wire::DType::kFloat64: return {kDLFloat, 64, 1};
    case wire::DType::kBool: return {kDLInt, 8, 1};
  }
  throw std::runtime_error("goldminer.Session: batch tensor of unknown dtype " + std::to_string(static_cast<int>(d)));
}

// A DLPack capsule of the row-major tensor at `data` (nbytes, as the wire
// checked against dtype and shape), keeping `keepalive` until it is freed.
pybind11::capsule dlpack_capsule(const std::shared_ptr<const void>& keepalive, DLDataType dtype,
                           const std::vector<int64_t>& shape, const void* data, uint64_t nbytes) {
  auto e = std::make_unique<ExportedTensor>();
  e->shape = shape;
  e->strides.resize(shape.size());
  int64_t stride = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    e->strides[i] = stride;
    stride *= std::max<int64_t>(shape[i], 1);
  }
  e->keepalive = keepalive;
  DLTensor& t = e->managed.dl_tensor;
  t.data = data != nullptr && nbytes != 0 ? const_cast<void*>(data) : static_cast<void*>(no_bytes);
  t.device = {kDLCPU, 0};
  t.ndim = static_cast<int32_t>(shape.size());
  t.dtype = dtype;
  t.shape = e->shape.data();
  t.strides = e->strides.data();
  t.byte_offset = 0;  // data is the first element
  e->managed.manager_ctx = e.get();
  e->managed.deleter = [](DLManagedTensor* self) { delete static_cast<ExportedTensor*>(self->manager_ctx); };
  PyObject* capsule = PyCapsule_New(&e->managed, "dltensor", free_untaken_capsule);
  if (capsule == nullptr) throw pybind11::error_already_set();
  e.release();  // the capsule's now
  return pybind11::reinterpret_steal<pybind11::capsule>(capsule);
}

}  // namespace goldminer
