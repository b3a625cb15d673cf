// bench/s3: what reading from object storage costs, beside the same pipeline on local disk, both
// measured in the same run (STYLE.md, "Benchmarks print ratios from one run"); printed, never
// asserted.
//
//   1. The real `skipprd sync --once` of the rides JSON lines, three pipelines per round:
//      - on local disk: a File source → SkipprLake in a file:/// warehouse;
//      - S3 source → the same local lake, the lines as objects under a prefix of an S3-compatible
//        server this benchmark starts on loopback (s3rver, the tests' helper);
//      - S3 source → SkipprLake on s3:// in the same server, its catalog a table of a
//        DynamoDB-compatible server also started on loopback (dynalite).
//      Ratios: rows/s of each S3 pipeline ÷ rows/s of the one on local disk.
//
//   2. WAL commit latency: Wal::Commit of one Sample batch of kRowsPerCommit rows, kCommits times,
//      into a WAL on local disk and into one in the bucket (WAL_STORAGE=s3's S3Env), each with a
//      fresh store: p50 and p99 of each, and their ratio.
//
// Each figure is the median of kRounds interleaved rounds after a warm-up.
//
//   bench_s3 [--rows N] [--quick] [--objects K] [--skipprd PATH] [--dir PATH]
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "aws/aws.hpp"
#include "bench_common.hpp"
#include "core/environment.hpp"
#include "sample_batches.hpp"
#include "store/store.hpp"
#include "support/aws_servers.hpp"
#include "wal/wal.hpp"

namespace skippr::bench {
namespace {

namespace fs = std::filesystem;

constexpr int kRounds = 5;
constexpr char kBucket[] = "bench";

struct Flags {
  uint64_t rows = kDefaultRows;
  int objects = 8;
  fs::path skipprd;
  fs::path parent_dir;
};

Flags ParseFlags(int argc, char** argv) {
  Flags flags;
  BenchArgs args(argc, argv, "--rows N, --quick, --objects K, --skipprd PATH, --dir PATH");
  while (args.Next()) {
    if (args.Is("--rows")) {
      flags.rows = args.Unsigned();
    } else if (args.Is("--quick")) {
      flags.rows = kQuickRows;
    } else if (args.Is("--objects")) {
      flags.objects = static_cast<int>(std::max<uint64_t>(1, args.Unsigned()));
    } else if (args.Is("--skipprd")) {
      flags.skipprd = args.Value();
    } else if (args.Is("--dir")) {
      flags.parent_dir = args.Value();
    } else {
      args.FailUnknown();
    }
  }
  ResolveSkipprdAndDir(flags.skipprd, flags.parent_dir);
  return flags;
}

// Splits `jsonl` into `parts` files of whole lines under `dir` (part-000.jsonl, ...).
std::vector<fs::path> SplitLines(const fs::path& jsonl, const fs::path& dir, int parts) {
  fs::create_directories(dir);
  const uint64_t target_bytes = fs::file_size(jsonl) / static_cast<uint64_t>(parts) + 1;
  std::ifstream in(jsonl);
  std::vector<fs::path> written;
  std::ofstream out;
  uint64_t bytes = target_bytes;
  std::string line;
  while (std::getline(in, line)) {
    if (bytes >= target_bytes) {
      written.push_back(dir / fmt::format("part-{:03}.jsonl", written.size()));
      out = std::ofstream(written.back());
      bytes = 0;
    }
    out << line << '\n';
    bytes += line.size() + 1;
  }
  return written;
}

void Upload(aws::S3Client& client, const fs::path& file, const std::string& key) {
  std::ifstream in(file, std::ios::binary);
  auto uploaded = client.UploadObject(kBucket, key, [&](char* buffer, size_t capacity) {
    in.read(buffer, static_cast<std::streamsize>(capacity));
    return Result<size_t>(static_cast<size_t>(in.gcount()));
  });
  if (!uploaded.ok()) Fail("upload failed: " + uploaded.status().ToString());
}

constexpr uint64_t kRowsPerCommit = 10'000;
constexpr int kCommits = 100;

struct Latency {
  double p50_ms = 0;
  double p99_ms = 0;
  uint64_t segment_bytes = 0;
};

// kCommits commits of `batches` into a WAL at `wal_directory` through `env`, timed one by one.
Latency MeasureCommits(Env& env, const std::string& wal_directory, const fs::path& store_directory,
                       const std::vector<Batch>& batches) {
  Result<std::unique_ptr<store::Store>> store =
      store::Store::Open({.directory = store_directory.string()});
  if (!store.ok()) Fail(fmt::format("store: {}", store.status().message()));
  Result<std::unique_ptr<wal::Wal>> wal =
      wal::Wal::Open(wal_directory, "bench", **store, nullptr, {.env = &env});
  if (!wal.ok()) Fail(fmt::format("WAL: {}", wal.status().message()));
  std::vector<double> milliseconds;
  Latency latency;
  for (int commit = 0; commit < kCommits; ++commit) {
    const auto start = std::chrono::steady_clock::now();
    Result<wal::CommitInfo> info = (*wal)->Commit(batches, "{}", nullptr);
    if (!info.ok()) Fail(fmt::format("WAL commit: {}", info.status().message()));
    milliseconds.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count());
    latency.segment_bytes = info->file_bytes;
  }
  std::sort(milliseconds.begin(), milliseconds.end());
  latency.p50_ms = milliseconds[milliseconds.size() / 2];
  latency.p99_ms = milliseconds[milliseconds.size() * 99 / 100];
  return latency;
}

// `lake_settings`: the SkipprLake entry's flow mapping body.
std::string LakeYaml(const std::string& source_block, const std::string& lake_settings) {
  return fmt::format(
      "data_sources:\n  rides:\n{}"
      "data_sinks:\n  lake:\n    SkipprLake: {{{}}}\n"
      "pipelines:\n  p:\n    data_source: data_sources.rides\n    data_sink: data_sinks.lake\n",
      source_block, lake_settings);
}

std::string LocalLake(const fs::path& warehouse) {
  return fmt::format("warehouse: \"file://{}\"", warehouse.string());
}

// A fresh warehouse prefix and catalog table per round: every round lands into an empty table.
std::string LakeOnS3(int round) {
  return fmt::format("warehouse: \"s3://{}/lake-{}/\", catalog_table: bench-{}", kBucket, round,
                     round);
}

}  // namespace
}  // namespace skippr::bench

