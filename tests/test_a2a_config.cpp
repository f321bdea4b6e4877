#include <gtest/gtest.h>

#include "mori/symm/a2a.hpp"
#include "mori/symm/error.hpp"

using namespace mori::symm;

TEST(A2aConfig, ProtocolListsNameCopy) {
  EXPECT_EQ(parse_protocols("copy"), std::vector<Protocol>{Protocol::copy});
  EXPECT_EQ(parse_protocols("direct,copy,direct"), (std::vector<Protocol>{Protocol::direct, Protocol::copy}));
  EXPECT_EQ(parse_protocols("all"),
            (std::vector<Protocol>{Protocol::simple, Protocol::direct, Protocol::ll, Protocol::copy}));
  EXPECT_STREQ(to_string(Protocol::copy), "copy");
  EXPECT_THROW(parse_protocols("copy,ce"), UsageError);
}

// A graph holds the copy protocol's copies at fixed parities: its launches per replay must be even.
TEST(A2aConfig, CopyInAGraphNeedsEvenLaunches) {
  A2aConfig c;
  c.chunks = {4096};
  c.protocols = {Protocol::copy};
  c.graph = 16;
  EXPECT_NO_THROW(validate_a2a(c, 2, 0, false));
  c.graph = 15;
  EXPECT_THROW(validate_a2a(c, 2, 0, false), UsageError);
  c.graph = 16;
  c.verify_epochs = 5;
  EXPECT_THROW(validate_a2a(c, 2, 0, false), UsageError);
  c.protocols = {Protocol::direct};  // parities are read on the device: any count
  EXPECT_NO_THROW(validate_a2a(c, 2, 0, false));
  c.protocols = {Protocol::copy};
  c.graph = 0;  // launched one by one, the host knows every launch's parity
  EXPECT_NO_THROW(validate_a2a(c, 2, 0, false));
}

// auto: copy from 64 MiB where ranks share a device (measured), never across devices (not measured); simple
// instead where a graph could not hold it.
TEST(A2aConfig, AutoPicksCopyForLargeChunksOnASharedDevice) {
  A2aConfig c;
  c.graph = 16;
  const std::size_t big = std::size_t{64} << 20;
  EXPECT_EQ(a2a_protocols(c, big, false), std::vector<Protocol>{Protocol::copy});
  EXPECT_EQ(a2a_protocols(c, big / 4, false), std::vector<Protocol>{Protocol::direct});
  EXPECT_EQ(a2a_protocols(c, big, true), std::vector<Protocol>{Protocol::simple});
  c.graph = 3;
  EXPECT_EQ(a2a_protocols(c, big, false), std::vector<Protocol>{Protocol::simple});
  c.graph = 0;  // launched one by one, any number of verified epochs
  c.verify_epochs = 5;
  EXPECT_EQ(a2a_protocols(c, big, false), std::vector<Protocol>{Protocol::copy});
}

// auto never takes ll: with device-scope signals on a shared device direct beat it at 4 KiB too.
TEST(A2aConfig, AutoNeverPicksLl) {
  A2aConfig c;
  for (bool one_rank_per_device : {false, true})
    for (std::size_t chunk : {std::size_t{4}, std::size_t{4096}, std::size_t{256} << 10})
      EXPECT_EQ(a2a_protocols(c, chunk, one_rank_per_device), std::vector<Protocol>{Protocol::direct});
}

TEST(A2aConfig, SignalScopeParses) {
  EXPECT_EQ(parse_signal_scope("auto"), SignalScope::auto_select);
  EXPECT_EQ(parse_signal_scope("system"), SignalScope::system);
  EXPECT_EQ(parse_signal_scope("device"), SignalScope::device);
  EXPECT_THROW(parse_signal_scope("gpu"), UsageError);
  EXPECT_THROW(parse_signal_scope(""), UsageError);
}
