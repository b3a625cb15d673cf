// Hostile input, lost state and prying eyes, end to end with the real binary: pipeline names that
// are paths, secrets in errors and logs, file modes under any umask and symbolic links in place
// of the log, query reading only the pipelines' tables, and one broken table failing only the
// statements that read it.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "e2e/process.hpp"
#include "e2e/skipprd_runner.hpp"

namespace skippr::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

mode_t ModeOf(const std::string& path) {
  struct stat info {};
  EXPECT_EQ(::lstat(path.c_str(), &info), 0) << path;
  return info.st_mode & 07777;
}

std::string ReadAll(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(file), {});
}

// Every log file's text under DATA_DIR/logs.
std::string LogText(const TempDir& dir) {
  std::string text;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(dir.Sub("data/logs"), error)) {
    text += ReadAll(entry.path().string());
  }
  return text;
}

std::string LocalDate(int days_from_now) {
  const std::time_t when = std::time(nullptr) + days_from_now * 86400;
  std::tm local{};
  localtime_r(&when, &local);
  char text[16];
  std::strftime(text, sizeof(text), "%Y-%m-%d", &local);
  return text;
}

// Sets the process umask for the children a test starts, and puts it back.
class ScopedUmask {
 public:
  explicit ScopedUmask(mode_t mask) : previous_(::umask(mask)) {}
  ~ScopedUmask() { ::umask(previous_); }

 private:
  mode_t previous_;
};

void WriteMinimalConfig(const TempDir& dir) {
  dir.Write("skippr.yml", "data_sources:\n  s: {Sample: {rows: 5}}\npipelines:\n  rides:\n"
                          "    data_source: data_sources.s\n");
}

// ----- names ----------------------------------------------------------------------------------

TEST(SecurityNames, PipelineNamesFromTheCommandLineOrEnvironmentMustNotBePaths) {
  TempDir dir;
  WriteMinimalConfig(dir);
  ProcessResult from_env = Skipprd(dir, {"sync", "--once"}, {{"PIPELINE_NAME", "../../up"}});
  EXPECT_EQ(from_env.exit_code, 1);
  EXPECT_THAT(from_env.err, HasSubstr("PIPELINE_NAME: Invalid pipeline name '../../up': a pipeline "
                                      "name is 1 to 64 characters"));
  ProcessResult from_flag = Skipprd(dir, {"status", "--pipeline", "/tmp/x"});
  EXPECT_EQ(from_flag.exit_code, 1);
  EXPECT_THAT(from_flag.err, HasSubstr("--pipeline: Invalid pipeline name '/tmp/x'"));
  EXPECT_FALSE(fs::exists(dir.Sub("up")));
}

// ----- secrets --------------------------------------------------------------------------------

constexpr const char* kPassword = "Tr0ub4dor-s3cret";

// A SkipprLake sink whose catalog_uri carries a password, written JDBC-style (as Iceberg's JDBC
// catalogs take it), which this build does not open: the sync fails, and its error, the log and
// `status` used to quote the URI whole.
TEST(SecuritySecrets, CatalogUriPasswordReachesNoErrorLogOrStatus) {
  TempDir dir;
  dir.Write("skippr.yml", fmt::format(R"(data_sources:
  s: {{Sample: {{rows: 5}}}}
data_sinks:
  lake:
    SkipprLake:
      warehouse: file://{}/warehouse
      catalog_uri: ${{CATALOG_URI}}
pipelines:
  rides:
    data_source: data_sources.s
    data_sink: data_sinks.lake
)",
                                      dir.path()));
  const std::map<std::string, std::string> env = {
      {"CATALOG_URI", fmt::format("jdbc:postgresql://skippr:{}@127.0.0.1:1/catalog", kPassword)}};
  ProcessResult text = Skipprd(dir, {"sync", "-p", "rides", "--once", "--log", "debug"}, env);
  EXPECT_EQ(text.exit_code, 1) << text.out << text.err;
  ProcessResult json = Skipprd(dir, {"sync", "-p", "rides", "--once", "--output", "json"}, env);
  EXPECT_EQ(json.exit_code, 1) << json.out << json.err;
  ProcessResult status = Skipprd(dir, {"status", "--output", "json"}, env);
  ProcessResult status_text = Skipprd(dir, {"status"}, env);
  ProcessResult doctor = Skipprd(dir, {"doctor", "--output", "json"}, env);
  const std::string everything = text.out + text.err + json.out + json.err + status.out +
                                 status.err + status_text.out + status_text.err + doctor.out +
                                 doctor.err + LogText(dir);
  EXPECT_THAT(everything, Not(HasSubstr(kPassword)));
  EXPECT_THAT(everything, Not(HasSubstr("skippr:" + std::string(kPassword).substr(0, 6))));
  EXPECT_THAT(text.err, HasSubstr("location '***' is neither file:///absolute/path nor s3://"));
  EXPECT_THAT(LogText(dir), HasSubstr("location '***'"));
  EXPECT_THAT(json.out, HasSubstr("location '***'"));
  EXPECT_THAT(status.out, HasSubstr("location '***'"));
}

