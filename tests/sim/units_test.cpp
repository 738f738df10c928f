#include "sim/units.hpp"

#include <gtest/gtest.h>

namespace dtsim {
namespace {

TEST(Units, ParsesBandwidthInBytesAndBits) {
  EXPECT_DOUBLE_EQ(parse_bandwidth("900 GB/s")->bytes_per_s(), 900e9);
  EXPECT_DOUBLE_EQ(parse_bandwidth("400 Gb/s")->bytes_per_s(), 50e9);  // 400e9 bits / 8
  EXPECT_DOUBLE_EQ(parse_bandwidth("25GiB/s")->bytes_per_s(), 25.0 * 1024 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(parse_bandwidth("100 Gbps")->bytes_per_s(), 12.5e9);
  EXPECT_DOUBLE_EQ(parse_bandwidth("3.35 TB/s")->bytes_per_s(), 3.35e12);
}

TEST(Units, ParsesSizesWithSiIecAndNcclTestsSuffixes) {
  EXPECT_EQ(parse_bytes("80 GiB")->count(), 80LL << 30);
  EXPECT_EQ(parse_bytes("80 GB")->count(), 80'000'000'000LL);
  EXPECT_EQ(parse_bytes("8G")->count(), 8LL << 30);  // nccl-tests: -e 8G is 8 GiB
  EXPECT_EQ(parse_bytes("1M")->count(), 1LL << 20);
  EXPECT_EQ(parse_bytes("8")->count(), 8);
  EXPECT_EQ(parse_bytes("25 MB")->count(), 25'000'000);
  EXPECT_EQ(parse_bytes("1.5 KiB")->count(), 1536);
}

TEST(Units, ParsesTimes) {
  EXPECT_EQ(parse_time("1.5 us")->picoseconds(), 1'500'000);
  EXPECT_EQ(parse_time("700ns")->picoseconds(), 700'000);
  EXPECT_EQ(parse_time("2 ms")->picoseconds(), 2'000'000'000);
  EXPECT_EQ(parse_time("3 s")->picoseconds(), 3'000'000'000'000);
  EXPECT_EQ(parse_time("250 ps")->picoseconds(), 250);
}

TEST(Units, ParsesFrequencies) {
  EXPECT_DOUBLE_EQ(*parse_frequency("1980 MHz"), 1.98e9);
  EXPECT_DOUBLE_EQ(*parse_frequency("1.41 GHz"), 1.41e9);
  EXPECT_DOUBLE_EQ(*parse_frequency("+500 kHz"), 5e5);
  EXPECT_FALSE(parse_frequency("1980").ok());
  EXPECT_FALSE(parse_frequency("-1 GHz").ok());
  EXPECT_FALSE(parse_frequency("inf GHz").ok());
  EXPECT_FALSE(parse_frequency("2 GB/s").ok());
}

TEST(Units, ParsesPowers) {
  EXPECT_DOUBLE_EQ(*parse_power("700 W"), 700.0);
  EXPECT_DOUBLE_EQ(*parse_power("1.2 kW"), 1200.0);
  EXPECT_DOUBLE_EQ(*parse_power("30MW"), 3e7);
  EXPECT_FALSE(parse_power("700").ok());      // no unit
  EXPECT_FALSE(parse_power("-700 W").ok());
  EXPECT_FALSE(parse_power("inf W").ok());    // the hand parser before this accepted it
  EXPECT_FALSE(parse_power("700 mW").ok());   // milliwatts are not a GPU's power; not MW either
  EXPECT_FALSE(parse_power("700 GB/s").ok());
}

TEST(Units, ParsesFlopRates) {
  EXPECT_DOUBLE_EQ(parse_flop_rate("989 TFLOP/s")->flops_per_s(), 989e12);
  EXPECT_DOUBLE_EQ(parse_flop_rate("2.25 PFLOPS")->flops_per_s(), 2.25e15);
}

TEST(Units, RejectsBadInputWithAMessageQuotingIt) {
  auto neg = parse_bandwidth("-5 GB/s");
  ASSERT_FALSE(neg.ok());
  EXPECT_NE(neg.error().message.find("-5 GB/s"), std::string::npos);
  EXPECT_NE(neg.error().message.find("negative"), std::string::npos);

  auto unit = parse_bytes("12 XB");
  ASSERT_FALSE(unit.ok());
  EXPECT_NE(unit.error().message.find("unknown size unit 'XB'"), std::string::npos);

  EXPECT_FALSE(parse_time("5").ok());          // a time needs a unit
  EXPECT_FALSE(parse_bandwidth("fast").ok());  // no number
  EXPECT_FALSE(parse_bytes("").ok());
  EXPECT_FALSE(parse_bytes("1e30 B").ok());    // absurd size
  EXPECT_FALSE(parse_time("1e9 d").ok());      // beyond the int64 picosecond range
  EXPECT_FALSE(parse_flop_rate("12 GB/s").ok());
}

TEST(Units, TransferTimeRoundsUpToWholePicoseconds) {
  // 1 GB at 100 GB/s is exactly 10 ms.
  EXPECT_EQ(transfer_time(1e9, Bandwidth::GBps(100)), Time::ms(10));
  // 1 byte at 3 B/s is 333333333333.33 ps, rounded up.
  EXPECT_EQ(transfer_time(1, Bandwidth::bytes_per_s(3)).picoseconds(), 333'333'333'334);
}

TEST(Units, FormatsForHumans) {
  EXPECT_EQ(to_string(Time::us(15)), "15 us");
  EXPECT_EQ(to_string(Bytes::GiB(8)), "8 GiB");
  EXPECT_EQ(to_string(Bandwidth::GBps(450)), "450 GB/s");
}

}  // namespace
}  // namespace dtsim
