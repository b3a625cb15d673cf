#include "support/postgres_server.hpp"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <pwd.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "support/loopback.hpp"

namespace skippr::testing {

namespace fs = std::filesystem;

namespace {

std::string FindBinDirectory() {
  std::string best;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator("/usr/lib/postgresql", error)) {
    const std::string bin = entry.path().string() + "/bin";
    if (fs::exists(bin + "/initdb") && bin > best) best = bin;
  }
  return best;
}

std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Single quotes for sh.
std::string ShellQuote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  return quoted + "'";
}

}  // namespace

std::pair<int, std::string> RunShell(const std::string& command) {
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return {-1, "popen failed"};
  std::string output;
  char buffer[4096];
  size_t n = 0;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) output.append(buffer, n);
  return {pclose(pipe), output};
}

std::unique_ptr<PostgresServer> PostgresServer::Start(const PostgresServerOptions& options,
                                                      std::string* why_not) {
  const std::string bin = FindBinDirectory();
  if (bin.empty()) {
    *why_not = "PostgreSQL is not installed (/usr/lib/postgresql/*/bin/initdb): run scripts/setup.sh";
    return nullptr;
  }
  auto server = std::unique_ptr<PostgresServer>(new PostgresServer(bin, options));
  if (!server->Init(why_not)) return nullptr;
  return server;
}

PostgresServer::PostgresServer(std::string bin, PostgresServerOptions options)
    : bin_(std::move(bin)), data_(dir_.Sub("data")), options_(std::move(options)) {}

PostgresServer::~PostgresServer() {
  if (is_running_) RunShell(As() + bin_ + "/pg_ctl -D " + data_ + " -m immediate -w stop");
}

// Run from the server's directory: the postgres user may not enter the test's working directory
// (a checkout under a private mktemp -d), and its programs complain on stderr when they cannot.
std::string PostgresServer::As() const {
  return "cd " + ShellQuote(dir_.path()) + " && " + (run_as_postgres_ ? "runuser -u postgres -- " : "");
}

std::string PostgresServer::uri(const std::string& database) const {
  const std::string credentials =
      options_.password.empty() ? "skippr" : "skippr:" + options_.password;
  return fmt::format("postgresql://{}@127.0.0.1:{}/{}", credentials, port_, database);
}

std::pair<int, std::string> PostgresServer::Psql(const std::string& sql,
                                                 const std::string& database) const {
  // Over the Unix socket in the test directory, where the superuser is trusted.
  return RunShell(fmt::format("{}psql -X -q -v ON_ERROR_STOP=1 -A -t -h {} -p {} -U skippr -d {} -c {}",
                              As(), dir_.path(), port_, database, ShellQuote(sql)));
}

std::string PostgresServer::PsqlOrFail(const std::string& sql, const std::string& database) const {
  auto [status, output] = Psql(sql, database);
  if (status != 0) ADD_FAILURE() << "psql failed (" << status << "): " << output << "\nSQL: " << sql;
  return output;
}

bool PostgresServer::Init(std::string* why_not) {
  if (geteuid() == 0) {
    const passwd* postgres = getpwnam("postgres");
    if (postgres == nullptr) {
      *why_not = "running as root and there is no postgres user to run PostgreSQL as";
      return false;
    }
    if (chown(dir_.path().c_str(), postgres->pw_uid, postgres->pw_gid) != 0) {
      *why_not = "cannot hand the test directory to the postgres user";
      return false;
    }
    run_as_postgres_ = true;
  }
  std::string auth = "-A trust";
  if (!options_.password.empty()) {
    const std::string password_file = dir_.Sub("password");
    std::ofstream(password_file) << options_.password << "\n";
    if (run_as_postgres_) {
      const passwd* postgres = getpwnam("postgres");
      if (chown(password_file.c_str(), postgres->pw_uid, postgres->pw_gid) != 0) {
        *why_not = "cannot hand the password file to the postgres user";
        return false;
      }
    }
    auth = "--auth-local=trust --auth-host=scram-sha-256 --pwfile=" + password_file;
  }
  if (!MakeCluster("-U skippr -E UTF8 --no-sync " + auth, options_.password, why_not)) {
    return false;
  }
  port_ = FreeLoopbackPort();
  std::string settings = "-c fsync=off";
  if (options_.tls_only) {
    if (!MakeCertificates(why_not)) return false;
    settings += fmt::format(" -c ssl=on -c ssl_cert_file={} -c ssl_key_file={}",
                            dir_.Sub("server.crt"), dir_.Sub("server.key"));
    auto [hba_status, hba_output] =
        RunShell(As() + "sed -i 's/^host /hostssl /' " + data_ + "/pg_hba.conf");
    if (hba_status != 0) {
      *why_not = "cannot make pg_hba.conf TLS-only: " + hba_output;
      return false;
    }
  }
  if (options_.logical_replication) {
    settings += " -c wal_level=logical -c max_replication_slots=10 -c max_wal_senders=10";
  }
  auto [start_status, start_output] = RunShell(fmt::format(
      "{}{}/pg_ctl -D {} -l {}/server.log -w -t 60 -o '-p {} -k {} -c listen_addresses=127.0.0.1 "
      "{}' start",
      As(), bin_, data_, dir_.path(), port_, dir_.path(), settings));
  if (start_status != 0) {
    *why_not = "pg_ctl start failed: " + start_output + ReadWholeFile(dir_.Sub("server.log"));
    return false;
  }
  is_running_ = true;
  return true;
}

