#include "e2e/process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

extern char** environ;

namespace skippr::testing {

namespace {
std::string ReadAll(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}
}  // namespace

RunningProcess StartProcess(const std::string& program, const std::vector<std::string>& args,
                            const ProcessOptions& options) {
  RunningProcess process;
  process.capture_ = std::make_unique<TempDir>();
  const std::string out_path =
      options.stdout_file.empty() ? process.capture_->path() + "/out" : options.stdout_file;
  const std::string err_path = process.capture_->path() + "/err";

  std::map<std::string, std::string> environment;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string text = *entry;
    const size_t equals = text.find('=');
    if (equals != std::string::npos) environment[text.substr(0, equals)] = text.substr(equals + 1);
  }
  for (const std::string& name : options.unset_env) environment.erase(name);
  for (const auto& [name, value] : options.set_env) environment[name] = value;
  std::vector<std::string> env_strings;
  for (const auto& [name, value] : environment) env_strings.push_back(name + "=" + value);
  std::vector<char*> envp;
  for (std::string& entry : env_strings) envp.push_back(entry.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_strings = {program};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& arg : argv_strings) argv.push_back(arg.data());
  argv.push_back(nullptr);

  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(std::string("fork failed: ") + std::strerror(errno));
  if (pid == 0) {
    const int out_fd = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int err_fd = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int null_fd = open("/dev/null", O_RDONLY);
    if (out_fd < 0 || err_fd < 0 || null_fd < 0) _exit(126);
    dup2(null_fd, STDIN_FILENO);
    dup2(out_fd, STDOUT_FILENO);
    dup2(err_fd, STDERR_FILENO);
    if (!options.working_dir.empty() && chdir(options.working_dir.c_str()) != 0) _exit(126);
    execve(program.c_str(), argv.data(), envp.data());
    _exit(127);
  }
  process.pid_ = pid;
  return process;
}

RunningProcess::~RunningProcess() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

void RunningProcess::Kill(int signal_number) const {
  if (pid_ > 0) kill(pid_, signal_number);
}

ProcessResult RunningProcess::Wait() {
  int wait_status = 0;
  struct rusage usage {};
  while (wait4(pid_, &wait_status, 0, &usage) < 0 && errno == EINTR) {
  }
  pid_ = -1;
  ProcessResult result;
  result.exit_code = WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : 128 + WTERMSIG(wait_status);
  result.peak_rss_bytes = static_cast<int64_t>(usage.ru_maxrss) * 1024;  // Linux: KiB
  result.out = ReadAll(capture_->path() + "/out");
  result.err = ReadAll(capture_->path() + "/err");
  return result;
}

ProcessResult RunProcess(const std::string& program, const std::vector<std::string>& args,
                         const ProcessOptions& options) {
  return StartProcess(program, args, options).Wait();
}

}  // namespace skippr::testing
