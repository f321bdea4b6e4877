// SPDX-License-Identifier: MIT
// The MPI checks (comm/bootstrap.hpp): MORI_CHECK_MPI throws an ApiError naming the call, MPI's error,
// file:line and the rank; MORI_WARN_MPI, for the paths that must not throw, says the same as a warning and
// returns false. No MPI job: MPI_Error_string may be called before MPI_Init.
#include <gtest/gtest.h>

#include <mpi.h>

#include <string>

#include "mori/symm/base/error.hpp"
#include "mori/symm/comm/bootstrap.hpp"

using namespace mori::symm;

TEST(MpiCheck, AFailedCallThrowsNamingTheCallTheErrorAndTheLine) {
  EXPECT_NO_THROW(MORI_CHECK_MPI(MPI_SUCCESS));
  try {
    check_mpi(MPI_ERR_COMM, "MPI_Comm_rank(comm, &r)", "lib/src/x/y.cpp", 42);
    FAIL() << "no exception";
  } catch (const ApiError& e) {
    const std::string what = e.what();
    EXPECT_EQ(e.call(), "MPI_Comm_rank(comm, &r)");
    EXPECT_EQ(e.api_error(), "MPI error code " + std::to_string(MPI_ERR_COMM) + " (MPI not running)");
    EXPECT_NE(what.find("MPI_Comm_rank(comm, &r) failed: "), std::string::npos) << what;
    EXPECT_NE(what.find(" at y.cpp:42 on "), std::string::npos) << what;
    EXPECT_EQ(e.code(), ExitCode::runtime);
  }
}

TEST(MpiCheck, AFailedCallWhereNothingMayThrowIsAWarning) {
  EXPECT_TRUE(MORI_WARN_MPI(MPI_SUCCESS));
  testing::internal::CaptureStderr();
  testing::internal::CaptureStdout();
  bool ok = true;
  EXPECT_NO_THROW(ok = warn_mpi(MPI_ERR_COMM, "MPI_Comm_free(&comm_)", "lib/src/x/y.cpp", 7));
  const std::string out = testing::internal::GetCapturedStdout() + testing::internal::GetCapturedStderr();
  EXPECT_FALSE(ok);
  EXPECT_NE(out.find("MPI_Comm_free(&comm_) failed: "), std::string::npos) << out;
  EXPECT_NE(out.find(" at y.cpp:7 on "), std::string::npos) << out;
}