// initdb costs a second and a half of CPU, and every gtest test runs in a process of its own,
// so each suite's test would pay it. The first server with given initdb arguments leaves a copy
// of its fresh cluster in the temporary directory; the next ones copy that (a tenth of the time).
// The copy appears by a rename, whole or not at all; its name holds the PostgreSQL binaries, the
// arguments and the password, so a cluster never serves other settings.
bool PostgresServer::MakeCluster(const std::string& initdb_arguments,
                                 const std::string& password, std::string* why_not) {
  // The password file's path (last) differs from server to server; the cluster keeps its content.
  std::string key = bin_ + " " + initdb_arguments.substr(0, initdb_arguments.find("--pwfile="));
  key += " password " + password;
  const std::string template_dir =
      (fs::temp_directory_path() /
       fmt::format("skippr-postgres-cluster-{}-{:016x}", geteuid(), std::hash<std::string>{}(key)))
          .string();
  if (fs::exists(template_dir)) {
    auto [copy_status, copy_output] =
        RunShell(As() + "cp -a " + ShellQuote(template_dir) + " " + ShellQuote(data_));
    if (copy_status == 0) return true;
    // Fall through to initdb: a template that cannot be copied is not a reason to fail.
    RunShell(As() + "rm -rf " + ShellQuote(data_));
  }
  auto [init_status, init_output] =
      RunShell(As() + bin_ + "/initdb -D " + data_ + " " + initdb_arguments);
  if (init_status != 0) {
    *why_not = "initdb failed: " + init_output;
    return false;
  }
  const std::string staged = fmt::format("{}.{}.tmp", template_dir, getpid());
  RunShell(As() + "cp -a " + ShellQuote(data_) + " " + ShellQuote(staged) + " && mv -T " +
           ShellQuote(staged) + " " + ShellQuote(template_dir) + " || rm -rf " +
           ShellQuote(staged));
  return true;
}

bool PostgresServer::GiveToPostgres(const std::string& path, std::string* why_not) {
  if (!run_as_postgres_) return true;
  const passwd* postgres = getpwnam("postgres");
  if (postgres == nullptr || chown(path.c_str(), postgres->pw_uid, postgres->pw_gid) != 0) {
    *why_not = "cannot hand " + path + " to the postgres user";
    return false;
  }
  return true;
}

bool PostgresServer::MakeCertificates(std::string* why_not) {
  const std::string at = dir_.path();
  const std::string commands = fmt::format(
      "cd {0} && openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 "
      "-subj '/CN=skippr test CA' && "
      "openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr "
      "-subj '/CN=localhost' && "
      "printf 'subjectAltName=DNS:localhost' > san.ext && "
      "openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out server.crt "
      "-days 2 -extfile san.ext && "
      "openssl req -x509 -newkey rsa:2048 -nodes -keyout other_ca.key -out other_ca.crt -days 2 "
      "-subj '/CN=another CA' && chmod 600 server.key",
      at);
  auto [status, output] = RunShell(commands);
  if (status != 0) {
    *why_not = "generating the test certificates failed (openssl): " + output;
    return false;
  }
  return GiveToPostgres(dir_.Sub("server.key"), why_not) &&
         GiveToPostgres(dir_.Sub("server.crt"), why_not);
}

}  // namespace skippr::testing