TEST(SecuritySecrets, MalformedDotenvLineIsReportedByLineNotByValue) {
  TempDir dir;
  WriteMinimalConfig(dir);
  dir.Write(".env", fmt::format("# credentials\nPG_USER=skippr\n{}\n1BAD={}\n", kPassword,
                                kPassword));
  ProcessResult doctor = Skipprd(dir, {"doctor"});
  EXPECT_EQ(doctor.exit_code, 1);
  EXPECT_THAT(doctor.err, HasSubstr(".env:3:1: expected NAME=value, found a line without '='"));
  EXPECT_THAT(doctor.err + doctor.out + LogText(dir), Not(HasSubstr(kPassword)));

  dir.Write(".env", fmt::format("1BAD={}\n", kPassword));
  ProcessResult bad_name = Skipprd(dir, {"doctor"});
  EXPECT_THAT(bad_name.err, HasSubstr(".env:1:1: '1BAD' is not a variable name"));
  EXPECT_THAT(bad_name.err + bad_name.out + LogText(dir), Not(HasSubstr(kPassword)));
}

// ----- file modes and the log file --------------------------------------------------------------

TEST(SecurityFiles, DataDirPipelineAndLogsArePrivateUnderAPermissiveUmask) {
  TempDir dir;
  WriteMinimalConfig(dir);
  ProcessResult sync;
  {
    ScopedUmask permissive(0);
    sync = Skipprd(dir, {"sync", "-p", "rides", "--once"});
  }
  ASSERT_EQ(sync.exit_code, 0) << sync.err;
  EXPECT_EQ(ModeOf(dir.Sub("data")), 0700u);
  EXPECT_EQ(ModeOf(dir.Sub("data/logs")), 0700u);
  EXPECT_EQ(ModeOf(dir.Sub("data/rides")), 0700u);
  EXPECT_EQ(ModeOf(dir.Sub("data/rides/wal")), 0700u);
  EXPECT_EQ(ModeOf(dir.Sub("data/rides/writer.lock")), 0600u);
  size_t logs = 0;
  for (const auto& entry : fs::directory_iterator(dir.Sub("data/logs"))) {
    EXPECT_EQ(ModeOf(entry.path().string()), 0600u) << entry.path();
    ++logs;
  }
  EXPECT_EQ(logs, 1u);
  // Nothing under DATA_DIR is readable by others.
  for (const auto& entry : fs::recursive_directory_iterator(dir.Sub("data"))) {
    EXPECT_EQ(ModeOf(entry.path().string()) & 0077, 0u) << entry.path();
  }
}

TEST(SecurityFiles, LogFileModeIsTightenedWhenAnOlderRunLeftItOpen) {
  TempDir dir;
  WriteMinimalConfig(dir);
  const std::string log = dir.Write("data/logs/skipprd." + LocalDate(0) + ".log", "old line\n");
  ASSERT_EQ(::chmod(log.c_str(), 0644), 0);
  ASSERT_EQ(Skipprd(dir, {"status"}).exit_code, 0);
  EXPECT_EQ(ModeOf(log), 0600u);
  EXPECT_THAT(ReadAll(log), HasSubstr("old line\n"));  // appended to, not truncated
  EXPECT_THAT(ReadAll(log), HasSubstr("loaded configuration from skippr.yml"));
}

