// aws/: S3Env behaves as the Env seam promises, checked by the same cases on the POSIX file system
// and on an S3-compatible server (s3rver on loopback) — what a component that writes through an
// Env may rely on, wherever its files live.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "aws/aws.hpp"
#include "core/file.hpp"
#include "support/aws_servers.hpp"
#include "support/temp_dir.hpp"

namespace skippr::aws {
namespace {

using ::testing::UnorderedElementsAre;

class EnvConformance : public testing::ServerSuite<EnvConformance, testing::S3Server>,
                       public ::testing::WithParamInterface<std::string> {
 public:
  static std::unique_ptr<testing::S3Server> StartServer(std::string* why_not) {
    auto server = testing::S3Server::Start(why_not);
    if (server) server->CreateBucket("env");
    return server;
  }

 protected:
  void SetUp() override {
    ServerSuite::SetUp();
    if (HasFatalFailure()) return;
    if (GetParam() == "posix") {
      env_ = Env::Default();
      root_ = dir_.Sub("root");
      ASSERT_TRUE(CreateDirectoriesDurably(*env_, root_).ok());
      return;
    }
    const MapEnvironment environment(server_->ClientEnvironment());
    S3Options options;
    options.multipart_part_bytes = 5 << 20;
    auto s3 = S3Env::Open(options, environment, dir_.Sub("spool"));
    ASSERT_TRUE(s3.ok()) << s3.status().ToString();
    s3_env_ = std::move(s3).value();
    env_ = s3_env_.get();
    root_ =
        fmt::format("s3://env/{}", ::testing::UnitTest::GetInstance()->current_test_info()->name());
  }

  std::string Path(const std::string& name) const { return root_ + "/" + name; }

  Status Write(const std::string& name, std::string_view bytes,
               WritableFileOptions::Mode mode = WritableFileOptions::Mode::kCreateNew) {
    SKIPPR_ASSIGN_OR_RETURN(auto file, env_->OpenWritable(Path(name), {.mode = mode}));
    SKIPPR_RETURN_IF_ERROR(file->WriteAt(0, bytes));
    SKIPPR_RETURN_IF_ERROR(file->Sync());
    return file->Close();
  }

  std::string Read(const std::string& name) {
    Result<std::string> bytes = ReadWholeFile(*env_, Path(name));
    EXPECT_TRUE(bytes.ok()) << bytes.status().ToString();
    return bytes.ok() ? *bytes : "";
  }

  testing::TempDir dir_;
  std::unique_ptr<S3Env> s3_env_;
  Env* env_ = nullptr;
  std::string root_;
};

TEST_P(EnvConformance, WhatIsWrittenAndSyncedReadsBackWholeAndInRanges) {
  std::string bytes(7 << 20, '\0');  // over a part: uploaded in parts on S3
  std::mt19937_64 random(3);
  for (char& c : bytes) c = static_cast<char>(random());
  ASSERT_TRUE(Write("data.bin", bytes).ok());
  EXPECT_TRUE(Read("data.bin") == bytes);
  EXPECT_EQ(*env_->FileSize(Path("data.bin")), bytes.size());
  EXPECT_TRUE(*env_->FileExists(Path("data.bin")));
  EXPECT_FALSE(*env_->FileExists(Path("missing.bin")));

  auto file = env_->OpenRandomAccess(Path("data.bin"));
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ(*(*file)->Size(), bytes.size());
  std::string middle(1000, '\0');
  ASSERT_EQ(*(*file)->ReadAt(5'000'000, middle.data(), middle.size()), 1000u);
  EXPECT_TRUE(middle == bytes.substr(5'000'000, 1000));
  std::string tail(100, '\0');
  EXPECT_EQ(*(*file)->ReadAt(bytes.size() - 10, tail.data(), tail.size()),
            10u);                                                           // fewer at the end
  EXPECT_EQ(*(*file)->ReadAt(bytes.size(), tail.data(), tail.size()), 0u);  // none past it
  EXPECT_EQ(env_->OpenRandomAccess(Path("missing.bin")).status().code(), StatusCode::kNotFound);
}

TEST_P(EnvConformance, CreateNewRefusesAnExistingFileAndOpenExistingAFileThatIsNot) {
  ASSERT_TRUE(Write("once", "first").ok());
  EXPECT_EQ(env_->OpenWritable(Path("once"), {.mode = WritableFileOptions::Mode::kCreateNew})
                .status()
                .code(),
            StatusCode::kConflict);
  EXPECT_EQ(env_->OpenWritable(Path("never"), {.mode = WritableFileOptions::Mode::kOpenExisting})
                .status()
                .code(),
            StatusCode::kNotFound);
  // Opened existing, written over its start: the rest of it stays.
  ASSERT_TRUE(Write("once", "FI", WritableFileOptions::Mode::kOpenExisting).ok());
  EXPECT_EQ(Read("once"), "FIrst");
}

TEST_P(EnvConformance, ListingNamesFilesAndSubdirectoriesOneLevelDown) {
  ASSERT_TRUE(Write("a.json", "{}").ok());
  ASSERT_TRUE(Write("b.json", "{}").ok());
  ASSERT_TRUE(env_->CreateDirectory(Path("sub"), 0700).ok());
  ASSERT_TRUE(Write("sub/c.json", "{}").ok());
  auto names = env_->ListDirectory(root_);
  ASSERT_TRUE(names.ok()) << names.status().ToString();
  EXPECT_THAT(*names, UnorderedElementsAre("a.json", "b.json", "sub"));
  auto below = env_->ListDirectory(Path("sub"));
  ASSERT_TRUE(below.ok());
  EXPECT_THAT(*below, UnorderedElementsAre("c.json"));
  EXPECT_TRUE(env_->SyncDirectory(root_).ok());
  EXPECT_TRUE(env_->SyncFile(Path("a.json")).ok());
}

TEST_P(EnvConformance, RenamesReplaceOrRefuseAndRemovalsRemove) {
  ASSERT_TRUE(Write("from", "new").ok());
  ASSERT_TRUE(Write("to", "old").ok());
  ASSERT_TRUE(env_->RenameFile(Path("from"), Path("to")).ok());
  EXPECT_EQ(Read("to"), "new");
  EXPECT_FALSE(*env_->FileExists(Path("from")));

  ASSERT_TRUE(Write("other", "other").ok());
  EXPECT_EQ(env_->RenameFileNoReplace(Path("other"), Path("to")).code(), StatusCode::kConflict);
  EXPECT_EQ(Read("to"), "new");
  ASSERT_TRUE(env_->RenameFileNoReplace(Path("other"), Path("fresh")).ok());
  EXPECT_EQ(Read("fresh"), "other");

  ASSERT_TRUE(env_->RemoveFile(Path("fresh")).ok());
  EXPECT_FALSE(*env_->FileExists(Path("fresh")));
}

TEST_P(EnvConformance, AFileWrittenAtomicallyIsTheWholeNewContent) {
  ASSERT_TRUE(WriteFileAtomically(*env_, Path("metadata.json"), "{\"v\":1}").ok());
  ASSERT_TRUE(WriteFileAtomically(*env_, Path("metadata.json"), "{\"v\":2}").ok());
  EXPECT_EQ(Read("metadata.json"), "{\"v\":2}");
  auto names = env_->ListDirectory(root_);
  ASSERT_TRUE(names.ok());
  EXPECT_THAT(*names, UnorderedElementsAre("metadata.json")) << "no temporary file is left";
}

INSTANTIATE_TEST_SUITE_P(PosixAndS3, EnvConformance, ::testing::Values("posix", "s3"),
                         [](const auto& info) { return info.param; });

TEST(S3EnvOnly, LocksAreNotAvailableAndSayWhere) {
  testing::TempDir dir;
  auto env = S3Env::Open({}, MapEnvironment({{"AWS_EC2_METADATA_DISABLED", "true"}}), dir.path());
  ASSERT_TRUE(env.ok());
  auto lock = (*env)->LockFile("s3://b/pipeline/writer.lock", 0600);
  EXPECT_EQ(lock.status().code(), StatusCode::kNotSupported);
  EXPECT_THAT(lock.status().message(), ::testing::HasSubstr("lives in the store"));
  EXPECT_EQ((*env)->FileExists("/not/an/s3/uri").status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace skippr::aws
