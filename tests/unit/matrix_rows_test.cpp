// SPDX-License-Identifier: MIT
// The peer matrix's typed rows (lib/include/mori/symm/matrix/matrix.hpp): what was not measured serialises to
// null with its reason beside it, and the write kernel a row records is the one its JSON and the printed
// table show. No GPU needed.
#include <gtest/gtest.h>

#include <string>

#include "mori/symm/matrix/detail/matrix_write.hpp"
#include "mori/symm/matrix/matrix.hpp"

using namespace mori::symm;

namespace {

// A GPU row as the source rank measured it, with the write kernel it resolved for its own device.
MatrixRow gpu_row(const WriteChoice& choice) {
  MatrixRow r;
  r.src = 0;
  r.dst = 1;
  r.write.kernel = choice;
  r.write.gbps = Measured::of(350.0);
  r.write.copy_engine_gbps = Measured::of(380.0);
  r.write.verified = true;
  r.read_gbps = Measured::of(352.0);
  r.latency_us_p50 = Measured::of(1.6);
  r.link_gbps = Measured::of(478.0);
  return r;
}

WriteChoice choice_for(WriteKernel k, int sms, bool bulk_copy) {
  WriteKernelOptions o;
  o.kernel = k;
  detail::WriteTarget t;
  t.bulk_copy = bulk_copy ? 1 : 0;
  t.multiprocessors = sms;
  return detail::write_choice(o, t);
}

}  // namespace

TEST(MatrixRows, RowWithoutReadSerialisesNullWithItsReason) {
  auto r = gpu_row(choice_for(WriteKernel::plain, 132, true));
  r.read_gbps = Measured::none("the read kernel did not run");
  const Json j = to_json(r);
  ASSERT_TRUE(j.contains("read_gbps"));
  EXPECT_TRUE(j["read_gbps"].is_null());
  EXPECT_EQ(j["read_reason"], "the read kernel did not run");
  // What was measured carries no reason.
  EXPECT_DOUBLE_EQ(j["write_gbps"].get<double>(), 350.0);
  EXPECT_FALSE(j.contains("write_reason"));
  EXPECT_FALSE(j.contains("latency_reason"));
  EXPECT_FALSE(j.contains("copy_engine_reason"));
  EXPECT_FALSE(j.contains("link_reason"));
  EXPECT_FALSE(j.contains("status"));
}

TEST(MatrixRows, AnEmptyValueWithoutAReasonStillSaysSo) {
  MatrixRow r;  // nothing measured, no reason given
  const Json j = to_json(r);
  for (const char* key : {"write_gbps", "read_gbps", "copy_engine_write_gbps", "write_over_copy_engine",
                          "latency_us_p50", "link_gbps"})
    EXPECT_TRUE(j[key].is_null()) << key;
  for (const char* key :
       {"write_reason", "read_reason", "copy_engine_reason", "latency_reason", "link_reason"})
    EXPECT_EQ(j[key], "not measured") << key;
}

TEST(MatrixRows, HostRowHasNoCopyEngineAndNoRatio) {
  MatrixRow r;
  r.write.kernel = choice_for(WriteKernel::auto_select, 1, false);
  r.write.gbps = Measured::of(9.5);
  r.write.copy_engine_gbps = Measured::none("host runtime: no copy engine, every write is a memcpy");
  r.write.verified = true;
  EXPECT_FALSE(r.write.over_copy_engine().has_value());
  const Json j = to_json(r);
  EXPECT_TRUE(j["copy_engine_write_gbps"].is_null());
  EXPECT_TRUE(j["write_over_copy_engine"].is_null());
  EXPECT_EQ(j["copy_engine_reason"], "host runtime: no copy engine, every write is a memcpy");
  r.write.copy_engine_gbps = Measured::of(10.0);
  EXPECT_DOUBLE_EQ(*r.write.over_copy_engine(), 0.95);
  EXPECT_DOUBLE_EQ(to_json(r)["write_over_copy_engine"].get<double>(), 0.95);
}

