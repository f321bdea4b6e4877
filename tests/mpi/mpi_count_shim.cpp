// SPDX-License-Identifier: MIT
// Test-only MPI profiling library (LD_PRELOAD): counts the MPI calls a rank makes inside each timed loop that
// the tools mark with MPI_Pcontrol(1, step) ... MPI_Pcontrol(0) (docs/mori-a2a.md "Timed loops and MPI"), and
// the largest communicator each loop's calls used (a request's is its communicator's). At MPI_Finalize it
// writes $MORI_MPI_COUNT_DIR/rank<R>.txt: "world N", then one line per loop: step, calls, largest
// communicator, and the calls by name. It wraps every MPI function the library and the tools call
// (tests/mpi/timed_mpi_calls_test.py checks the list against the sources); each wrapper calls the PMPI_ entry
// of the MPI library.
#include <mpi.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

namespace {

struct Loop {
  std::string step;
  long calls = 0;
  int largest_comm = 0;
  std::map<std::string, long> by_name;
};

std::vector<Loop> g_loops;
bool g_open = false;
std::map<MPI_Request, int> g_request_comm;  // a pending request's communicator size

int comm_size(MPI_Comm comm) {
  int n = 0;
  if (comm == MPI_COMM_NULL || PMPI_Comm_size(comm, &n) != MPI_SUCCESS) return 0;
  return n;
}

int request_comm(const MPI_Request* r) {
  const auto it = g_request_comm.find(*r);
  return it == g_request_comm.end() ? 0 : it->second;
}

void note(const char* name, int comm) {
  if (!g_open) return;
  Loop& l = g_loops.back();
  ++l.calls;
  l.largest_comm = std::max(l.largest_comm, comm);
  ++l.by_name[name];
}

void remember(const MPI_Request* r, int comm) {
  if (*r != MPI_REQUEST_NULL) g_request_comm[*r] = comm;
}

void write_counts() {
  const char* dir = std::getenv("MORI_MPI_COUNT_DIR");
  if (!dir) return;
  int rank = 0, world = 0;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  PMPI_Comm_size(MPI_COMM_WORLD, &world);
  const std::string path = std::string(dir) + "/rank" + std::to_string(rank) + ".txt";
  FILE* f = std::fopen(path.c_str(), "w");
  if (!f) return;  // the test reports the missing file
  std::fprintf(f, "world %d\n", world);
  for (const Loop& l : g_loops) {
    std::fprintf(f, "%s\t%ld\t%d\t", l.step.c_str(), l.calls, l.largest_comm);
    for (const auto& [name, n] : l.by_name) std::fprintf(f, "%s=%ld ", name.c_str(), n);
    std::fprintf(f, "\n");
  }
  if (g_open) std::fprintf(f, "unclosed\t%s\n", g_loops.back().step.c_str());
  std::fclose(f);
}

}  // namespace

extern "C" {

int MPI_Pcontrol(const int level, ...) {
  if (level == 1) {
    va_list ap;
    va_start(ap, level);
    const char* step = va_arg(ap, const char*);
    va_end(ap);
    // A loop opened inside another is recorded as such: the test fails on it.
    Loop l;
    l.step = g_open ? std::string("nested:") + (step ? step : "") : (step ? step : "(no step)");
    g_loops.push_back(l);
    g_open = true;
  } else if (level == 0) {
    g_open = false;
  }
  return MPI_SUCCESS;
}

int MPI_Init(int* argc, char*** argv) {
  return PMPI_Init(argc, argv);
}
int MPI_Initialized(int* flag) {
  note("MPI_Initialized", 0);
  return PMPI_Initialized(flag);
}
int MPI_Finalized(int* flag) {
  note("MPI_Finalized", 0);
  return PMPI_Finalized(flag);
}
int MPI_Finalize(void) {
  write_counts();
  return PMPI_Finalize();
}
int MPI_Abort(MPI_Comm comm, int errorcode) {
  write_counts();
  return PMPI_Abort(comm, errorcode);
}
int MPI_Error_string(int errorcode, char* string, int* resultlen) {
  note("MPI_Error_string", 0);
  return PMPI_Error_string(errorcode, string, resultlen);
}
int MPI_Get_library_version(char* version, int* resultlen) {
  note("MPI_Get_library_version", 0);
  return PMPI_Get_library_version(version, resultlen);
}
int MPI_Comm_rank(MPI_Comm comm, int* rank) {
  note("MPI_Comm_rank", comm_size(comm));
  return PMPI_Comm_rank(comm, rank);
}
int MPI_Comm_size(MPI_Comm comm, int* size) {
  note("MPI_Comm_size", comm_size(comm));
  return PMPI_Comm_size(comm, size);
}
int MPI_Comm_dup(MPI_Comm comm, MPI_Comm* newcomm) {
  note("MPI_Comm_dup", comm_size(comm));
  return PMPI_Comm_dup(comm, newcomm);
}
int MPI_Comm_free(MPI_Comm* comm) {
  note("MPI_Comm_free", comm_size(*comm));
  return PMPI_Comm_free(comm);
}
int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm* newcomm) {
  note("MPI_Comm_split", comm_size(comm));
  return PMPI_Comm_split(comm, color, key, newcomm);
}
int MPI_Comm_split_type(MPI_Comm comm, int split_type, int key, MPI_Info info, MPI_Comm* newcomm) {
  note("MPI_Comm_split_type", comm_size(comm));
  return PMPI_Comm_split_type(comm, split_type, key, info, newcomm);
}
int MPI_Comm_set_errhandler(MPI_Comm comm, MPI_Errhandler errhandler) {
  note("MPI_Comm_set_errhandler", comm_size(comm));
  return PMPI_Comm_set_errhandler(comm, errhandler);
}
int MPI_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                  MPI_Comm comm) {
  note("MPI_Allreduce", comm_size(comm));
  return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
}
int MPI_Ibarrier(MPI_Comm comm, MPI_Request* request) {
  const int n = comm_size(comm);
  note("MPI_Ibarrier", n);
  const int rc = PMPI_Ibarrier(comm, request);
  remember(request, n);
  return rc;
}
int MPI_Isend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
              MPI_Request* request) {
  const int n = comm_size(comm);
  note("MPI_Isend", n);
  const int rc = PMPI_Isend(buf, count, datatype, dest, tag, comm, request);
  remember(request, n);
  return rc;
}
int MPI_Irecv(void* buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
              MPI_Request* request) {
  const int n = comm_size(comm);
  note("MPI_Irecv", n);
  const int rc = PMPI_Irecv(buf, count, datatype, source, tag, comm, request);
  remember(request, n);
  return rc;
}
int MPI_Test(MPI_Request* request, int* flag, MPI_Status* status) {
  note("MPI_Test", request_comm(request));
  return PMPI_Test(request, flag, status);
}
int MPI_Testall(int count, MPI_Request array_of_requests[], int* flag, MPI_Status array_of_statuses[]) {
  int n = 0;
  for (int i = 0; i < count; ++i) n = std::max(n, request_comm(&array_of_requests[i]));
  note("MPI_Testall", n);
  return PMPI_Testall(count, array_of_requests, flag, array_of_statuses);
}
int MPI_Cancel(MPI_Request* request) {
  note("MPI_Cancel", request_comm(request));
  return PMPI_Cancel(request);
}
int MPI_Request_free(MPI_Request* request) {
  note("MPI_Request_free", request_comm(request));
  return PMPI_Request_free(request);
}

}  // extern "C"
