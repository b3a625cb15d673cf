// core/: Status and Result, logical types, hashing, disk pressure, logging.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/disk.hpp"
#include "core/environment.hpp"
#include "core/hash.hpp"
#include "core/log.hpp"
#include "core/redact.hpp"
#include "core/status.hpp"
#include "core/thread_priority.hpp"
#include "core/types.hpp"
#include "core/value.hpp"

namespace skippr {
namespace {

using ::testing::HasSubstr;

// ----- Value --------------------------------------------------------------------------------

Value SampleRecord() {
  return Value::Object({{"id", Value::Int(7)},
                        {"name", Value::String("a name longer than the small-string buffer")},
                        {"tags", Value::List({Value::String("x"), Value::Null()})},
                        {"amount", Value::Decimal(-1234, 10, 2)},
                        {"score", Value::Double(2.5)}});
}

TEST(Value, CopiesAndMovesKeepEveryKindsPayload) {
  const Value record = SampleRecord();
  Value copy = record;
  EXPECT_EQ(copy, record);
  Value moved = std::move(copy);
  EXPECT_EQ(moved, record);
  EXPECT_EQ(moved.ToJson(),
            R"({"id":7,"name":"a name longer than the small-string buffer","tags":["x",null],)"
            R"("amount":-12.34,"score":2.5})");
  EXPECT_EQ(moved.Find("amount")->decimal_precision(), 10);
  EXPECT_EQ(moved.Find("amount")->decimal_scale(), 2);
}

TEST(Value, AssignmentAcrossKindsReplacesThePayload) {
  Value value = Value::String("a string long enough to live on the heap, not inline");
  value = Value::Int(3);
  EXPECT_EQ(value.as_int(), 3);
  EXPECT_EQ(value.as_string(), "");  // another kind's accessor answers empty
  value = SampleRecord();
  EXPECT_EQ(value.Find("id")->as_int(), 7);
  value = Value::Double(1.5);
  EXPECT_EQ(value.as_double(), 1.5);
  EXPECT_EQ(value.as_int(), 0);
  EXPECT_TRUE(value.as_list().empty());
  EXPECT_TRUE(value.as_object().empty());
}

TEST(Value, AssignsFromItsOwnChild) {
  Value record = SampleRecord();
  record = record.as_object()[2].second;  // the list "tags", copied out of the record it replaces
  EXPECT_EQ(record, Value::List({Value::String("x"), Value::Null()}));
  Value list = record;
  list = std::move(list.mutable_list()[0]);
  EXPECT_EQ(list, Value::String("x"));
  Value self = SampleRecord();
  const Value& alias = self;
  self = alias;
  EXPECT_EQ(self, SampleRecord());
}

TEST(ValueDeathTest, MutableAccessOfAnotherKindAborts) {
  Value value = Value::Int(1);
  EXPECT_DEATH(value.mutable_list(), "internal invariant failed");
  EXPECT_DEATH(value.mutable_object(), "internal invariant failed");
}

// ----- Status / Result ------------------------------------------------------------------------

Result<int> ParsePositive(int value) {
  if (value <= 0) return Status::InvalidArgument("needs a positive number");
  return value;
}

Result<int> DoublePositive(int value) {
  SKIPPR_ASSIGN_OR_RETURN(int parsed, ParsePositive(value));
  return parsed * 2;
}

Status CheckBoth(int a, int b) {
  SKIPPR_RETURN_IF_ERROR(ParsePositive(a).status());
  SKIPPR_RETURN_IF_ERROR(ParsePositive(b).status());
  return Status::OK();
}

TEST(Status, CarriesCodeAndMessage) {
  EXPECT_TRUE(Status::OK().ok());
  Status status = Status::Corruption("segment 7 fails its checksum");
  EXPECT_FALSE(status.ok());
  EXPECT_EQ(status.code(), StatusCode::kCorruption);
  EXPECT_EQ(status.message(), "segment 7 fails its checksum");
  EXPECT_EQ(status.ToString(), "Corruption: segment 7 fails its checksum");
  EXPECT_EQ(StatusCodeName(StatusCode::kInvalidConfig), "InvalidConfig");
}

TEST(Result, PropagatesThroughTheMacros) {
  Result<int> good = DoublePositive(21);
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(*good, 42);
  Result<int> bad = DoublePositive(-1);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(CheckBoth(1, 2).ok());
  EXPECT_EQ(CheckBoth(1, 0).message(), "needs a positive number");
}

TEST(ResultDeathTest, ValueOfAFailedResultAborts) {
  Result<int> bad = ParsePositive(0);
  EXPECT_DEATH((void)bad.value(), "");
}

// ----- logical types --------------------------------------------------------------------------

TEST(LogicalTypes, PrintInTheirCompactForm) {
  const LogicalType station = LogicalType::Struct(
      {Field{3, "id", LogicalType::Int(), false}, Field{4, "name", LogicalType::String(), true}});
  EXPECT_EQ(station.ToString(), "struct<id: int, name: string>");
  EXPECT_EQ(LogicalType::List(Field{5, "element", LogicalType::Double()}).ToString(),
            "list<double>");
  const LogicalType map = LogicalType::Map(Field{6, "key", LogicalType::String()},
                                           Field{7, "value", LogicalType::Long()});
  EXPECT_EQ(map.ToString(), "map<string, long>");
  EXPECT_FALSE(map.children()[0].nullable);  // map keys are required in Iceberg
  EXPECT_EQ(LogicalType::Decimal(12, 2)->ToString(), "decimal(12, 2)");
  EXPECT_TRUE(station.is_nested());
  EXPECT_FALSE(LogicalType::TimestampTz().is_nested());
}

TEST(LogicalTypes, ParseNamesAndAliases) {
  EXPECT_EQ(*ParseLogicalType("BIGINT"), LogicalType::Long());
  EXPECT_EQ(*ParseLogicalType(" integer "), LogicalType::Int());
  EXPECT_EQ(*ParseLogicalType("bool"), LogicalType::Boolean());
  EXPECT_EQ(*ParseLogicalType("varchar"), LogicalType::String());
  EXPECT_EQ(*ParseLogicalType("timestamptz"), LogicalType::TimestampTz());
  EXPECT_EQ(*ParseLogicalType("decimal(38,10)"), *LogicalType::Decimal(38, 10));
  EXPECT_EQ(
      ParseLogicalType("decimal(39,1)").status().message(),
      "decimal(39, 1) is not a valid decimal: precision must be 1..38 and scale 0..precision");
  EXPECT_THAT(ParseLogicalType("money").status().message(),
              HasSubstr("unknown type 'money'; types are: boolean, int, long"));
}

TEST(LogicalTypes, EqualityIsStructural) {
  const auto make = [](const std::string& name) {
    return LogicalType::Struct({Field{1, name, LogicalType::Int()}});
  };
  EXPECT_EQ(make("a"), make("a"));
  EXPECT_NE(make("a"), make("b"));
  EXPECT_NE(LogicalType::Int(), LogicalType::Long());
}

TEST(LogicalTypes, IcebergPromotions) {
  EXPECT_TRUE(CanPromote(LogicalType::Int(), LogicalType::Long()));
  EXPECT_TRUE(CanPromote(LogicalType::Float(), LogicalType::Double()));
  EXPECT_TRUE(CanPromote(*LogicalType::Decimal(10, 2), *LogicalType::Decimal(18, 2)));
  EXPECT_FALSE(CanPromote(*LogicalType::Decimal(10, 2), *LogicalType::Decimal(18, 3)));
  EXPECT_FALSE(CanPromote(LogicalType::Long(), LogicalType::Int()));
  EXPECT_FALSE(CanPromote(LogicalType::Int(), LogicalType::Double()));
}

// ----- hashing --------------------------------------------------------------------------------

TEST(Hash, Sha256MatchesKnownVectors) {
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

// ----- disk pressure --------------------------------------------------------------------------

DiskUsage Usage(uint64_t total_gb, uint64_t used_gb) {
  constexpr uint64_t kGb = 1'000'000'000;
  return DiskUsage{"/data", total_gb * kGb, (total_gb - used_gb) * kGb, used_gb * kGb};
}

TEST(DiskPressure, PausesBelowFiveGigabytesOrAtNinetyPercent) {
  EXPECT_FALSE(ShouldPauseForDisk(Usage(100, 50), false));
  EXPECT_TRUE(ShouldPauseForDisk(Usage(100, 90), false));  // 90 % used
  EXPECT_FALSE(ShouldPauseForDisk(Usage(100, 89), false));
  EXPECT_TRUE(ShouldPauseForDisk(Usage(20, 16), false));     // 4 GB free at 80 %
  EXPECT_TRUE(ShouldPauseForDisk(Usage(1000, 950), false));  // 50 GB free but 95 % used
}

TEST(DiskPressure, ResumesOnlyBackAtEightyPercent) {
  EXPECT_TRUE(ShouldPauseForDisk(Usage(100, 85), /*is_paused=*/true));
  EXPECT_FALSE(ShouldPauseForDisk(Usage(100, 85), /*is_paused=*/false));
  EXPECT_FALSE(ShouldPauseForDisk(Usage(100, 80), /*is_paused=*/true));
}

// A small filesystem (1 GB, nearly empty) is always below the 5 GB floor: the rule that holds is
// the floor, not the percentages, and it can never be met.
TEST(DiskPressure, TheRuleThatHoldsIsNamedWithWhenItLetsGo) {
  const DiskThresholds defaults;
  const DiskUsage small{"/small", 1'000'000'000, 999'000'000, 1'000'000};
  EXPECT_EQ(EvaluateDiskPressure(small, false, defaults), DiskPressure::kBelowFreeFloor);
  EXPECT_TRUE(IsFreeFloorUnreachable(small, defaults));
  EXPECT_EQ(DescribeDiskPressure(DiskPressure::kBelowFreeFloor, small, defaults),
            "952.7 MiB free is below the 5.0 GB free-space floor (reading resumes once 5.0 GB are "
            "free)");
  EXPECT_FALSE(IsFreeFloorUnreachable(Usage(20, 16), defaults));

  EXPECT_EQ(EvaluateDiskPressure(Usage(100, 95), false, defaults), DiskPressure::kAtPausePercent);
  EXPECT_EQ(DescribeDiskPressure(DiskPressure::kAtPausePercent, Usage(100, 95), defaults),
            "95 % used is at or above the 90 % pause threshold (reading resumes at 80 % used)");
  EXPECT_EQ(EvaluateDiskPressure(Usage(100, 85), true, defaults),
            DiskPressure::kAboveResumePercent);
  EXPECT_EQ(DescribeDiskPressure(DiskPressure::kAboveResumePercent, Usage(100, 85), defaults),
            "85 % used is not yet back down to the 80 % resume threshold");
  EXPECT_EQ(EvaluateDiskPressure(Usage(100, 85), false, defaults), DiskPressure::kNone);
  EXPECT_EQ(DescribeDiskPressure(DiskPressure::kNone, Usage(100, 85), defaults), "");

  const DiskThresholds lowered{.pause_below_free_bytes = 100'000'000};
  EXPECT_EQ(EvaluateDiskPressure(small, false, lowered), DiskPressure::kNone);
}

TEST(DiskPressure, ThresholdsReadInDecimalUnits) {
  EXPECT_EQ(FormatDecimalBytes(5'000'000'000), "5.0 GB");
  EXPECT_EQ(FormatDecimalBytes(750'000'000), "750.0 MB");
  EXPECT_EQ(FormatDecimalBytes(999), "999 B");
}

TEST(DiskPressure, MeasuresTheNearestExistingDirectory) {
  const std::string missing = std::filesystem::temp_directory_path().string() + "/no/such/dir/yet";
  Result<DiskUsage> usage = MeasureDisk(missing);
  ASSERT_TRUE(usage.ok()) << usage.status().message();
  EXPECT_EQ(usage->measured_path, std::filesystem::temp_directory_path().string());
  EXPECT_GT(usage->total_bytes, 0u);
  EXPECT_LE(usage->available_bytes, usage->total_bytes);
  EXPECT_THAT(DescribeDiskUsage(*usage), HasSubstr(" free of "));
}

TEST(DiskPressure, FormatsBytesWithUnits) {
  EXPECT_EQ(FormatBytes(512), "512 B");
  EXPECT_EQ(FormatBytes(1536), "1.5 KiB");
  EXPECT_EQ(FormatBytes(5ull << 30), "5.0 GiB");
}

// ----- environment and logging ----------------------------------------------------------------

TEST(Environment, MapAndProcess) {
  MapEnvironment env({{"SET", "v"}, {"EMPTY", ""}});
  EXPECT_EQ(env.Get("SET"), "v");
  EXPECT_EQ(env.Get("EMPTY"), "");
  EXPECT_EQ(env.Get("UNSET"), std::nullopt);
  setenv("SKIPPR_CORE_TEST_VAR", "x", 1);
  EXPECT_EQ(ProcessEnvironment().Get("SKIPPR_CORE_TEST_VAR"), "x");
  unsetenv("SKIPPR_CORE_TEST_VAR");
  EXPECT_EQ(ProcessEnvironment().Get("SKIPPR_CORE_TEST_VAR"), std::nullopt);
}

TEST(Logging, LevelsParse) {
  EXPECT_EQ(*ParseLogLevel("DEBUG"), LogLevel::kDebug);
  EXPECT_EQ(*ParseLogLevel("warn"), LogLevel::kWarn);
  EXPECT_EQ(ParseLogLevel("loud").status().message(),
            "unknown log level 'loud'; use trace, debug, info, warn or error");
}

TEST(Logging, WritesTheDailyFile) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("skippr-log-test-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(InitLogging(LogOptions{std::nullopt, (dir / "logs").string()}).ok());
  spdlog::info("committed segment {} ({} rows)", 42, 1000);
  spdlog::debug("not recorded at the default level");
  ShutdownLogging();
  char date[16];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof(date), "%Y-%m-%d", std::localtime(&now));
  std::ifstream file(dir / "logs" / (std::string("skipprd.") + date + ".log"));
  ASSERT_TRUE(file.good());
  std::stringstream text;
  text << file.rdbuf();
  EXPECT_THAT(text.str(), HasSubstr("info [" + std::to_string(::getpid()) +
                                    "] committed segment 42 (1000 rows)"));
  EXPECT_THAT(text.str(), ::testing::Not(HasSubstr("not recorded")));
  std::filesystem::remove_all(dir);
}

TEST(Logging, UnwritableDirectoryIsReportedNotFatal) {
  Status status = InitLogging(LogOptions{LogLevel::kError, "/proc/no-such-place/logs"});
  EXPECT_EQ(status.code(), StatusCode::kIOError);
  EXPECT_THAT(status.message(),
              HasSubstr("cannot write the log file under '/proc/no-such-place/logs'"));
  ShutdownLogging();
}

TEST(Logging, FileIsPrivateAndMessagesAreRedacted) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("skippr-log-mode-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  const mode_t previous = ::umask(0);
  const Status started = InitLogging(LogOptions{std::nullopt, (dir / "logs").string()});
  ::umask(previous);
  ASSERT_TRUE(started.ok()) << started.message();
  RegisterSecret("hunter2-long-secret");
  spdlog::info("connecting with hunter2-long-secret to postgresql://u:pw@db/x");
  ShutdownLogging();
  ForgetSecretsForTesting();
  EXPECT_EQ(std::filesystem::status(dir / "logs").permissions(), std::filesystem::perms::owner_all);
  size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir / "logs")) {
    ++files;
    EXPECT_EQ(entry.status().permissions(),
              std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
    std::ifstream file(entry.path());
    std::stringstream text;
    text << file.rdbuf();
    EXPECT_THAT(text.str(), HasSubstr("connecting with *** to postgresql://u:***@db/x"));
  }
  EXPECT_EQ(files, 1u);
  std::filesystem::remove_all(dir);
}

// ----- redaction --------------------------------------------------------------------------------

TEST(Redact, MasksLearnedSecretsUriPasswordsAndKeyValuePasswords) {
  ForgetSecretsForTesting();
  EXPECT_EQ(Redact("postgresql://u:secret@host/db failed"), "postgresql://u:***@host/db failed");
  EXPECT_EQ(Redact("'postgres://me:p@ss:w0rd@h:5432/d'"), "'postgres://me:***@h:5432/d'");
  EXPECT_EQ(Redact("s3://bucket/key@v1 and http://host:80/a"), "s3://bucket/key@v1 and http://host:80/a");
  EXPECT_EQ(Redact("host=db password=pa55 user=x"), "host=db password=*** user=x");
  EXPECT_EQ(Redact("PASSWORD = 'a b c' dbname=x"), "PASSWORD = *** dbname=x");
  EXPECT_EQ(Redact("no secret here"), "no secret here");

  RegisterSecret("tok-123456");
  RegisterSecret("abc");  // too short to mask without garbling every message
  RegisterSecret("postgresql://svc:deep-pw@db/c");
  EXPECT_EQ(Redact("token tok-123456, again tok-123456."), "token ***, again ***.");
  EXPECT_EQ(Redact("abc"), "abc");
  EXPECT_EQ(Redact("the password deep-pw alone"), "the password *** alone");
  EXPECT_EQ(Redact("uri postgresql://svc:deep-pw@db/c"), "uri ***");
  RegisterSecret("quo\"te\\d-pw");  // inside a JSON string it reads quo\"te\\d-pw
  EXPECT_EQ(Redact(R"({"error":"bad quo\"te\\d-pw"})"), R"({"error":"bad ***"})");
  ForgetSecretsForTesting();
  EXPECT_EQ(Redact("tok-123456"), "tok-123456");
}

// Landing lowers its threads' priority and DuckDB's workers inherit it from the thread that opens
// the database: both rest on Linux keeping a nice value per thread.
TEST(ThreadPriority, ALoweredThreadAndTheThreadsItStartsRunBelowTheOthers) {
  const int before = getpriority(PRIO_PROCESS, 0);
  int lowered = 0;
  int started_by_it = 0;
  std::thread([&] {
    LowerThisThreadsPriority();
    lowered = getpriority(PRIO_PROCESS, 0);
    std::thread([&] { started_by_it = getpriority(PRIO_PROCESS, 0); }).join();
  }).join();
  EXPECT_EQ(lowered, std::min(before + kBackgroundNiceSteps, 19));
  EXPECT_EQ(started_by_it, lowered);
  EXPECT_EQ(getpriority(PRIO_PROCESS, 0), before);  // the caller's thread is untouched
}

}  // namespace
}  // namespace skippr

