#include "support/node_process.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

namespace skippr::testing {

namespace {

bool AcceptsConnections(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port));
  const bool connected = connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
  close(fd);
  return connected;
}

}  // namespace

bool NodeProcess::Launch(const std::string& log_directory, std::string* why_not) {
  if (!std::filesystem::exists(script)) {
    *why_not = script + " is missing: run scripts/setup.sh";
    return false;
  }
  const std::string log = log_directory + "/" + name + ".log";
  std::vector<char*> argv = {const_cast<char*>("node")};
  for (std::string& argument : arguments) argv.push_back(argument.data());
  argv.push_back(nullptr);
  const pid_t parent = getpid();
  // The death signal follows the thread that forks: only the main thread's lives as long as the
  // test process. A server restarted from another thread is stopped by its owner alone.
  const bool is_main_thread = gettid() == parent;
  pid = fork();
  if (pid == 0) {
    if (is_main_thread) prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlives the test
    if (getppid() != parent) _exit(1);
    const int out = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    dup2(out, 1);
    dup2(out, 2);
    execvp("node", argv.data());
    _exit(127);
  }
  for (int tries = 0; tries < 300; ++tries) {
    if (AcceptsConnections(port)) return true;
    if (waitpid(pid, nullptr, WNOHANG) == pid) {
      pid = -1;
      *why_not = name + " exited at start; see " + log;
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  *why_not = name + " did not accept connections within 30 s; see " + log;
  Stop();
  return false;
}

void NodeProcess::Stop() {
  if (pid <= 0) return;
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  pid = -1;
}

}  // namespace skippr::testing
