// bench/s3: what reading from object storage costs, beside the same pipeline on local disk, both
// measured in the same run (STYLE.md, "Benchmarks print ratios from one run"); printed, never
// asserted.
//
//   1. S3 source → SkipprLake (local warehouse): the real `skipprd sync --once` reading the rides
//      JSON lines as objects under a prefix of an S3-compatible server this benchmark starts on
//      loopback (s3rver, the tests' helper), beside the same pipeline with a File source reading
//      the same files from a local directory. The ratio is rows/s over S3 ÷ rows/s from disk.
//
// Not measured yet (issue 19): a SkipprLake warehouse on s3:// and the WAL on S3 (WAL_STORAGE=s3)
// are not in this build, so their figures (S3 lake vs local lake; WAL commit latency p50/p99 on S3
// vs disk) are reported as not available.
//
// Each figure is the median of kRounds interleaved rounds after a warm-up.
//
//   bench_s3 [--rows N] [--quick] [--objects K] [--skipprd PATH] [--dir PATH]
#include <fmt/format.h>

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
#include "support/aws_servers.hpp"

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
  fmt::print(
      "  2. SkipprLake on s3:// vs local: not available yet (no lake on S3 in this build)\n");
  fmt::print(
      "  3. WAL commit latency on S3 vs disk: not available yet (WAL_STORAGE=s3 is not in "
      "this build)\n");
  fs::remove_all(work_dir);
  return 0;
}
