// The PostgreSQL source: its text decoder alone, then its snapshot against a real server.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "sources/postgres_replication.hpp"
#include "sources/postgres_spill.hpp"
#include "sources/postgres_types.hpp"
#include "sources/sources.hpp"
#include "support/postgres_server.hpp"
#include "support/scale.hpp"
#include "support/status_matchers.hpp"
#include "support/temp_dir.hpp"

namespace skippr::sources {
namespace {

using postgres::PgColumnDecoder;
using postgres::PgType;
using skippr::testing::ExpectOk;
using skippr::testing::PostgresServer;
using skippr::testing::PostgresServerOptions;
using skippr::testing::PostgresSuite;
using skippr::testing::Scaled;
using ::testing::HasSubstr;

// ----- the decoder -----------------------------------------------------------------------------

PgType Type(uint32_t oid, int32_t modifier = -1) {
  PgType type;
  type.oid = oid;
  type.modifier = modifier;
  return type;
}
PgType ArrayOf(uint32_t element_oid, int32_t modifier = -1) {
  PgType type;
  type.oid = 1;
  type.category = 'A';
  type.element_oid = element_oid;
  type.modifier = modifier;
  return type;
}
int32_t NumericModifier(int precision, int scale) { return ((precision << 16) | scale) + 4; }
Value Decode(const PgType& type, std::string_view text) {
  return PgColumnDecoder(type).Decode(text);
}
constexpr int64_t kMicrosPerDay = 86'400'000'000LL;

TEST(PostgresDecoder, ScalarsKeepEveryDigitAndBit) {
  EXPECT_EQ(Decode(Type(16), "t"), Value::Bool(true));
  EXPECT_EQ(Decode(Type(16), "f"), Value::Bool(false));
  EXPECT_EQ(Decode(Type(21), "-32768"), Value::Int(-32768));
  EXPECT_EQ(Decode(Type(23), "2147483647"), Value::Int(2147483647));
  EXPECT_EQ(Decode(Type(20), "9223372036854775807"), Value::Int(INT64_MAX));
  EXPECT_EQ(Decode(Type(20), "-9223372036854775808"), Value::Int(INT64_MIN));
  EXPECT_EQ(Decode(Type(701), "0.30000000000000004"), Value::Double(0.30000000000000004));
  EXPECT_EQ(Decode(Type(700), "1.17549435e-38"), Value::Double(1.17549435e-38));
  EXPECT_TRUE(std::isnan(Decode(Type(701), "NaN").as_double()));
  EXPECT_EQ(Decode(Type(701), "Infinity"), Value::Double(INFINITY));
  EXPECT_EQ(Decode(Type(700), "-Infinity"), Value::Double(-INFINITY));
  EXPECT_EQ(PgColumnDecoder(Type(700)).logical_type(), LogicalType::Float());
  EXPECT_EQ(Decode(Type(25), "héllo\tthere"), Value::String("héllo\tthere"));
  EXPECT_EQ(Decode(Type(17), "\\x00ff10"), Value::Binary(std::string("\x00\xff\x10", 3)));
  EXPECT_EQ(Decode(Type(17), "\\x"), Value::Binary(""));
  EXPECT_EQ(Decode(Type(2950), "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"),
            Value::Binary(std::string("\xa0\xee\xbc\x99\x9c\x0b\x4e\xf8\xbb\x6d\x6b\xb9\xbd\x38\x0a\x11",
                                      16)));
  EXPECT_EQ(PgColumnDecoder(Type(2950)).logical_type(), LogicalType::Uuid());
}

TEST(PostgresDecoder, NumericIsAnExactDecimalAndWhatItCannotHoldStaysText) {
  const PgType money = Type(1700, NumericModifier(10, 2));
  EXPECT_EQ(PgColumnDecoder(money).logical_type(), *LogicalType::Decimal(10, 2));
  EXPECT_EQ(Decode(money, "-12345678.90"), Value::Decimal(-1234567890, 10, 2));
  EXPECT_EQ(Decode(money, "NaN"), Value::String("NaN"));
  EXPECT_EQ(Decode(money, "Infinity"), Value::String("Infinity"));
  // Unconstrained: decimal(38, 10); more digits than that go to the sibling string, exactly.
  const PgType any = Type(1700);
  EXPECT_EQ(PgColumnDecoder(any).logical_type(), *LogicalType::Decimal(38, 10));
  EXPECT_EQ(Decode(any, "1.5"), Value::Decimal(15'000'000'000, 38, 10));
  EXPECT_EQ(Decode(any, "0.12345678901"), Value::String("0.12345678901"));
  EXPECT_EQ(Decode(any, "1" + std::string(28, '0')), Value::String("1" + std::string(28, '0')));
  // numeric(40, 2) and a negative scale are beyond the decimal: the unconstrained rule.
  EXPECT_EQ(PgColumnDecoder(Type(1700, NumericModifier(40, 2))).logical_type(),
            *LogicalType::Decimal(38, 10));
  EXPECT_EQ(PgColumnDecoder(Type(1700, ((5 << 16) | (0x7ff & -2)) + 4)).logical_type(),
            *LogicalType::Decimal(38, 10));
}

TEST(PostgresDecoder, DatesAndTimesIncludingBcAndInfinity) {
  EXPECT_EQ(Decode(Type(1082), "1970-01-02"), Value::Date(1));
  EXPECT_EQ(Decode(Type(1082), "0001-01-01 BC"), Value::Date(-719528)) << "1 BC is year 0";
  EXPECT_EQ(Decode(Type(1082), "10000-01-01"), Value::Date(2932897));
  EXPECT_EQ(Decode(Type(1082), "infinity"), Value::String("infinity"));
  EXPECT_EQ(Decode(Type(1083), "23:59:59.999999"), Value::Int(kMicrosPerDay - 1));
  EXPECT_EQ(Decode(Type(1083), "24:00:00"), Value::Int(kMicrosPerDay));
  EXPECT_EQ(Decode(Type(1114), "1970-01-01 00:00:01.5"), Value::Timestamp(1'500'000));
  EXPECT_EQ(Decode(Type(1114), "0044-03-15 12:00:00 BC"),
            Value::Timestamp(Decode(Type(1082), "0044-03-15 BC").as_int() * kMicrosPerDay +
                             12 * 3'600'000'000LL));
  EXPECT_EQ(Decode(Type(1184), "1970-01-01 02:00:00+02"), Value::TimestampTz(0));
  EXPECT_EQ(Decode(Type(1184), "1970-01-01 00:00:00-00:30"), Value::TimestampTz(1'800'000'000));
  EXPECT_EQ(Decode(Type(1184), "-infinity"), Value::String("-infinity"));
  // Text-shaped types keep PostgreSQL's own text.
  EXPECT_EQ(Decode(Type(1186), "P1Y2M3DT4H5M6S"), Value::String("P1Y2M3DT4H5M6S"));
  EXPECT_EQ(Decode(Type(1266), "10:00:00+02"), Value::String("10:00:00+02"));
}

TEST(PostgresDecoder, OneDimensionalArraysAreListsOthersStayText) {
  const PgType ints = ArrayOf(23);
  EXPECT_EQ(PgColumnDecoder(ints).logical_type().id(), TypeId::kList);
  EXPECT_EQ(Decode(ints, "{1,NULL,-3}"),
            Value::List({Value::Int(1), Value::Null(), Value::Int(-3)}));
  EXPECT_EQ(Decode(ints, "{}"), Value::List({}));
  EXPECT_EQ(Decode(ints, "{{1,2},{3,4}}"), Value::String("{{1,2},{3,4}}"));
  EXPECT_EQ(Decode(ints, "[0:1]={1,2}"), Value::String("[0:1]={1,2}"));
  EXPECT_EQ(Decode(ArrayOf(25), R"({plain,"with space","quote\"and\\slash",NULL,"NULL"})"),
            Value::List({Value::String("plain"), Value::String("with space"),
                         Value::String("quote\"and\\slash"), Value::Null(),
                         Value::String("NULL")}));
  // An element the list cannot hold sends the whole array to the sibling, as text.
  EXPECT_EQ(Decode(ArrayOf(1700, NumericModifier(5, 1)), "{1.5,NaN}"),
            Value::String("{1.5,NaN}"));
}

// ----- protocol version 2: transactions streamed while in progress -----------------------------

std::string BigEndian(uint64_t value, int bytes) {
  std::string out;
  for (int shift = (bytes - 1) * 8; shift >= 0; shift -= 8) out.push_back(static_cast<char>(value >> shift));
  return out;
}

TEST(PgOutput, StreamControlMessagesParse) {
  Result<postgres::PgOutputMessage> start = postgres::ParsePgOutput("S" + BigEndian(742, 4) + '\x01');
  ASSERT_TRUE(start.ok()) << start.status().ToString();
  EXPECT_EQ(std::get<postgres::StreamStartMessage>(*start).xid, 742u);
  EXPECT_TRUE(std::get<postgres::StreamStartMessage>(*start).is_first_segment);
  EXPECT_TRUE(std::holds_alternative<postgres::StreamStopMessage>(*postgres::ParsePgOutput("E")));
  Result<postgres::PgOutputMessage> commit = postgres::ParsePgOutput(
      "c" + BigEndian(742, 4) + '\0' + BigEndian(0x1'0000'0010, 8) + BigEndian(0x1'0000'0040, 8) +
      BigEndian(0, 8));
  ASSERT_TRUE(commit.ok()) << commit.status().ToString();
  EXPECT_EQ(std::get<postgres::StreamCommitMessage>(*commit).commit_lsn, 0x1'0000'0010u);
  EXPECT_EQ(std::get<postgres::StreamCommitMessage>(*commit).end_lsn, 0x1'0000'0040u);
  Result<postgres::PgOutputMessage> abort =
      postgres::ParsePgOutput("A" + BigEndian(742, 4) + BigEndian(743, 4));
  ASSERT_TRUE(abort.ok());
  EXPECT_EQ(std::get<postgres::StreamAbortMessage>(*abort).subxid, 743u);
  // Cut short: a clear error, never a read past the end.
  EXPECT_THAT(postgres::ParsePgOutput("c" + BigEndian(742, 4)).status().message(),
              HasSubstr("cut short"));
  // A streamed change names its transaction after the tag; without it, it is the plain message.
  Result<postgres::StreamedChange> change =
      postgres::SplitStreamedChange("I" + BigEndian(743, 4) + BigEndian(16384, 4) + "N");
  ASSERT_TRUE(change.ok());
  EXPECT_EQ(change->xid, 743u);
  EXPECT_EQ(change->message, "I" + BigEndian(16384, 4) + "N");
  EXPECT_FALSE(postgres::SplitStreamedChange("I12").ok());
}

std::vector<std::string> ReadBack(postgres::SpilledTransaction& transaction) {
  std::vector<std::string> changes;
  while (true) {
    Result<std::optional<std::string>> change = transaction.Next();
    EXPECT_TRUE(change.ok()) << change.status().ToString();
    if (!change.ok() || !change->has_value()) return changes;
    changes.push_back(std::move(**change));
  }
}

TEST(SpilledTransactions, AbortedSubtransactionsAndTransactionsLeaveNothing) {
  skippr::testing::TempDir dir;
  postgres::SpilledTransactions spilled(dir.Sub("spill"));
  ExpectOk(spilled.Reset());
  // Two transactions streamed in turns; the second is aborted whole, a subtransaction of the
  // first is rolled back. Enough changes to cross the write buffer many times.
  ExpectOk(spilled.Start(100, true));
  ExpectOk(spilled.Start(200, true));
  std::vector<std::string> expected;
  for (int i = 0; i < 30'000; ++i) {
    const uint32_t subxid = i % 3 == 0 ? 101 : 100;
    std::string change = fmt::format("I change {} {}", i, std::string(static_cast<size_t>(i % 90), 'x'));
    ExpectOk(spilled.Append(100, subxid, change));
    if (subxid == 100) expected.push_back(change);
    ExpectOk(spilled.Append(200, 200, "D other"));
  }
  EXPECT_EQ(spilled.open_transactions(), 2u);
  ExpectOk(spilled.Abort(100, 101));
  ExpectOk(spilled.Abort(200, 200));
  ExpectOk(spilled.Abort(300, 300));  // never streamed here: nothing to drop
  Result<std::unique_ptr<postgres::SpilledTransaction>> committed = spilled.Commit(100);
  ASSERT_TRUE(committed.ok()) << committed.status().ToString();
  EXPECT_EQ(ReadBack(**committed), expected);
  committed->reset();
  EXPECT_EQ(spilled.open_transactions(), 0u);
  EXPECT_TRUE(std::filesystem::is_empty(dir.Sub("spill"))) << "spill files are removed";

  // A later segment of a transaction whose start this process never saw, and a commit of one.
  EXPECT_THAT(spilled.Start(400, false).message(), HasSubstr("run sync again"));
  EXPECT_THAT(spilled.Commit(400).status().message(), HasSubstr("run sync again"));
}

TEST(SpilledTransactions, ADamagedSpillFileIsAnErrorNamingItAndTheOffset) {
  skippr::testing::TempDir dir;
  postgres::SpilledTransactions spilled(dir.Sub("spill"));
  ExpectOk(spilled.Reset());
  ExpectOk(spilled.Start(7, true));
  for (int i = 0; i < 10; ++i) ExpectOk(spilled.Append(7, 7, fmt::format("I change {}", i)));
  Result<std::unique_ptr<postgres::SpilledTransaction>> committed = spilled.Commit(7);
  ASSERT_TRUE(committed.ok());
  {
    std::fstream file(dir.Sub("spill/xid-7.spill"), std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(8 + 12 + 3);  // inside the first record's message
    file.put('#');
  }
  Result<std::optional<std::string>> change = (*committed)->Next();
  ASSERT_FALSE(change.ok());
  EXPECT_THAT(change.status().message(), HasSubstr("xid-7.spill"));
  EXPECT_THAT(change.status().message(), HasSubstr("at byte 8 does not match its checksum"));
}

TEST(SpilledTransactions, ResetRemovesWhatAnEarlierProcessLeft) {
  skippr::testing::TempDir dir;
  {
    postgres::SpilledTransactions spilled(dir.Sub("spill"));
    ExpectOk(spilled.Reset());
    ExpectOk(spilled.Start(9, true));
    ExpectOk(spilled.Append(9, 9, "I row"));
    (void)spilled.Commit(9);  // the reader is dropped unread: its file goes with it
  }
  dir.Write("spill/xid-5.spill", "left by a killed process");
  postgres::SpilledTransactions spilled(dir.Sub("spill"));
  ExpectOk(spilled.Reset());
  EXPECT_TRUE(std::filesystem::is_empty(dir.Sub("spill")));
}

// ----- against a server ------------------------------------------------------------------------

class PostgresSnapshot : public PostgresSuite<PostgresSnapshot> {
 public:
  static PostgresServerOptions ServerOptions() { return {.password = "s3cret pw"}; }

 protected:
  config::ConnectorConfig Connector(std::vector<std::string> tables = {}, int parallelism = 1) {
    config::ConnectorConfig connector;
    connector.kind = "Postgres";
    connector.settings["host"] = std::string("127.0.0.1");
    connector.settings["port"] = static_cast<int64_t>(server_->port());
    connector.settings["user"] = std::string("skippr");
    connector.settings["password"] = server_->password();
    connector.settings["database"] = database_;
    connector.settings["sslmode"] = std::string("disable");
    connector.settings["batch_size_rows"] = static_cast<int64_t>(1000);
    connector.settings["snapshot_parallelism"] = static_cast<int64_t>(parallelism);
    if (!tables.empty()) connector.settings["tables"] = tables;
    return connector;
  }

  // Every batch a source hands over, read to the end; rows handed over as columns become the
  // records ColumnRows::RowAt makes of them, with their changes.
  static std::vector<SourceBatch> ReadAll(Source& source) {
    std::vector<SourceBatch> batches;
    while (true) {
      Result<std::optional<SourceBatch>> batch = source.Next();
      EXPECT_TRUE(batch.ok()) << batch.status().ToString();
      if (!batch.ok() || !batch->has_value()) return batches;
      SourceBatch& read = **batch;
      if (read.columns) {
        const ColumnRows& rows = *read.columns;
        EXPECT_TRUE(rows.cdc.has_value());
        for (int64_t row = 0; row < rows.num_rows; ++row) {
          SourceRecord record;
          record.value = rows.RowAt(row);
          record.row = rows.first_row + static_cast<uint64_t>(row);
          if (rows.cdc) {
            const auto at = static_cast<size_t>(row);
            record.change = RowChange{rows.cdc->mutations[at], std::string(rows.cdc->event_ids[at]),
                                      std::string(rows.cdc->order_tokens[at]),
                                      std::string(rows.cdc->business_keys[at])};
          }
          read.records.push_back(std::move(record));
        }
        read.columns.reset();
      }
      batches.push_back(std::move(read));
    }
  }

  // The batches' contexts point into their source: it is kept until the test ends.
  std::vector<SourceBatch> Snapshot(const config::ConnectorConfig& connector,
                                    const SourcePositions& committed = {}) {
    Result<std::unique_ptr<Source>> source = MakeSource(connector, "pg");
    EXPECT_TRUE(source.ok()) << source.status().ToString();
    if (!source.ok()) return {};
    ExpectOk((*source)->Open(committed, {}));
    sources_.push_back(std::move(*source));
    return ReadAll(*sources_.back());
  }
  std::vector<std::unique_ptr<Source>> sources_;

};

TEST_F(PostgresSnapshot, EveryTypeArrivesTypedWithItsKeyAndSnapshotMetadata) {
  Sql(R"sql(
    CREATE EXTENSION citext;
    CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
    CREATE DOMAIN price AS numeric(12, 3);
    CREATE TABLE everything (
      id bigint PRIMARY KEY, small smallint, i integer, r real, d double precision,
      n numeric(10, 2), nn numeric, p price, b boolean, t text, vc varchar(20), ch char(4),
      ci citext, by bytea, u uuid, dt date, tm time, tz timetz, ts timestamp,
      tstz timestamptz, iv interval, j json, jb jsonb, m mood, ia integer[], ta text[],
      ip inet, cidr_col cidr, mac macaddr);
    INSERT INTO everything VALUES
      (1, -32768, 2147483647, 'NaN', '-Infinity', 12345678.90, 'NaN', 1.5, true,
       E'tab\there\nnewline \\ back', 'varchar', 'ab', 'MiXeD', '\x00ff', 
       'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '0044-03-15 BC', '24:00:00', '10:00:00+02',
       '2024-01-15 10:20:30.123456', '2024-01-15 10:20:30.5+02', '1 year 2 months 3 days 04:05:06',
       '{"a": [1, 2]}', '{"b": null}', 'happy', '{1,NULL,3}', '{"x y",NULL,"\""}',
       '192.168.0.1/24', '10.0.0.0/8', '08:00:2b:01:02:03'),
      (2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
  )sql");
  const std::vector<SourceBatch> batches = Snapshot(Connector());
  std::vector<SourceRecord> records;
  for (const SourceBatch& batch : batches) {
    EXPECT_EQ(batch.context.source_namespace, "postgres_everything");
    ASSERT_NE(batch.context.declared_types, nullptr);
    const auto& declared = *batch.context.declared_types;
    EXPECT_EQ(declared.at("id"), LogicalType::Long());
    EXPECT_EQ(declared.at("small"), LogicalType::Int());
    EXPECT_EQ(declared.at("r"), LogicalType::Float());
    EXPECT_EQ(declared.at("n"), *LogicalType::Decimal(10, 2));
    EXPECT_EQ(declared.at("nn"), *LogicalType::Decimal(38, 10));
    EXPECT_EQ(declared.at("p"), *LogicalType::Decimal(12, 3)) << "a domain reads as its base";
    EXPECT_EQ(declared.at("u"), LogicalType::Uuid());
    EXPECT_EQ(declared.at("tm"), LogicalType::Time());
    EXPECT_EQ(declared.at("tstz"), LogicalType::TimestampTz());
    EXPECT_EQ(declared.at("ia").id(), TypeId::kList);
    EXPECT_EQ(declared.at("m"), LogicalType::String());
    for (const SourceRecord& record : batch.records) records.push_back(record);
  }
  ASSERT_EQ(records.size(), 2u);
  std::sort(records.begin(), records.end(), [](const SourceRecord& a, const SourceRecord& b) {
    return a.value.Find("id")->as_int() < b.value.Find("id")->as_int();
  });
  const Value& row = records[0].value;
  EXPECT_EQ(*row.Find("small"), Value::Int(-32768));
  EXPECT_TRUE(std::isnan(row.Find("r")->as_double()));
  EXPECT_EQ(*row.Find("d"), Value::Double(-INFINITY));
  EXPECT_EQ(*row.Find("n"), Value::Decimal(1234567890, 10, 2));
  EXPECT_EQ(*row.Find("nn"), Value::String("NaN"));
  EXPECT_EQ(*row.Find("p"), Value::Decimal(1500, 12, 3));
  EXPECT_EQ(*row.Find("t"), Value::String("tab\there\nnewline \\ back"));
  EXPECT_EQ(*row.Find("ch"), Value::String("ab  ")) << "char(n) keeps its padding";
  EXPECT_EQ(*row.Find("ci"), Value::String("MiXeD"));
  EXPECT_EQ(*row.Find("by"), Value::Binary(std::string("\x00\xff", 2)));
  EXPECT_EQ(row.Find("u")->as_string().size(), 16u);
  EXPECT_EQ(*row.Find("tm"), Value::Int(kMicrosPerDay));
  EXPECT_EQ(*row.Find("tz"), Value::String("10:00:00+02"));
  EXPECT_EQ(*row.Find("ts"), Value::Timestamp(1705314030123456));
  EXPECT_EQ(*row.Find("tstz"), Value::TimestampTz(1705306830500000));
  EXPECT_EQ(*row.Find("iv"), Value::String("P1Y2M3DT4H5M6S"));
  EXPECT_EQ(*row.Find("j"), Value::String(R"({"a": [1, 2]})"));
  EXPECT_EQ(*row.Find("jb"), Value::String(R"({"b": null})"));
  EXPECT_EQ(*row.Find("m"), Value::String("happy"));
  EXPECT_EQ(*row.Find("ia"), Value::List({Value::Int(1), Value::Null(), Value::Int(3)}));
  EXPECT_EQ(*row.Find("ta"),
            Value::List({Value::String("x y"), Value::Null(), Value::String("\"")}));
  EXPECT_EQ(*row.Find("ip"), Value::String("192.168.0.1/24"));
  EXPECT_EQ(*row.Find("mac"), Value::String("08:00:2b:01:02:03"));
  for (const auto& [name, value] : records[1].value.as_object()) {
    if (name != "id") EXPECT_TRUE(value.is_null()) << name;
  }
  // Snapshot rows: their mutation, the snapshot's LSN as order token, the key as entity.
  ASSERT_TRUE(records[0].change.has_value());
  EXPECT_EQ(records[0].change->mutation, Mutation::kSnapshot);
  EXPECT_EQ(records[0].change->business_key, "[1]");
  EXPECT_EQ(records[0].change->order_token.size(), 16u);
  EXPECT_EQ(records[0].change->order_token, records[1].change->order_token);
  EXPECT_NE(records[0].change->event_id, records[1].change->event_id);
}

// The snapshot reads numbers and times in COPY's binary format; change rows read the same values
// as text. Each edge value must come out of both exactly alike: the decimal, or the text its
// sibling keeps (NaN, ±Infinity, digits beyond the scale or the precision, infinite dates and
// timestamps), float4's shortest digits, dates before 2000 and BC.
TEST_F(PostgresSnapshot, BinaryValuesEqualWhatTheTextDecoderReads) {
  const std::vector<std::pair<std::string, std::string>> columns = {
      {"n", "numeric"}, {"n2", "numeric(10, 2)"}, {"n38", "numeric(38, 0)"},
      {"f4", "real"}, {"f8", "double precision"}, {"dt", "date"}, {"tm", "time"},
      {"ts", "timestamp"}, {"tstz", "timestamptz"}, {"s", "smallint"}, {"o", "oid"}};
  const std::vector<std::vector<std::string>> values = {
      {"0", "0", "0", "0", "0", "'2000-01-01'", "'00:00'", "'2000-01-01'", "'2000-01-01 00:00+00'", "0", "0"},
      {"'NaN'", "-0.01", "99999999999999999999999999999999999999", "1.1", "0.1",
       "'1999-12-31'", "'24:00:00'", "'1970-01-01 00:00:00.000001'", "'1969-12-31 23:59:59.999999+00'",
       "-32768", "4294967295"},
      {"'Infinity'", "12345678.90", "-99999999999999999999999999999999999999", "'NaN'",
       "'-Infinity'", "'infinity'", "'23:59:59.999999'", "'infinity'", "'-infinity'", "32767", "1"},
      {"'-Infinity'", "-99999999.99", "1e37", "3.4028235e38", "1e-300", "'-infinity'",
       "'12:34:56.5'", "'0044-03-15 10:00:00 BC'", "'294276-12-31 23:59:59+00'", "-1", "0"},
      {"1.23456789012345678", "0.5", "0", "-1.17549435e-38", "-0.0", "'0044-03-15 BC'",
       "'00:00:00.000001'", "'2024-02-29 12:00:00.123456'", "'2024-02-29 12:00:00.123456+05:30'",
       "1", "2"},
      {"1234567890123456789012345678.0123456789", "1", "1", "-1.5", "123456789.123456789",
       "'5874897-12-31'", "'01:00'", "'1999-12-31 23:59:59.999999'", "'2000-01-01 00:00:00+14'",
       "2", "3"},
      {"-0.00001", "2", "2", "1e-45", "2.2250738585072014e-308", "'4713-01-01 BC'", "'02:00'",
       "'4713-01-01 00:00:00 BC'", "'4713-01-01 00:00:00+00 BC'", "3", "4"},
      {"12345678901234567890123456789", "3", "3", "0.3", "-0.30000000000000004", "'2000-02-29'",
       "'03:00'", "'2000-02-29 00:00:00'", "'2000-02-29 00:00:00+00'", "4", "5"},
      {"0.00000000001", "4", "4", "7", "7", "'2000-01-02'", "'04:00'", "'2000-01-02'",
       "'2000-01-02 00:00+00'", "5", "6"},
      {"-12.5000", "5", "5", "8", "8", "'2000-01-03'", "'05:00'", "'2000-01-03'",
       "'2000-01-03 00:00+00'", "6", "7"},
  };
  std::string create = "CREATE TABLE edges (id int PRIMARY KEY";
  for (const auto& [name, type] : columns) create += fmt::format(", {} {}", name, type);
  create += ");";
  for (size_t row = 0; row < values.size(); ++row) {
    create += fmt::format(" INSERT INTO edges VALUES ({}", row);
    for (const std::string& value : values[row]) create += ", " + value;
    create += ");";
  }
  Sql(create);
  std::vector<SourceRecord> records;
  for (const SourceBatch& batch : Snapshot(Connector({"edges"}))) {
    for (const SourceRecord& record : batch.records) records.push_back(record);
  }
  ASSERT_EQ(records.size(), values.size());
  // Each column's text output, as a change row would carry it.
  std::map<std::string, PgType> types;
  const std::string described = Sql(
      "SELECT a.attname, a.atttypid, a.atttypmod FROM pg_attribute a WHERE a.attrelid = "
      "'edges'::regclass AND a.attnum > 0 ORDER BY a.attnum");
  std::istringstream lines(described);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    std::string name, oid, modifier;
    std::getline(fields, name, '|');
    std::getline(fields, oid, '|');
    std::getline(fields, modifier, '|');
    if (name.empty()) continue;
    types[name] = Type(static_cast<uint32_t>(std::stoul(oid)), std::stoi(modifier));
  }
  // Every value's text in one query (psql -A: fields separated by '|', which no value holds).
  std::string select = "SELECT id";
  for (const auto& [name, type] : columns) select += fmt::format(", {}::text", name);
  std::map<int64_t, std::vector<std::string>> texts;
  std::istringstream text_lines(Sql(select + " FROM edges"));
  for (std::string line; std::getline(text_lines, line);) {
    if (line.empty()) continue;
    std::istringstream fields(line);
    std::vector<std::string> row;
    for (std::string field; std::getline(fields, field, '|');) row.push_back(field);
    texts[std::stoll(row.at(0))] = {row.begin() + 1, row.end()};
  }
  for (const SourceRecord& record : records) {
    const int64_t id = record.value.Find("id")->as_int();
    for (size_t column = 0; column < columns.size(); ++column) {
      const std::string& name = columns[column].first;
      const std::string& text = texts.at(id).at(column);
      const Value expected = Decode(types.at(name), text);
      const Value& got = *record.value.Find(name);
      if (expected.kind() == Value::Kind::kDouble && std::isnan(expected.as_double())) {
        EXPECT_TRUE(got.kind() == Value::Kind::kDouble && std::isnan(got.as_double()))
            << name << " of row " << id;
        continue;
      }
      EXPECT_EQ(got, expected) << name << " of row " << id << ": " << text;
    }
  }
}

TEST_F(PostgresSnapshot, EveryPublicTableByDefaultNamedTablesOtherwise) {
  Sql("CREATE SCHEMA sales; CREATE TABLE a (x int); CREATE TABLE b (x int); "
      "CREATE TABLE sales.orders (x int); INSERT INTO a VALUES (1); INSERT INTO b VALUES (2); "
      "INSERT INTO sales.orders VALUES (3); CREATE VIEW v AS SELECT x * 10 AS x FROM a;");
  std::set<std::string> namespaces;
  for (const SourceBatch& batch : Snapshot(Connector())) {
    namespaces.insert(batch.context.source_namespace);
  }
  EXPECT_EQ(namespaces, (std::set<std::string>{"postgres_a", "postgres_b"}));

  std::map<std::string, int64_t> rows;
  for (const SourceBatch& batch : Snapshot(Connector({"sales.orders", "v"}))) {
    for (const SourceRecord& record : batch.records) {
      rows[batch.context.source_namespace] = record.value.Find("x")->as_int();
    }
  }
  EXPECT_EQ(rows, (std::map<std::string, int64_t>{{"postgres_sales_orders", 3}, {"postgres_v", 10}}));

  Result<std::unique_ptr<Source>> source = MakeSource(Connector({"a", "nope"}), "pg");
  ASSERT_TRUE(source.ok());
  const Status missing = (*source)->Open({}, {});
  EXPECT_EQ(missing.code(), StatusCode::kInvalidConfig);
  EXPECT_THAT(missing.message(), HasSubstr("data_sources.pg.tables[1]: no table or view 'nope'"));
}

TEST_F(PostgresSnapshot, AWrongPasswordNamesTheServerNotThePassword) {
  config::ConnectorConfig connector = Connector();
  connector.settings["password"] = std::string("wrong secret");
  Result<std::unique_ptr<Source>> source = MakeSource(connector, "pg");
  ASSERT_TRUE(source.ok());
  const Status status = (*source)->Open({}, {});
  EXPECT_EQ(status.code(), StatusCode::kUnavailable);
  EXPECT_THAT(status.message(), HasSubstr("data_sources.pg: cannot connect to PostgreSQL skippr@127.0.0.1:"));
  EXPECT_THAT(status.message(), HasSubstr("password authentication failed"));
  EXPECT_THAT(status.message(), ::testing::Not(HasSubstr("wrong secret")));
}

// Ids of every record, with the positions of the partitions as the batches left them.
struct ReadOutcome {
  std::multiset<int64_t> ids;
  SourcePositions positions;
};
ReadOutcome Collect(const std::vector<SourceBatch>& batches, size_t take_batches = SIZE_MAX) {
  ReadOutcome outcome;
  for (size_t i = 0; i < batches.size() && i < take_batches; ++i) {
    for (const SourceRecord& record : batches[i].records) {
      outcome.ids.insert(record.value.Find("id")->as_int());
    }
    outcome.positions[batches[i].partition] = batches[i].position;
  }
  return outcome;
}

TEST_F(PostgresSnapshot, ParallelRangesReadEveryRowOnceAndResumeAfterTheLastCommittedRow) {
  // ~45 MB: about 5,700 blocks, so three connections share many ranges (at the sanitizers'
  // scale, 570 blocks: five ranges of the smallest size).
  const int64_t rows = Scaled(200000, 1000);
  Sql(fmt::format("CREATE TABLE wide (id bigint PRIMARY KEY, pad text); INSERT INTO wide SELECT "
                  "g, repeat('x', 200) FROM generate_series(1, {}) g;",
                  rows));
  const std::vector<SourceBatch> all = Snapshot(Connector({}, 3));
  const ReadOutcome whole = Collect(all);
  ASSERT_EQ(whole.ids.size(), static_cast<size_t>(rows));
  EXPECT_EQ(std::set<int64_t>(whole.ids.begin(), whole.ids.end()).size(),
            static_cast<size_t>(rows));
  EXPECT_GT(whole.positions.size(), 3u) << "the table is split into ranges";
  for (const auto& [partition, position] : whole.positions) {
    EXPECT_TRUE(position.is_closed) << partition;
    EXPECT_THAT(partition, HasSubstr("postgres snapshot \"public\".\"wide\" blocks "));
  }

  // A pass that committed only its first batches: the next one reads every other row once,
  // under its own snapshot, and skips the ranges that were finished.
  for (size_t committed_batches : {size_t{1}, size_t{7}, all.size() - 1}) {
    const ReadOutcome first = Collect(all, committed_batches);
    const ReadOutcome second = Collect(Snapshot(Connector({}, 2), first.positions));
    std::multiset<int64_t> ids = first.ids;
    ids.insert(second.ids.begin(), second.ids.end());
    EXPECT_EQ(ids, whole.ids) << "after " << committed_batches << " committed batch(es)";
  }
  // A finished snapshot reads nothing again.
  EXPECT_TRUE(Collect(Snapshot(Connector({}, 2), whole.positions)).ids.empty());

  // One connection reads the table as one range (a sequential scan), and resumes it after its
  // last committed row, under a new snapshot, with one connection or more.
  const std::vector<SourceBatch> single = Snapshot(Connector({}, 1));
  const ReadOutcome one_range = Collect(single);
  EXPECT_EQ(one_range.ids, whole.ids);
  ASSERT_EQ(one_range.positions.size(), 1u);
  EXPECT_EQ(one_range.positions.begin()->first, "postgres snapshot \"public\".\"wide\" blocks 0-");
  for (int connections : {1, 3}) {
    const ReadOutcome first = Collect(single, single.size() / 2);
    const ReadOutcome second = Collect(Snapshot(Connector({}, connections), first.positions));
    std::multiset<int64_t> ids = first.ids;
    ids.insert(second.ids.begin(), second.ids.end());
    EXPECT_EQ(ids, whole.ids) << "resumed with " << connections << " connection(s)";
  }

  // Sampling (discover): each range stops at the limit, its COPY cancelled on the server, and the
  // connection goes on to the next range.
  Result<std::unique_ptr<Source>> sampler = MakeSource(Connector({}, 2), "pg");
  ASSERT_TRUE(sampler.ok());
  ExpectOk((*sampler)->Open({}, {.max_records_per_partition = 100}));
  const ReadOutcome sampled = Collect(ReadAll(**sampler));
  EXPECT_GT(sampled.positions.size(), 1u);
  uint64_t sampled_rows = 0;
  for (const auto& [partition, position] : sampled.positions) {
    // 100, or fewer in a range that ended first (the last one holds the table's few last rows).
    EXPECT_TRUE(position.records_consumed == 100 || position.is_closed) << partition;
    sampled_rows += position.records_consumed;
  }
  EXPECT_EQ(sampled.ids.size(), sampled_rows);
  EXPECT_GE(sampled_rows, 100 * (sampled.positions.size() - 1));
}

TEST_F(PostgresSnapshot, APartitionedTableIsReadThroughItsLeavesIntoOneNamespace) {
  Sql("CREATE TABLE events (id int, region text) PARTITION BY LIST (region); "
      "CREATE TABLE events_eu PARTITION OF events FOR VALUES IN ('eu'); "
      "CREATE TABLE events_us PARTITION OF events FOR VALUES IN ('us'); "
      "INSERT INTO events SELECT g, CASE WHEN g % 2 = 0 THEN 'eu' ELSE 'us' END "
      "FROM generate_series(1, 100) g;");
  std::multiset<int64_t> ids;
  for (const SourceBatch& batch : Snapshot(Connector())) {
    EXPECT_EQ(batch.context.source_namespace, "postgres_events");
    for (const SourceRecord& record : batch.records) ids.insert(record.value.Find("id")->as_int());
  }
  EXPECT_EQ(ids.size(), 100u);
  EXPECT_EQ(std::set<int64_t>(ids.begin(), ids.end()).size(), 100u);
}

// ----- TLS ---------------------------------------------------------------------------------------

class PostgresTls : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = PostgresServer::Start({.password = "tls pw", .tls_only = true}, &why_not_).release();
    if (server_ != nullptr) {
      server_->PsqlOrFail("CREATE TABLE secret_rows (id int PRIMARY KEY); "
                          "INSERT INTO secret_rows SELECT generate_series(1, 10)");
    }
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    if (server_ == nullptr) FAIL() << why_not_;
  }

  static config::ConnectorConfig Connector(const std::string& host, const std::string& sslmode,
                                           const std::string& root_certificate) {
    config::ConnectorConfig connector;
    connector.kind = "Postgres";
    connector.settings["host"] = host;
    connector.settings["port"] = static_cast<int64_t>(server_->port());
    connector.settings["user"] = std::string("skippr");
    connector.settings["password"] = server_->password();
    connector.settings["database"] = std::string("postgres");
    connector.settings["sslmode"] = sslmode;
    if (!root_certificate.empty()) connector.settings["sslrootcert"] = root_certificate;
    connector.settings["tables"] = std::vector<std::string>{"secret_rows"};
    return connector;
  }

  // The rows a snapshot reads, or the status of the failed open.
  static Result<size_t> Read(const config::ConnectorConfig& connector) {
    SKIPPR_ASSIGN_OR_RETURN(std::unique_ptr<Source> source, MakeSource(connector, "pg"));
    SKIPPR_RETURN_IF_ERROR(source->Open({}, {}));
    size_t rows = 0;
    while (true) {
      SKIPPR_ASSIGN_OR_RETURN(std::optional<SourceBatch> batch, source->Next());
      if (!batch) return rows;
      rows += batch->record_count();
    }
  }

  static PostgresServer* server_;
  static std::string why_not_;
};
PostgresServer* PostgresTls::server_ = nullptr;
std::string PostgresTls::why_not_;

TEST_F(PostgresTls, VerifyFullReadsOverTlsWithTheServersCa) {
  Result<size_t> rows = Read(Connector("localhost", "verify-full", server_->ca_file()));
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  EXPECT_EQ(*rows, 10u);
  // verify-ca and require too; prefer negotiates TLS.
  for (const char* mode : {"verify-ca", "require", "prefer"}) {
    rows = Read(Connector("127.0.0.1", mode, server_->ca_file()));
    ASSERT_TRUE(rows.ok()) << mode << ": " << rows.status().ToString();
    EXPECT_EQ(*rows, 10u) << mode;
  }
}

TEST_F(PostgresTls, EveryWayTlsCanFailIsAClearErrorNamingTheServer) {
  // The server refuses connections without TLS.
  Result<size_t> plain = Read(Connector("127.0.0.1", "disable", ""));
  ASSERT_FALSE(plain.ok());
  EXPECT_EQ(plain.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(plain.status().message(), HasSubstr("cannot connect to PostgreSQL skippr@127.0.0.1:"));
  EXPECT_THAT(plain.status().message(), HasSubstr("no encryption"));
  // A certificate another CA signed.
  Result<size_t> other = Read(Connector("localhost", "verify-full", server_->other_ca_file()));
  ASSERT_FALSE(other.ok());
  EXPECT_THAT(other.status().message(), HasSubstr("certificate verify failed"));
  // A name the certificate does not carry (it is for localhost).
  Result<size_t> wrong_name = Read(Connector("127.0.0.1", "verify-full", server_->ca_file()));
  ASSERT_FALSE(wrong_name.ok());
  EXPECT_THAT(wrong_name.status().message(), HasSubstr("does not match host name"));
  EXPECT_THAT(wrong_name.status().message(), ::testing::Not(HasSubstr("tls pw")));
}

}  // namespace
}  // namespace skippr::sources