// A symbolic link pre-placed where the log file goes must not make skipprd write through it.
TEST(SecurityFiles, SymlinkInPlaceOfTheLogFileIsRefusedAndItsTargetUntouched) {
  TempDir dir;
  WriteMinimalConfig(dir);
  const std::string target = dir.Write("precious.txt", "keep me\n");
  ASSERT_EQ(::chmod(target.c_str(), 0644), 0);
  fs::create_directories(dir.Sub("data/logs"));
  for (int day : {0, 1}) {  // today's and tomorrow's name: a run crossing midnight too
    fs::create_symlink(target, dir.Sub("data/logs/skipprd." + LocalDate(day) + ".log"));
  }
  ProcessResult status_run;
  {
    ScopedUmask permissive(0);
    status_run = Skipprd(dir, {"status"});
  }
  EXPECT_EQ(status_run.exit_code, 0) << status_run.err;
  EXPECT_THAT(status_run.err, HasSubstr("skipprd: warning: cannot write the log file under"));
  EXPECT_THAT(status_run.err, HasSubstr("a symbolic link is in its place; it is not followed"));
  EXPECT_EQ(ReadAll(target), "keep me\n");
  EXPECT_EQ(ModeOf(target), 0644u);
}

TEST(SecurityFiles, SymlinkInPlaceOfTheLogsDirectoryIsRefused) {
  TempDir dir;
  WriteMinimalConfig(dir);
  fs::create_directories(dir.Sub("elsewhere"));
  fs::create_directories(dir.Sub("data"));
  fs::create_directory_symlink(dir.Sub("elsewhere"), dir.Sub("data/logs"));
  ProcessResult status_run = Skipprd(dir, {"status"});
  EXPECT_EQ(status_run.exit_code, 0) << status_run.err;
  EXPECT_THAT(status_run.err, HasSubstr("cannot open the log directory"));
  EXPECT_TRUE(fs::is_empty(dir.Sub("elsewhere")));
}

// ----- query reads only the pipelines' tables ---------------------------------------------------

std::string LakeConfig(const TempDir& dir) {
  return fmt::format(R"(data_sources:
  s: {{Sample: {{rows: 50}}}}
data_sinks:
  lake:
    SkipprLake: {{warehouse: "file://{}/warehouse"}}
pipelines:
  rides:
    data_source: data_sources.s
    data_sink: data_sinks.lake
)",
                     dir.path());
}

TEST(SecurityQuery, OnlyThePipelinesTablesCanBeReadWithoutTheFlag) {
  TempDir dir;
  dir.Write("skippr.yml", LakeConfig(dir));
  ASSERT_EQ(Skipprd(dir, {"sync", "-p", "rides", "--once"}).exit_code, 0);
  // The landed rows are read through read_parquet: the table directories stay readable.
  EXPECT_EQ(QueryRow(dir, "SELECT count(*) FROM rides.rides"), std::vector<std::string>{"50"});
  const std::string data_dir = dir.Sub("warehouse/default/rides/data");
  ASSERT_TRUE(fs::is_directory(data_dir));
  const std::string store = dir.Sub("data/rides/store/data.mdb");
  const std::string store_before = ReadAll(store);

  const std::vector<std::string> blocked = {
      "SELECT * FROM read_csv('/etc/passwd', sep = ':')",
      fmt::format("SELECT * FROM read_text('{}')", store),
      fmt::format("SELECT * FROM read_blob('{}/skippr.yml')", dir.path()),
      fmt::format("COPY (SELECT 1 AS x) TO '{}/out.csv'", dir.path()),
      fmt::format("COPY (SELECT 1 AS x) TO '{}'", store),
      fmt::format("COPY (SELECT 1 AS x) TO '{}/injected.parquet' (FORMAT parquet)", data_dir),
      fmt::format("EXPLAIN ANALYZE COPY (SELECT 1 AS x) TO '{}/injected.parquet' (FORMAT parquet)",
                  data_dir),
      fmt::format("ATTACH '{}/other.db' AS other", dir.path()),
      "INSTALL httpfs",
      "LOAD httpfs",
      "SET enable_external_access = true",
      "SET lock_configuration = false",
      "RESET enable_external_access",
      fmt::format("EXPORT DATABASE '{}/export'", dir.path()),
      "PREPARE p AS SELECT 1",
      fmt::format("SELECT * FROM glob('{}/*')", dir.path()),
  };
  for (const std::string& sql : blocked) {
    ProcessResult query = Skipprd(dir, {"query", "--sql", sql});
    EXPECT_EQ(query.exit_code, 1) << sql << "\n" << query.out;
    EXPECT_THAT(query.err, HasSubstr("--allow-file-access")) << sql;
  }
  EXPECT_FALSE(fs::exists(dir.Sub("out.csv")));
  EXPECT_FALSE(fs::exists(dir.Sub("other.db")));
  EXPECT_FALSE(fs::exists(dir.Sub("export")));
  EXPECT_FALSE(fs::exists(data_dir + "/injected.parquet"));
  EXPECT_EQ(ReadAll(store), store_before);
  EXPECT_EQ(QueryRow(dir, "SELECT count(*) FROM rides.rides"), std::vector<std::string>{"50"});

  // The flag lifts it.
  ProcessResult allowed = Skipprd(dir, {"query", "--allow-file-access", "--sql",
                                        fmt::format("COPY (SELECT count(*) AS n FROM rides.rides) "
                                                    "TO '{}/out.csv'",
                                                    dir.path())});
  EXPECT_EQ(allowed.exit_code, 0) << allowed.err;
  EXPECT_EQ(ReadAll(dir.Sub("out.csv")), "n\n50\n");
  ProcessResult help = Skipprd(dir, {"query", "--help"});
  EXPECT_THAT(help.out, HasSubstr("--allow-file-access"));
}

