// A throwaway PostgreSQL server from Debian's packages (initdb in a temporary directory, a free
// loopback port), run as the `postgres` user when the tests run as root (PostgreSQL refuses
// root), stopped when destroyed. The fresh cluster of each set of initdb arguments is kept, once,
// as $TMPDIR/skippr-postgres-cluster-<uid>-<hash> and copied by the next server that needs it. Tests that need PostgreSQL fail, not skip, when it cannot start:
// scripts/setup.sh installs it.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "support/temp_dir.hpp"

namespace skippr::testing {

struct PostgresServerOptions {
  // wal_level=logical with room for replication slots and senders (CDC tests).
  bool logical_replication = false;
  // Empty: trust on loopback. Otherwise scram-sha-256 password authentication on loopback for
  // every user, the superuser `skippr` having this password.
  std::string password;
  // TLS only: a CA and a server certificate for the name localhost are generated (openssl),
  // and every loopback connection must use TLS (pg_hba.conf `hostssl`).
  bool tls_only = false;
};

class PostgresServer {
 public:
  // nullptr and `why_not` when the server cannot be started.
  static std::unique_ptr<PostgresServer> Start(const PostgresServerOptions& options,
                                               std::string* why_not);
  ~PostgresServer();
  PostgresServer(const PostgresServer&) = delete;
  PostgresServer& operator=(const PostgresServer&) = delete;

  int port() const { return port_; }
  // The directory of the server's programs (pg_ctl, pg_recvlogical, ...).
  const std::string& bin() const { return bin_; }
  const std::string& password() const { return options_.password; }
  // With tls_only: the CA that signed the server's certificate, and one that did not.
  std::string ca_file() const { return dir_.Sub("ca.crt"); }
  std::string other_ca_file() const { return dir_.Sub("other_ca.crt"); }
  // postgresql://skippr[:password]@127.0.0.1:<port>/<database>
  std::string uri(const std::string& database = "postgres") const;
  // Runs SQL through psql as the superuser; the exit status and everything it printed.
  std::pair<int, std::string> Psql(const std::string& sql,
                                   const std::string& database = "postgres") const;
  // As Psql, failing the calling test (ADD_FAILURE) when psql fails; returns its output.
  std::string PsqlOrFail(const std::string& sql, const std::string& database = "postgres") const;

 private:
  explicit PostgresServer(std::string bin, PostgresServerOptions options);
  bool Init(std::string* why_not);
  bool MakeCluster(const std::string& initdb_arguments, const std::string& password,
                   std::string* why_not);
  bool MakeCertificates(std::string* why_not);
  bool GiveToPostgres(const std::string& path, std::string* why_not);
  std::string As() const;

  TempDir dir_;
  std::string bin_;
  std::string data_;
  PostgresServerOptions options_;
  int port_ = 0;
  bool run_as_postgres_ = false;
  bool is_running_ = false;
};

// Runs `command` with sh; its exit status and its output (stdout and stderr).
std::pair<int, std::string> RunShell(const std::string& command);

// A test suite's PostgreSQL: one server for the suite (started before its first test with
// `Suite::ServerOptions()`, stopped after its last), one fresh database per test (dropped after it,
// with the replication slots made in it). A suite derives as `class S : public PostgresSuite<S>`.
template <typename Suite>
class PostgresSuite : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = PostgresServer::Start(Suite::ServerOptions(), &why_not_).release();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    if (server_ == nullptr) FAIL() << why_not_;
    database_ = "test_" + std::to_string(counter_++);
    server_->PsqlOrFail("CREATE DATABASE " + database_);
  }
  void TearDown() override {
    if (server_ == nullptr) return;
    server_->Psql("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE "
                  "database = '" + database_ + "'");
    server_->Psql("DROP DATABASE IF EXISTS " + database_ + " WITH (FORCE)");
  }
  // SQL in the test's database; a failure fails the test.
  std::string Sql(const std::string& sql) { return server_->PsqlOrFail(sql, database_); }

  static inline PostgresServer* server_ = nullptr;
  static inline std::string why_not_;
  static inline int counter_ = 0;
  std::string database_;
};

}  // namespace skippr::testing
