#include "bench_common.hpp"

#include <fcntl.h>
#include <fmt/ranges.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>

extern char** environ;

namespace fs = std::filesystem;

namespace skippr::bench {

namespace {

constexpr std::array<std::string_view, 8> kFirstNames = {"Ada",     "Grace", "Alan",     "Edsger",
                                                         "Barbara", "Ken",   "Margaret", "Dennis"};
constexpr std::array<std::string_view, 8> kLastNames = {
    "Lovelace", "Hopper", "Turing", "Dijkstra", "Liskov", "Thompson", "Hamilton", "Ritchie"};
constexpr std::array<std::string_view, 12> kWords = {"smooth", "ride", "along", "the",
                                                     "canal",  "flat", "tyre",  "rain",
                                                     "bike",   "dock", "full",  "late"};
constexpr std::array<std::string_view, 4> kBikeModels = {"classic", "e-bike", "cargo", "tandem"};

std::string bench_name = "bench";  // SetBenchName
fs::path work_dir_to_remove;       // MakeWorkDir; removed on failure too

}  // namespace

void SetBenchName(std::string name) { bench_name = std::move(name); }

void Fail(const std::string& message) {
  fmt::print(stderr, "{}: {}\n", bench_name, message);
  if (!work_dir_to_remove.empty()) {
    std::error_code ignored;
    fs::remove_all(work_dir_to_remove, ignored);
  }
  std::exit(1);
}

fs::path MakeWorkDir(const fs::path& parent_dir_or_empty) {
  // No --dir: the system's temporary directory.
  const fs::path parent_dir =
      parent_dir_or_empty.empty() ? fs::temp_directory_path() : parent_dir_or_empty;
  fs::create_directories(parent_dir);
  std::string prefix = bench_name;
  std::replace(prefix.begin(), prefix.end(), '/', '_');
  std::string pattern = (parent_dir / (prefix + ".XXXXXX")).string();
  if (mkdtemp(pattern.data()) == nullptr) {
    Fail(fmt::format("cannot create a directory in {}", parent_dir.string()));
  }
  work_dir_to_remove = pattern;
  return pattern;
}

fs::path DefaultSkipprd() {
  const fs::path bench_dir = fs::read_symlink("/proc/self/exe").parent_path();
  return (bench_dir / ".." / "src" / "skipprd").lexically_normal();
}

std::string BenchArgs::Value() {
  if (index_ + 1 >= argc_) Fail(fmt::format("{} needs a value", arg_));
  return argv_[++index_];
}

void BenchArgs::FailUnknown() const {
  Fail(fmt::format("unknown flag {} (use {})", arg_, usage_));
}

void ResolveSkipprdAndDir(fs::path& skipprd, fs::path& parent_dir) {
  if (skipprd.empty()) skipprd = DefaultSkipprd();
  if (parent_dir.empty()) parent_dir = fs::temp_directory_path();
  if (access(skipprd.c_str(), X_OK) != 0) {
    Fail(fmt::format("no skipprd binary at {}; build it, or pass --skipprd PATH", skipprd.string()));
  }
}

std::string FileText(const fs::path& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

std::string MakeComment(RowRandom& random) {
  std::string comment;
  const uint64_t word_count = 1 + random.Below(12);
  const bool has_comma = random.Below(10) == 0;
  const bool has_quote = random.Below(50) == 0;
  for (uint64_t w = 0; w < word_count; ++w) {
    if (w > 0) comment += (has_comma && w == 1) ? ", " : " ";
    const std::string_view word = kWords[random.Below(kWords.size())];
    if (has_quote && w == word_count - 1) {
      comment += fmt::format("\"{}\"", word);
    } else {
      comment += word;
    }
  }
  return comment;
}

Ride MakeRide(uint64_t index) {
  using namespace std::chrono;
  RowRandom random(index);
  Ride ride;
  ride.ride_id = 4'000'000'000'000'000 + static_cast<int64_t>(index);
  ride.station_id = 1 + static_cast<int32_t>(random.Below(4999));
  ride.amount_cents = 150 + static_cast<int32_t>(random.Below(9850));
  ride.rider_name = fmt::format("{} {}", kFirstNames[random.Below(kFirstNames.size())],
                                kLastNames[random.Below(kLastNames.size())]);
  ride.comment = MakeComment(random);
  ride.is_member = random.Below(3) != 0;
  const sys_seconds start = sys_days(year{2024} / January / 1) + seconds(random.Below(180 * 86400));
  const sys_days day = floor<days>(start);
  const year_month_day date(day);
  const hh_mm_ss<seconds> time(start - day);
  ride.ride_date =
      fmt::format("{:04}-{:02}-{:02}", static_cast<int>(date.year()),
                  static_cast<unsigned>(date.month()), static_cast<unsigned>(date.day()));
  ride.started_at = fmt::format("{}T{:02}:{:02}:{:02}Z", ride.ride_date, time.hours().count(),
                                time.minutes().count(), time.seconds().count());
  ride.bike_model = kBikeModels[random.Below(kBikeModels.size())];
  ride.bike_battery_pct = static_cast<int32_t>(random.Below(101));
  ride.bike_is_electric = ride.bike_model == "e-bike";
  return ride;
}

std::string JsonEscaped(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

std::string CsvField(std::string_view text) {
  if (text.find_first_of(",\"\n") == std::string_view::npos) return std::string(text);
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

void AppendJsonLine(fmt::memory_buffer& out, const Ride& ride) {
  fmt::format_to(std::back_inserter(out),
                 R"({{"ride_id":{},"station_id":{},"amount":{}.{:02},"rider_name":"{}",)"
                 R"("comment":"{}","is_member":{},"started_at":"{}","ride_date":"{}",)"
                 R"("bike":{{"model":"{}","battery_pct":{},"is_electric":{}}}}})"
                 "\n",
                 ride.ride_id, ride.station_id, ride.amount_cents / 100, ride.amount_cents % 100,
                 ride.rider_name, JsonEscaped(ride.comment), ride.is_member, ride.started_at,
                 ride.ride_date, ride.bike_model, ride.bike_battery_pct, ride.bike_is_electric);
}

void AppendCsvLine(fmt::memory_buffer& out, const Ride& ride) {
  fmt::format_to(std::back_inserter(out), "{},{},{}.{:02},{},{},{},{},{}\n", ride.ride_id,
                 ride.station_id, ride.amount_cents / 100, ride.amount_cents % 100,
                 CsvField(ride.rider_name), CsvField(ride.comment), ride.is_member, ride.started_at,
                 ride.ride_date);
}

void Flush(std::ofstream& file, fmt::memory_buffer& buffer) {
  file.write(buffer.data(), static_cast<std::streamsize>(buffer.size()));
  buffer.clear();
}

std::optional<InputFiles> WriteInputFiles(const fs::path& dir, uint64_t rows) {
  InputFiles files{dir / "rides.jsonl", dir / "rides.csv"};
  std::ofstream jsonl(files.jsonl, std::ios::binary);
  std::ofstream csv(files.csv, std::ios::binary);
  fmt::memory_buffer jsonl_buffer;
  fmt::memory_buffer csv_buffer;
  csv_buffer.append(kCsvHeader);
  for (uint64_t i = 0; i < rows; ++i) {
    const Ride ride = MakeRide(i);
    AppendJsonLine(jsonl_buffer, ride);
    AppendCsvLine(csv_buffer, ride);
    if (jsonl_buffer.size() >= kFlushBytes) Flush(jsonl, jsonl_buffer);
    if (csv_buffer.size() >= kFlushBytes) Flush(csv, csv_buffer);
  }
  Flush(jsonl, jsonl_buffer);
  Flush(csv, csv_buffer);
  if (!jsonl.good() || !csv.good()) return std::nullopt;
  return files;
}

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double BestOfSeconds(const std::function<double()>& run) {
  run();
  double best_seconds = run();
  for (int i = 1; i < kTimedRuns; ++i) best_seconds = std::min(best_seconds, run());
  return best_seconds;
}

std::string Throughput(double seconds, uint64_t rows, uint64_t bytes) {
  return fmt::format("{:6.2f} s  {:6.2f} M rows/s  {:5.0f} MB/s", seconds, rows / seconds / 1e6,
                     bytes / seconds / kBytesPerMb);
}

std::string SqlQuoted(const std::string& text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'') out += '\'';
    out += c;
  }
  return out + "'";
}

std::string ReadJsonSql(const fs::path& file) {
  return fmt::format("read_json({}, format = 'newline_delimited')", SqlQuoted(file.string()));
}

std::string ReadCsvSql(const fs::path& file) {
  return fmt::format("read_csv({})", SqlQuoted(file.string()));
}

std::string ReadParquetSql(const fs::path& file) {
  return fmt::format("read_parquet({})", SqlQuoted(file.string()));
}

// ---------------------------------------------------------------------------------------------
// DuckDB

DuckDb::DuckDb(std::optional<int> threads) {
  if (duckdb_open(nullptr, &database_) != DuckDBSuccess) Fail("cannot open an in-memory DuckDB");
  if (duckdb_connect(database_, &connection_) != DuckDBSuccess) Fail("cannot connect to DuckDB");
  if (threads) Execute(fmt::format("SET threads = {}", *threads));
}

DuckDb::~DuckDb() {
  duckdb_disconnect(&connection_);
  duckdb_close(&database_);
}

void DuckDb::Execute(const std::string& sql) {
  Query(sql, [](duckdb_result&) {});
}

int64_t DuckDb::QueryInt64(const std::string& sql) {
  int64_t value = 0;
  Query(sql, [&](duckdb_result& result) {
    if (duckdb_row_count(&result) > 0) value = duckdb_value_int64(&result, 0, 0);
  });
  return value;
}

std::string DuckDb::QueryText(const std::string& sql) {
  std::string value;
  Query(sql, [&](duckdb_result& result) {
    if (duckdb_row_count(&result) == 0) return;
    char* text = duckdb_value_varchar(&result, 0, 0);
    value = text != nullptr ? text : "";
    duckdb_free(text);
  });
  return value;
}

void DuckDb::Query(const std::string& sql, const std::function<void(duckdb_result&)>& read) {
  duckdb_result result;
  if (duckdb_query(connection_, sql.c_str(), &result) != DuckDBSuccess) {
    const std::string error = duckdb_result_error(&result);
    duckdb_destroy_result(&result);
    Fail(fmt::format("DuckDB: {}\n  in: {}", error, sql));
  }
  read(result);
  duckdb_destroy_result(&result);
}

double TimeDuckDbCopy(DuckDb& duckdb, const std::string& table_function, const fs::path& parquet,
                      uint64_t expected_rows, const std::string& copy_options) {
  const Clock::time_point start = Clock::now();
  const int64_t rows =
      duckdb.QueryInt64(fmt::format("COPY (SELECT * FROM {}) TO {} ({})", table_function,
                                    SqlQuoted(parquet.string()), copy_options));
  const double seconds = SecondsSince(start);
  if (rows != static_cast<int64_t>(expected_rows)) {
    Fail(fmt::format("DuckDB copied {} rows from {}, expected {}", rows, table_function,
                     expected_rows));
  }
  fs::remove(parquet);
  return seconds;
}

// ---------------------------------------------------------------------------------------------
// Child processes

std::vector<std::string> ChildEnvironment(const std::map<std::string, std::string>& overrides) {
  std::vector<std::string> entries;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string_view text = *entry;
    if (!overrides.count(std::string(text.substr(0, text.find('='))))) entries.emplace_back(text);
  }
  for (const auto& [name, value] : overrides) entries.push_back(name + "=" + value);
  return entries;
}

namespace {

std::vector<char*> NullTerminated(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (std::string& text : strings) pointers.push_back(text.data());
  pointers.push_back(nullptr);
  return pointers;
}

std::string ReadAll(int fd) {
  std::string text;
  std::array<char, 1 << 16> chunk;
  ssize_t n = 0;
  while ((n = read(fd, chunk.data(), chunk.size())) != 0) {
    if (n > 0) text.append(chunk.data(), static_cast<size_t>(n));
    if (n < 0 && errno != EINTR) break;
  }
  return text;
}

ChildRun ForkExecWait(Command command) {
  std::vector<char*> argv = NullTerminated(command.argv);
  std::vector<char*> env = NullTerminated(command.env);
  int stdout_pipe[2];
  if (pipe2(stdout_pipe, O_CLOEXEC) != 0) Fail("cannot create a pipe");
  const int stderr_fd =
      open(command.stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (stderr_fd < 0) Fail(fmt::format("cannot create {}", command.stderr_path.string()));

  ChildRun run;
  const Clock::time_point start = Clock::now();
  const pid_t pid = fork();
  if (pid < 0) Fail("fork failed");
  if (pid == 0) {  // only async-signal-safe calls until execve
    dup2(stdout_pipe[1], STDOUT_FILENO);
    dup2(stderr_fd, STDERR_FILENO);
    execve(argv[0], argv.data(), env.data());
    _exit(127);
  }
  close(stdout_pipe[1]);
  close(stderr_fd);
  run.stdout_text = ReadAll(stdout_pipe[0]);
  close(stdout_pipe[0]);
  int wait_status = 0;
  rusage usage{};
  while (wait4(pid, &wait_status, 0, &usage) < 0) {
    if (errno != EINTR) Fail(fmt::format("wait4 for {} failed", command.argv[0]));
  }
  run.seconds = SecondsSince(start);
  run.exit_code = WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : -1;
  run.peak_rss_kib = static_cast<uint64_t>(usage.ru_maxrss);  // KiB on Linux
  return run;
}

// The Launcher's wire format over its socket: a count, then that many length-prefixed strings.
bool ReadExact(int fd, void* data, size_t size) {
  auto* bytes = static_cast<char*>(data);
  while (size > 0) {
    const ssize_t n = read(fd, bytes, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

void WriteExact(int fd, const void* data, size_t size) {
  const auto* bytes = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = write(fd, bytes, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) Fail("the launcher socket broke");
    bytes += n;
    size -= static_cast<size_t>(n);
  }
}

void SendStrings(int fd, const std::vector<std::string>& strings) {
  const uint64_t count = strings.size();
  WriteExact(fd, &count, sizeof(count));
  for (const std::string& text : strings) {
    const uint64_t size_bytes = text.size();
    WriteExact(fd, &size_bytes, sizeof(size_bytes));
    WriteExact(fd, text.data(), text.size());
  }
}

std::optional<std::vector<std::string>> ReceiveStrings(int fd) {
  uint64_t count = 0;
  if (!ReadExact(fd, &count, sizeof(count))) return std::nullopt;
  std::vector<std::string> strings(count);
  for (std::string& text : strings) {
    uint64_t size_bytes = 0;
    if (!ReadExact(fd, &size_bytes, sizeof(size_bytes))) return std::nullopt;
    text.resize(size_bytes);
    if (!ReadExact(fd, text.data(), size_bytes)) return std::nullopt;
  }
  return strings;
}

// The Launcher's helper: runs each request's command and replies with its ChildRun, until
// end-of-file.
[[noreturn]] void ServeLaunches(int fd) {
  while (std::optional<std::vector<std::string>> request = ReceiveStrings(fd)) {
    Command command;
    command.stderr_path = (*request)[0];
    const size_t argc = std::stoull((*request)[1]);
    command.argv.assign(request->begin() + 2, request->begin() + 2 + static_cast<ptrdiff_t>(argc));
    command.env.assign(request->begin() + 2 + static_cast<ptrdiff_t>(argc), request->end());
    const ChildRun run = ForkExecWait(std::move(command));
    SendStrings(fd, {fmt::format("{:.9f}", run.seconds), std::to_string(run.exit_code),
                     std::to_string(run.peak_rss_kib), run.stdout_text});
  }
  _exit(0);
}

}  // namespace

Launcher::Launcher() {
  int sockets[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sockets) != 0) {
    Fail("cannot create a socketpair");
  }
  pid_ = fork();
  if (pid_ < 0) Fail("fork failed");
  if (pid_ == 0) {
    close(sockets[0]);
    ServeLaunches(sockets[1]);
  }
  close(sockets[1]);
  socket_fd_ = sockets[0];
}

Launcher::~Launcher() {
  close(socket_fd_);  // the helper reads end-of-file and exits
  waitpid(pid_, nullptr, 0);
}

ChildRun Launcher::Run(const Command& command) {
  std::vector<std::string> request = {command.stderr_path.string(),
                                      std::to_string(command.argv.size())};
  request.insert(request.end(), command.argv.begin(), command.argv.end());
  request.insert(request.end(), command.env.begin(), command.env.end());
  SendStrings(socket_fd_, request);
  std::optional<std::vector<std::string>> reply = ReceiveStrings(socket_fd_);
  if (!reply || reply->size() != 4) {
    Fail(fmt::format("the launcher died running {}", command.argv[0]));
  }
  return {std::stod((*reply)[0]), std::stoi((*reply)[1]), std::stoull((*reply)[2]),
          std::move((*reply)[3])};
}

// ---------------------------------------------------------------------------------------------
// skipprd side

namespace {

// A JSON string is a YAML scalar.
std::string YamlScalar(const std::string& text) { return nlohmann::json(text).dump(); }

// The pipeline's `transform:` block with one aggregate (docs/config.md, "transform.aggregates").
std::string AggregatesYaml(const SyncAggregate& aggregate) {
  std::vector<std::string> key_fields;
  for (const std::string& field : aggregate.key_fields) key_fields.push_back(YamlScalar(field));
  std::string yaml = fmt::format(
      "    transform:\n"
      "      aggregates:\n"
      "        - id: {}\n"
      "          key_fields: [{}]\n"
      "          measures:\n",
      YamlScalar(aggregate.id), fmt::join(key_fields, ", "));
  for (const SyncMeasure& measure : aggregate.measures) {
    yaml += fmt::format("            {}: {{{}: {}}}\n", YamlScalar(measure.name),
                        YamlScalar(measure.kind), YamlScalar(measure.field));
  }
  return yaml;
}

}  // namespace

void WriteSyncConfig(const fs::path& path, const SyncConfig& sync_config) {
  std::string yaml = fmt::format(
      "data_sources:\n"
      "  files:\n"
      "    File:\n"
      "      path: {}\n",
      YamlScalar(sync_config.input.string()));
  const bool has_sink = !sync_config.lake_warehouse.empty();
  if (has_sink) {
    yaml += fmt::format(
        "data_sinks:\n"
        "  lake:\n"
        "    SkipprLake:\n"
        "      warehouse: {}\n"
        "      table_namespace: {}\n",
        YamlScalar("file://" + sync_config.lake_warehouse.string()),
        YamlScalar(sync_config.lake_table_namespace));
  }
  yaml += fmt::format(
      "pipelines:\n"
      "  {}:\n"
      "    data_source: data_sources.files\n",
      sync_config.pipeline);
  if (has_sink) yaml += "    data_sink: data_sinks.lake\n";
  if (sync_config.aggregate) yaml += AggregatesYaml(*sync_config.aggregate);
  std::ofstream file(path);
  file << yaml;
  if (!file.good()) Fail(fmt::format("cannot write {}", path.string()));
}

namespace {

// The sync_complete event among skipprd's JSON-lines output (null when there is none).
nlohmann::json SyncCompleteEvent(const std::string& stdout_text) {
  std::istringstream lines(stdout_text);
  std::string line;
  while (std::getline(lines, line)) {
    nlohmann::json event = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (event.is_object() && event.value("event", "") == "sync_complete") return event;
  }
  return nullptr;
}

}  // namespace

SyncRun RunSkipprdSync(Launcher& launcher, const fs::path& skipprd, const fs::path& config,
                       const std::string& pipeline, const fs::path& data_dir,
                       const fs::path& stderr_path, uint64_t expected_rows,
                       bool keeps_data_dir) {
  if (!keeps_data_dir) fs::remove_all(data_dir);
  const ChildRun child = launcher.Run({{skipprd.string(), "--config", config.string(), "sync",
                                        "--pipeline", pipeline, "--once", "--output", "json"},
                                       ChildEnvironment({{"DATA_DIR", data_dir.string()}}),
                                       stderr_path});
  const nlohmann::json event = SyncCompleteEvent(child.stdout_text);
  const std::optional<uint64_t> total_rows =
      event.is_object() ? std::optional(event.value("total_rows", uint64_t{0})) : std::nullopt;
  if (child.exit_code != 0 || total_rows != expected_rows) {
    Fail(
        fmt::format("skipprd sync exited {} with total_rows {}, expected exit 0 and {} rows\n"
                    "stdout:\n{}stderr:\n{}",
                    child.exit_code, total_rows ? fmt::to_string(*total_rows) : "missing",
                    expected_rows, child.stdout_text, FileText(stderr_path)));
  }
  fs::remove(stderr_path);
  return {child.seconds, *total_rows, event.value("rows_landed", uint64_t{0}),
          event.value("landings", uint64_t{0}), child.peak_rss_kib,
          event.value("rows_aggregated", uint64_t{0})};
}

}  // namespace skippr::bench
