// Entry points of the transport implementations, used by the factory
// (transport.cc) only.
#ifndef GOLDMINER_MPI_TRANSPORT_TRANSPORT_IMPL_H_
#define GOLDMINER_MPI_TRANSPORT_TRANSPORT_IMPL_H_

#include <cstring>
#include <memory>
#include <string>

#include "mpi_transport/transport.h"

namespace goldminer::transport {

Expected<std::unique_ptr<Endpoint>> listen_local(const std::string& name, const Options& options);
Expected<std::unique_ptr<Endpoint>> connect_local(const std::string& name, const Options& options);
// Listening on host_port (`listening`) or connected to it; host_port:
// "HOST:PORT" (IPv4 or a resolvable name).
Expected<std::unique_ptr<Endpoint>> open_ucx(const std::string& host_port, const Options& options, bool listening);
Expected<std::unique_ptr<Endpoint>> listen_mpi(const Options& options);
Expected<std::unique_ptr<Endpoint>> connect_mpi(const Options& options);

}  // namespace goldminer::transport

#endif  // GOLDMINER_MPI_TRANSPORT_TRANSPORT_IMPL_H_
