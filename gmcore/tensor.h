// What a tensor of the data plane is: its element type (the wire's dtype
// codes) and row-major shape, and a view of bytes someone else owns. What
// readers, worker programs, transports and the trainer share without the
// wire protocol (gmcore/wire.h), which records it in a batch frame's
// tensor table. Thread-safe: plain values.
#ifndef GOLDMINER_GMCORE_TENSOR_H_
#define GOLDMINER_GMCORE_TENSOR_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace goldminer::wire {

enum class DType : uint8_t { kUInt8 = 1, kInt32 = 2, kInt64 = 3, kFloat32 = 4, kFloat64 = 5, kBool = 6 };

const char* dtype_name(DType dtype);
// Bytes per element; 0 for an unknown value.
size_t dtype_size(DType dtype);

// What a tensor is, from the reader that makes it to the trainer that
// receives it: its element type and row-major shape. The batch frame's
// tensor table records it and BatchWriter lays a frame out from it; every
// tensor type of the data plane (a reader's HostTensor, the view below)
// is one of these plus where its bytes are.
struct TensorDesc {
  DType dtype = DType::kUInt8;
  std::vector<int64_t> shape;
};

// A tensor whose bytes live in memory someone else owns: a reader's batch,
// a worker program's output, a received frame. Valid while that memory is.
struct TensorView : TensorDesc {
  const uint8_t* data = nullptr;
  uint64_t nbytes = 0;
};

}  // namespace goldminer::wire

#endif  // GOLDMINER_GMCORE_TENSOR_H_