int main(int argc, char** argv) {
  using namespace skippr::bench;
  namespace fs = std::filesystem;
  SetBenchName("bench/s3");
  spdlog::set_level(spdlog::level::warn);  // not a line per commit
  const Flags flags = ParseFlags(argc, argv);
  Launcher launcher;  // first, while this process is small (bench_common.hpp, "Child processes")
  const fs::path work_dir = MakeWorkDir(flags.parent_dir);
  const std::optional<InputFiles> input = WriteInputFiles(work_dir, flags.rows);
  if (!input) Fail("could not write the input files");
  const std::vector<fs::path> parts = SplitLines(input->jsonl, work_dir / "local", flags.objects);

  std::string why_not;
  const std::unique_ptr<skippr::testing::S3Server> server =
      skippr::testing::S3Server::Start(&why_not);
  if (!server) Fail("cannot start the S3 server: " + why_not);
  const std::unique_ptr<skippr::testing::DynamoServer> dynamo =
      skippr::testing::DynamoServer::Start(&why_not);
  if (!dynamo) Fail("cannot start the DynamoDB server: " + why_not);
  server->CreateBucket(kBucket);
  skippr::MapEnvironment environment(server->ClientEnvironment());
  auto client = skippr::aws::S3Client::Open({}, environment);
  if (!client.ok()) Fail(client.status().ToString());
  for (const fs::path& part : parts) Upload(**client, part, "rides/" + part.filename().string());

  const std::string file_source =
      fmt::format("    File: {{path: \"{}\"}}\n", (work_dir / "local").string());
  const std::string s3_source =
      fmt::format("    S3: {{s3_bucket: {}, s3_prefix: rides/}}\n", kBucket);
  std::map<std::string, std::string> variables = server->ClientEnvironment();
  variables["AWS_ENDPOINT_URL_DYNAMODB"] = dynamo->endpoint();
  // RunSkipprdSync passes this process's environment: the servers' variables go there.
  for (const std::string& entry : ChildEnvironment(variables)) {
    const size_t equals = entry.find('=');
    setenv(entry.substr(0, equals).c_str(), entry.substr(equals + 1).c_str(), 1);
  }

  struct Pipeline {
    const char* label;
    const char* name;
    std::function<std::string(int round)> yaml;
    std::vector<double> seconds;
    std::vector<double> ratios;  // rows/s ÷ local disk's, per round
    uint64_t peak_rss_kib = 0;
  };
  std::vector<Pipeline> pipelines;
  pipelines.push_back({"on local disk (File -> file:/// lake)", "local", [&](int) {
                         return LakeYaml(file_source, LocalLake(work_dir / "warehouse-local"));
                       }});
  pipelines.push_back({"S3 source -> file:/// lake", "s3-source", [&](int) {
                         return LakeYaml(s3_source, LocalLake(work_dir / "warehouse-s3"));
                       }});
  pipelines.push_back({"S3 source -> s3:// lake (DynamoDB)", "s3-lake",
                       [&](int round) { return LakeYaml(s3_source, LakeOnS3(round)); }});
  for (int round = 0; round <= kRounds; ++round) {
    double local_seconds = 0;
    for (Pipeline& pipeline : pipelines) {
      const fs::path config = work_dir / fmt::format("{}.yml", pipeline.name);
      std::ofstream(config) << pipeline.yaml(round);
      fs::remove_all(work_dir / "warehouse-local");
      fs::remove_all(work_dir / "warehouse-s3");
      const SyncRun run = RunSkipprdSync(launcher, flags.skipprd, config, "p", work_dir / "data",
                                         work_dir / "skipprd.stderr", flags.rows);
      if (run.rows_landed != flags.rows) {
        Fail(fmt::format("{}: skipprd landed {} rows, expected {}", pipeline.name, run.rows_landed,
                         flags.rows));
      }
      if (round == 0) continue;  // warm-up
      if (local_seconds == 0) local_seconds = run.seconds;
      pipeline.seconds.push_back(run.seconds);
      pipeline.ratios.push_back(local_seconds / run.seconds);
      pipeline.peak_rss_kib = std::max(pipeline.peak_rss_kib, run.peak_rss_kib);
    }
  }
  const double rows = static_cast<double>(flags.rows);
  fmt::print(
      "bench/s3  rows={} in {} objects ({} MB of JSON lines); medians of {} interleaved "
      "rounds after a warm-up\n",
      flags.rows, parts.size(), fs::file_size(input->jsonl) / 1'000'000, kRounds);
  fmt::print(
      "  1. skipprd sync --once; S3 is s3rver, the catalog table dynalite, both on loopback\n");
  for (const Pipeline& pipeline : pipelines) {
    fmt::print(
        "    {:<38}{:7.2f} s  {:6.3f} M rows/s  {:.2f}x of local disk  peak RSS {:6.1f} MiB\n",
        pipeline.label, Median(pipeline.seconds), rows / Median(pipeline.seconds) / 1e6,
        Median(pipeline.ratios), static_cast<double>(pipeline.peak_rss_kib) / kKibPerMib);
  }

  const std::vector<skippr::Batch> batches = MakeSampleBatches(kRowsPerCommit);
  auto s3_env = skippr::aws::S3Env::Open({}, environment, (work_dir / "spool").string());
  if (!s3_env.ok()) Fail(s3_env.status().ToString());
  const Latency disk = MeasureCommits(*skippr::Env::Default(), (work_dir / "wal-disk").string(),
                                      work_dir / "store-disk", batches);
  const Latency s3 =
      MeasureCommits(**s3_env, fmt::format("s3://{}/wal", kBucket), work_dir / "store-s3", batches);
  fmt::print("  2. WAL commit latency, {} commits of {} rows ({:.1f} MB segments)\n", kCommits,
             kRowsPerCommit, static_cast<double>(disk.segment_bytes) / 1e6);
  fmt::print("    on S3 (s3rver)    p50 {:7.2f} ms  p99 {:7.2f} ms\n", s3.p50_ms, s3.p99_ms);
  fmt::print("    on local disk     p50 {:7.2f} ms  p99 {:7.2f} ms\n", disk.p50_ms, disk.p99_ms);
  fmt::print("    S3 / disk: p50 {:.1f}x, p99 {:.1f}x\n", s3.p50_ms / disk.p50_ms,
             s3.p99_ms / disk.p99_ms);
  fs::remove_all(work_dir);
  return 0;
}
