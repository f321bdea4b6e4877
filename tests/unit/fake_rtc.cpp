// SPDX-License-Identifier: MIT
// A fake run-time compiler for tests/unit/rtc_identity_test.cpp: the entry points of the API table
// (lib/src/platform/rtc_impl.hpp) under the prefix "fakertc", reporting version 9.0 as hiprtc does in every
// Debian ROCm. Built twice, with a different MORI_FAKE_RTC_FLAVOUR, so the two libraries are two toolchains
// of one reported version.
#include <cstddef>

#ifndef MORI_FAKE_RTC_FLAVOUR
#error "MORI_FAKE_RTC_FLAVOUR must be set"
#endif

extern "C" {
const char* fakertc_flavour() {
  return "flavour " MORI_FAKE_RTC_FLAVOUR;
}
int fakertcVersion(int* major, int* minor) {
  *major = 9;
  *minor = 0;
  return 0;
}
int fakertcCreateProgram(void**, const char*, const char*, int, const char**, const char**) {
  return 1;
}
int fakertcDestroyProgram(void**) {
  return 0;
}
int fakertcAddNameExpression(void*, const char*) {
  return 1;
}
int fakertcCompileProgram(void*, int, const char**) {
  return 1;
}
int fakertcGetProgramLogSize(void*, std::size_t*) {
  return 1;
}
int fakertcGetProgramLog(void*, char*) {
  return 1;
}
int fakertcGetCodeSize(void*, std::size_t*) {
  return 1;
}
int fakertcGetCode(void*, char*) {
  return 1;
}
int fakertcGetLoweredName(void*, const char*, const char**) {
  return 1;
}
const char* fakertcGetErrorString(int) {
  return "FAKERTC_ERROR";
}
}
