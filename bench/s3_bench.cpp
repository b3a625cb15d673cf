// bench/s3: what reading from object storage costs, beside the same pipeline on local disk, both
// measured in the same run (STYLE.md, "Benchmarks print ratios from one run"); printed, never
// asserted.
//
//   1. S3 source → SkipprLake (local warehouse): the real `skipprd sync --once` reading the rides
//      JSON lines as objects under a prefix of an S3-compatible server this benchmark starts on
//      loopback (s3rver, the tests' helper), beside the same pipeline with a File source reading
//      the same files from a local directory. The ratio is rows/s over S3 ÷ rows/s from disk.
//
//   2. WAL commit latency: Wal::Commit of one Sample batch of kRowsPerCommit rows, kCommits times,
//      into a WAL on local disk and into one in the bucket (WAL_STORAGE=s3's S3Env), each with a
//      fresh store: p50 and p99 of each, and their ratio.
//
// Not measured yet (issue 19): a SkipprLake warehouse on s3:// is not in this build.
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

std::string LakeYaml(const std::string& source_block, const fs::path& warehouse) {
  return fmt::format(
      "data_sources:\n  rides:\n{}"
      "data_sinks:\n  lake:\n    SkipprLake: {{warehouse: \"file://{}\"}}\n"
      "pipelines:\n  p:\n    data_source: data_sources.rides\n    data_sink: data_sinks.lake\n",
      source_block, warehouse.string());
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
  server->CreateBucket(kBucket);
  skippr::MapEnvironment environment(server->ClientEnvironment());
  auto client = skippr::aws::S3Client::Open({}, environment);
  if (!client.ok()) Fail(client.status().ToString());
  for (const fs::path& part : parts) Upload(**client, part, "rides/" + part.filename().string());

  const fs::path local_config = work_dir / "local.yml";
  const fs::path s3_config = work_dir / "s3.yml";
  std::ofstream(local_config) << LakeYaml(
      fmt::format("    File: {{path: \"{}\"}}\n", (work_dir / "local").string()),
      work_dir / "warehouse-local");
  std::ofstream(s3_config) << LakeYaml(
      fmt::format("    S3: {{s3_bucket: {}, s3_prefix: rides/}}\n", kBucket),
      work_dir / "warehouse-s3");
  const std::vector<std::string> child_env = ChildEnvironment(server->ClientEnvironment());

  const auto run = [&](const fs::path& config, const fs::path& warehouse, const char* data) {
    fs::remove_all(warehouse);
    SyncRun result = RunSkipprdSync(launcher, flags.skipprd, config, "p", work_dir / data,
                                    work_dir / "skipprd.stderr", flags.rows);
    if (result.rows_landed != flags.rows) {
      Fail(fmt::format("skipprd landed {} rows, expected {}", result.rows_landed, flags.rows));
    }
    return result;
  };
  // RunSkipprdSync passes this process's environment: the server's variables go there.
  for (const std::string& entry : child_env) {
    const size_t equals = entry.find('=');
    setenv(entry.substr(0, equals).c_str(), entry.substr(equals + 1).c_str(), 1);
  }

  std::vector<double> local_seconds, s3_seconds, ratios;
  uint64_t local_rss = 0, s3_rss = 0;
  for (int round = 0; round <= kRounds; ++round) {
    const SyncRun local = run(local_config, work_dir / "warehouse-local", "data-local");
    const SyncRun s3 = run(s3_config, work_dir / "warehouse-s3", "data-s3");
    if (round == 0) continue;  // warm-up
    local_seconds.push_back(local.seconds);
    s3_seconds.push_back(s3.seconds);
    ratios.push_back(local.seconds / s3.seconds);
    local_rss = std::max(local_rss, local.peak_rss_kib);
    s3_rss = std::max(s3_rss, s3.peak_rss_kib);
  }
  const double rows = static_cast<double>(flags.rows);
  fmt::print(
      "bench/s3  rows={} in {} objects ({} MB of JSON lines); medians of {} interleaved "
      "rounds after a warm-up\n",
      flags.rows, parts.size(), fs::file_size(input->jsonl) / 1'000'000, kRounds);
  fmt::print(
      "  1. S3 source -> SkipprLake (local warehouse), beside a File source on the same "
      "files on local disk\n");
  fmt::print("    from S3 (s3rver)  {:7.2f} s  {:6.3f} M rows/s  peak RSS {:6.1f} MiB\n",
             Median(s3_seconds), rows / Median(s3_seconds) / 1e6,
             static_cast<double>(s3_rss) / kKibPerMib);
  fmt::print("    from local disk   {:7.2f} s  {:6.3f} M rows/s  peak RSS {:6.1f} MiB\n",
             Median(local_seconds), rows / Median(local_seconds) / 1e6,
             static_cast<double>(local_rss) / kKibPerMib);
  fmt::print("    ratio {:.2f}x of local disk's rows/s\n", Median(ratios));

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
  fmt::print(
      "  3. SkipprLake on s3:// vs local: not available yet (no lake on S3 in this build)\n");
  fs::remove_all(work_dir);
  return 0;
}