// ----- one broken table fails only the statements that read it ---------------------------------

std::string TwoPipelines(const TempDir& dir) {
  return fmt::format(R"(data_sources:
  a_source: {{File: {{path: {0}/input/a.jsonl}}}}
  b_source: {{File: {{path: {0}/input/b.jsonl}}}}
pipelines:
  a:
    data_source: data_sources.a_source
  b:
    data_source: data_sources.b_source
)",
                     dir.path());
}

// Flips one byte in the middle of every WAL segment file of `pipeline`.
void DamageSegments(const TempDir& dir, const std::string& pipeline) {
  size_t damaged = 0;
  for (const auto& entry : fs::directory_iterator(dir.Sub("data/" + pipeline + "/wal"))) {
    if (entry.path().extension() != ".seg" || fs::file_size(entry.path()) == 0) continue;
    std::fstream file(entry.path(), std::ios::in | std::ios::out | std::ios::binary);
    const std::streamoff middle = static_cast<std::streamoff>(fs::file_size(entry.path()) / 2);
    file.seekg(middle);
    char byte = 0;
    file.get(byte);
    file.seekp(middle);
    file.put(static_cast<char>(byte ^ 0x5a));
    ++damaged;
  }
  ASSERT_GT(damaged, 0u);
}

TEST(SecurityQueryBinding, DamagedSegmentFailsOnlyTheStatementsThatReadItsTable) {
  TempDir dir;
  dir.Write("skippr.yml", TwoPipelines(dir));
  dir.Write("input/a.jsonl", "{\"id\": 1}\n{\"id\": 2}\n{\"id\": 3}\n");
  dir.Write("input/b.jsonl", "{\"id\": 10}\n");
  ASSERT_EQ(Skipprd(dir, {"sync", "--once"}).exit_code, 0);
  DamageSegments(dir, "b");

  EXPECT_EQ(QueryRow(dir, "SELECT count(*) FROM a.a"), std::vector<std::string>{"3"});
  ProcessResult broken = Skipprd(dir, {"query", "--sql", "SELECT * FROM b.b"});
  EXPECT_EQ(broken.exit_code, 1);
  EXPECT_THAT(broken.err, HasSubstr("query failed: table b.b cannot be read: "));
  EXPECT_THAT(broken.err, HasSubstr("checksum"));
  ProcessResult join = Skipprd(dir, {"query", "--sql", "SELECT * FROM a.a JOIN b.b USING (id)"});
  EXPECT_EQ(join.exit_code, 1);
  EXPECT_THAT(join.err, HasSubstr("table b.b cannot be read"));
  // Statements DuckDB cannot serialize bind every table; a broken one still fails only there.
  ProcessResult describe = Skipprd(dir, {"query", "--sql", "DESCRIBE a.a"});
  EXPECT_EQ(describe.exit_code, 0) << describe.err;
  EXPECT_THAT(describe.out, HasSubstr("id"));
}

}  // namespace
}  // namespace skippr::testing