TEST(MatrixRows, TimeoutLeavesLatencyNullWithTheRoundAndMarksTheRow) {
  auto r = gpu_row(choice_for(WriteKernel::plain, 132, true));
  r.timed_out = true;
  r.latency_us_p50 = Measured::none("the ping-pong timed out at round 7 of 1000 (bound 20 s)");
  PeerMatrix m;
  m.rows = {gpu_row(choice_for(WriteKernel::plain, 132, true)), r};
  EXPECT_TRUE(m.timed_out());
  const Json j = to_json(m);
  ASSERT_EQ(j["rows"].size(), 2u);
  EXPECT_FALSE(j["rows"][0].contains("status"));
  EXPECT_EQ(j["rows"][1]["status"], "timeout");
  EXPECT_TRUE(j["rows"][1]["latency_us_p50"].is_null());
  EXPECT_NE(j["rows"][1]["latency_reason"].get<std::string>().find("round 7 of 1000"), std::string::npos);
  EXPECT_NE(format_matrix(m).find("TIMEOUT"), std::string::npos);
}

TEST(MatrixRows, TheWriteKernelTheRowRecordsIsWhatTheReportShows) {
  // Asked for bulk on a device without bulk copies: plain ran, with the blocks of that device's 78 SMs. The
  // same request on another device would resolve differently; the report must show what this row recorded.
  const WriteChoice ran = choice_for(WriteKernel::bulk, 78, false);
  ASSERT_EQ(ran.fallback, WriteFallback::no_bulk_copy);
  ASSERT_NE(to_json(ran), to_json(choice_for(WriteKernel::bulk, 132, true)));
  PeerMatrix m;
  m.rows = {gpu_row(ran)};
  m.request.kernel = WriteKernel::bulk;
  const Json j = to_json(m);
  EXPECT_EQ(j["rows"][0]["write_kernel"], to_json(ran));
  EXPECT_EQ(j["rows"][0]["write_kernel"]["kernel"], "plain");
  EXPECT_EQ(j["rows"][0]["write_kernel"]["blocks"], 156);
  EXPECT_EQ(j["write_kernel"]["requested"], "bulk");
  const std::string table = format_matrix(m);
  EXPECT_NE(table.find(ran.variant), std::string::npos) << table;
  EXPECT_NE(table.find("note: " + ran.variant + ": bulk copies need NVIDIA sm_90"), std::string::npos)
      << table;
  EXPECT_NE(table.find("0.921"), std::string::npos) << table;  // 350 / 380
}

TEST(MatrixRows, VariantsAndWrongWritesAreCounted) {
  auto r = gpu_row(choice_for(WriteKernel::auto_select, 132, true));
  WriteMeasure good, bad;
  good.kernel = choice_for(WriteKernel::stream, 132, true);
  good.gbps = Measured::of(360.0);
  good.copy_engine_gbps = Measured::of(390.0);
  good.verified = true;
  bad.kernel = choice_for(WriteKernel::bulk_tma, 132, true);
  bad.gbps = Measured::of(366.0);
  bad.copy_engine_gbps = Measured::none("not measured");
  bad.verified = false;
  r.variants = {good, bad};
  PeerMatrix m;
  m.rows = {r, gpu_row(choice_for(WriteKernel::auto_select, 132, true))};
  m.rows[1].write.verified = false;
  EXPECT_EQ(m.writes_wrong(), 2u);  // the second row's write and the first row's bulk-tma variant
  const Json j = to_json(m);
  EXPECT_EQ(j["writes_wrong"], 2);
  const auto& v = j["rows"][0]["write_variants"];
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v[0]["kernel"], "stream");
  EXPECT_TRUE(v[0]["verified"].get<bool>());
  EXPECT_FALSE(v[0].contains("copy_engine_reason"));
  EXPECT_EQ(v[1]["kernel"], "bulk-tma");
  EXPECT_FALSE(v[1]["verified"].get<bool>());
  EXPECT_TRUE(v[1]["write_over_copy_engine"].is_null());
  EXPECT_EQ(v[1]["copy_engine_reason"], "not measured");
  EXPECT_FALSE(j["rows"][1].contains("write_variants"));
  const std::string table = format_matrix(m);
  EXPECT_NE(table.find("WRONG"), std::string::npos);
  EXPECT_NE(table.find(good.kernel.variant), std::string::npos);
}
