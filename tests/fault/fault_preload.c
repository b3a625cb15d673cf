// An LD_PRELOAD interposer for the e2e fault tests (tests/fault/fault_e2e_test.cpp), built only for
// tests. It covers the I/O that does not go through skipprd's Env (core/env.hpp) — LMDB's store
// files, SQLite's catalog, the Parquet files DuckDB writes — and the Env's own system calls too,
// one level lower: the real binary runs with it and fails or loses power exactly as a disk would
// make it.
//
// Settings (environment variables):
//   SKIPPR_FAULT_KIND    fsync_eio | enospc | short_writes   (optional)
//   SKIPPR_FAULT_PATH    fnmatch() patterns over absolute paths ('*' matches '/'), separated by
//                        ':', of the files the fault hits
//   SKIPPR_FAULT_AFTER   fsync_eio: matching fsync/fdatasync calls that succeed before they fail;
//                        enospc: bytes written to matching files before ENOSPC
//   SKIPPR_FAULT_ROOTS   ':'-separated directories whose files are tracked for a power cut: a
//                        kill(getpid(), SIGKILL) — skipprd's crash points and chaos mode — first
//                        puts every tracked file and directory back as a machine that lost power
//                        would find it, then kills:
//                          - bytes written since the file's last fsync/fdatasync are undone (writes
//                            in place get their old bytes back, appended bytes are truncated away;
//                            a file opened with O_TRUNC gets its old contents back);
//                          - names created since their directory's last fsync are removed, names
//                            removed or replaced since then come back (kept as hard links in
//                            SKIPPR_FAULT_TRASH, which must be on the same file system).
//                        Writes on O_SYNC/O_DSYNC descriptors are durable at once.
//   SKIPPR_FAULT_REPORT  a file each injected fault and the power cut append one line to
//
// Only descriptors opened while it is loaded are known; dup()ed descriptors and writes through
// mmap are not tracked (skipprd, LMDB without MDB_WRITEMAP, SQLite and DuckDB write with
// write/pwrite/writev). The real calls are made with syscall(), so nothing here resolves symbols
// or allocates before the allocator is up.
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

enum { kMaxFds = 65536, kMaxPaths = 2048, kPathBytes = 1024, kMaxInodes = 1024,
       kMaxNames = 4096, kMaxRoots = 8, kDirectBlock = 4096 };

enum FaultKind { kNoFault, kFsyncEio, kNoSpace, kShortWrites };

static struct {
  int kind;
  char pattern[kPathBytes];
  unsigned long long after;
  char roots[kMaxRoots][kPathBytes];
  int root_count;
  char trash[kPathBytes];
  char report[kPathBytes];
  int is_ready;
} settings;

// Per open descriptor: the path it was opened with (when tracked or matched), its flags.
struct PathSlot {
  int in_use;
  char path[kPathBytes];
  int open_flags;
  int is_tracked;  // under a root
  int is_matched;  // the fault's pattern matches
};
static struct PathSlot paths[kMaxPaths];
static short fd_slot[kMaxFds];  // 0: none, else slot index + 1

// Per inode with writes since its last sync.
struct Undo {
  struct Undo* next;  // newer first
  off_t offset;
  size_t length;
  char bytes[];
};
struct Inode {
  int in_use;
  dev_t dev;
  ino_t ino;
  int kept_fd;  // our own descriptor, without O_DIRECT, alive after a rename or unlink
  off_t durable_bytes;
  struct Undo* undo;
};
static struct Inode inodes[kMaxInodes];

// Directory entries changed since the directory's last fsync, oldest first.
enum NameKind { kCreated, kRestore };
struct NameChange {
  int kind;
  dev_t dir_dev;
  ino_t dir_ino;
  char path[kPathBytes];
  char trash[kPathBytes];  // kRestore: the hard link to put back at `path`
};
static struct NameChange names[kMaxNames];
static int name_count;
static unsigned long long trash_files;
static unsigned long long fault_count;  // syncs or bytes matched so far
static int has_overflowed;

static pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;

// ----- small helpers over raw system calls ------------------------------------------------------

static long RealOpen(int dirfd, const char* path, int flags, mode_t mode) {
  return syscall(SYS_openat, dirfd, path, flags, mode);
}
static int RealClose(int fd) { return (int)syscall(SYS_close, fd); }
static ssize_t RealPwrite(int fd, const void* data, size_t bytes, off_t offset) {
  return syscall(SYS_pwrite64, fd, data, bytes, offset);
}
static ssize_t RealPread(int fd, void* data, size_t bytes, off_t offset) {
  return syscall(SYS_pread64, fd, data, bytes, offset);
}
static int RealFstat(int fd, struct stat* info) { return (int)syscall(SYS_fstat, fd, info); }
static int RealStatAt(int dirfd, const char* path, struct stat* info, int flags) {
  return (int)syscall(SYS_newfstatat, dirfd, path, info, flags);
}

static void Report(const char* format, ...) {
  if (settings.report[0] == '\0') return;
  char line[2 * kPathBytes];
  va_list args;
  va_start(args, format);
  int length = vsnprintf(line, sizeof(line) - 1, format, args);
  va_end(args);
  if (length < 0) return;
  if (length > (int)sizeof(line) - 2) length = (int)sizeof(line) - 2;
  line[length++] = '\n';
  const int fd = (int)RealOpen(AT_FDCWD, settings.report, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return;
  (void)syscall(SYS_write, fd, line, (size_t)length);
  RealClose(fd);
}

static void CopyText(char* out, const char* text) {
  snprintf(out, kPathBytes, "%s", text == NULL ? "" : text);
}

__attribute__((constructor)) static void ReadSettings(void) {
  const char* kind = getenv("SKIPPR_FAULT_KIND");
  if (kind != NULL && strcmp(kind, "fsync_eio") == 0) settings.kind = kFsyncEio;
  if (kind != NULL && strcmp(kind, "enospc") == 0) settings.kind = kNoSpace;
  if (kind != NULL && strcmp(kind, "short_writes") == 0) settings.kind = kShortWrites;
  CopyText(settings.pattern, getenv("SKIPPR_FAULT_PATH"));
  const char* after = getenv("SKIPPR_FAULT_AFTER");
  settings.after = after == NULL ? 0 : strtoull(after, NULL, 10);
  CopyText(settings.trash, getenv("SKIPPR_FAULT_TRASH"));
  CopyText(settings.report, getenv("SKIPPR_FAULT_REPORT"));
  const char* roots = getenv("SKIPPR_FAULT_ROOTS");
  while (roots != NULL && *roots != '\0' && settings.root_count < kMaxRoots) {
    const char* end = strchr(roots, ':');
    const size_t length = end == NULL ? strlen(roots) : (size_t)(end - roots);
    if (length > 0 && length < kPathBytes) {
      memcpy(settings.roots[settings.root_count], roots, length);
      settings.roots[settings.root_count][length] = '\0';
      ++settings.root_count;
    }
    roots = end == NULL ? NULL : end + 1;
  }
  settings.is_ready = 1;
}

static int IsActive(void) {
  return settings.is_ready && (settings.kind != kNoFault || settings.root_count > 0);
}

// The absolute path of `path` opened relative to `dirfd`; 0 when it cannot be told.
static int Resolve(int dirfd, const char* path, char* out) {
  if (path == NULL) return 0;
  if (path[0] == '/') {
    if (strlen(path) >= kPathBytes) return 0;
    strcpy(out, path);
    return 1;
  }
  char base[kPathBytes];
  if (dirfd == AT_FDCWD) {
    if (syscall(SYS_getcwd, base, sizeof(base)) < 0) return 0;
  } else {
    char link[64];
    snprintf(link, sizeof(link), "/proc/self/fd/%d", dirfd);
    const long length = syscall(SYS_readlinkat, AT_FDCWD, link, base, sizeof(base) - 1);
    if (length <= 0) return 0;
    base[length] = '\0';
  }
  return snprintf(out, kPathBytes, "%s/%s", base, path) < kPathBytes;
}

static int IsUnderRoot(const char* path) {
  for (int i = 0; i < settings.root_count; ++i) {
    const size_t length = strlen(settings.roots[i]);
    if (strncmp(path, settings.roots[i], length) == 0 && (path[length] == '/' || path[length] == '\0')) {
      return 1;
    }
  }
  return 0;
}

// SKIPPR_FAULT_PATH may hold several patterns separated by ':'.
static int IsMatched(const char* path) {
  if (settings.kind == kNoFault) return 0;
  for (const char* pattern = settings.pattern; *pattern != '\0';) {
    const char* end = strchr(pattern, ':');
    const size_t length = end == NULL ? strlen(pattern) : (size_t)(end - pattern);
    char one[kPathBytes];
    if (length < sizeof(one)) {
      memcpy(one, pattern, length);
      one[length] = '\0';
      if (length > 0 && fnmatch(one, path, 0) == 0) return 1;
    }
    if (end == NULL) break;
    pattern = end + 1;
  }
  return 0;
}

static struct PathSlot* SlotOf(int fd) {
  if (fd < 0 || fd >= kMaxFds) return NULL;
  const int slot = __atomic_load_n(&fd_slot[fd], __ATOMIC_ACQUIRE);
  return slot == 0 ? NULL : &paths[slot - 1];
}

static void ForgetFd(int fd) {
  if (fd < 0 || fd >= kMaxFds) return;
  const int slot = __atomic_exchange_n(&fd_slot[fd], 0, __ATOMIC_ACQ_REL);
  if (slot != 0) paths[slot - 1].in_use = 0;
}

static void RememberFd(int fd, const char* path, int flags, int is_tracked, int is_matched) {
  if (fd < 0 || fd >= kMaxFds) return;
  ForgetFd(fd);
  for (int i = 0; i < kMaxPaths; ++i) {
    if (paths[i].in_use) continue;
    paths[i].in_use = 1;
    CopyText(paths[i].path, path);
    paths[i].open_flags = flags;
    paths[i].is_tracked = is_tracked;
    paths[i].is_matched = is_matched;
    __atomic_store_n(&fd_slot[fd], (short)(i + 1), __ATOMIC_RELEASE);
    return;
  }
  has_overflowed = 1;
}

// ----- the power-cut bookkeeping (mutex held) ------------------------------------------------------

static struct Inode* InodeOf(dev_t dev, ino_t ino) {
  for (int i = 0; i < kMaxInodes; ++i) {
    if (inodes[i].in_use && inodes[i].dev == dev && inodes[i].ino == ino) return &inodes[i];
  }
  return NULL;
}

static void DropInode(struct Inode* inode) {
  for (struct Undo* undo = inode->undo; undo != NULL;) {
    struct Undo* next = undo->next;
    free(undo);
    undo = next;
  }
  RealClose(inode->kept_fd);
  memset(inode, 0, sizeof(*inode));
}

// The inode of `fd`, tracked from now on if it was not (its size now is what is durable).
static struct Inode* TrackInode(int fd) {
  struct stat info;
  if (RealFstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) return NULL;
  struct Inode* inode = InodeOf(info.st_dev, info.st_ino);
  if (inode != NULL) return inode;
  for (int i = 0; i < kMaxInodes; ++i) {
    if (inodes[i].in_use) continue;
    char link[64];
    snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
    const int kept = (int)RealOpen(AT_FDCWD, link, O_RDWR | O_CLOEXEC, 0);
    if (kept < 0) break;
    inodes[i] = (struct Inode){1, info.st_dev, info.st_ino, kept, info.st_size, NULL};
    return &inodes[i];
  }
  has_overflowed = 1;
  return NULL;
}

// Keeps the bytes a write of [offset, offset + bytes) is about to replace below the durable size.
static void KeepOldBytes(struct Inode* inode, off_t offset, size_t bytes) {
  if (offset >= inode->durable_bytes) return;  // appended: truncated away at the power cut
  size_t length = bytes;
  if ((off_t)length > inode->durable_bytes - offset) length = (size_t)(inode->durable_bytes - offset);
  struct Undo* undo = malloc(sizeof(struct Undo) + length);
  if (undo == NULL) {
    has_overflowed = 1;
    return;
  }
  const ssize_t got = RealPread(inode->kept_fd, undo->bytes, length, offset);
  undo->offset = offset;
  undo->length = got < 0 ? 0 : (size_t)got;
  undo->next = inode->undo;
  inode->undo = undo;
}

static void RevertInode(struct Inode* inode) {
  (void)syscall(SYS_ftruncate, inode->kept_fd, inode->durable_bytes);
  for (struct Undo* undo = inode->undo; undo != NULL; undo = undo->next) {
    (void)RealPwrite(inode->kept_fd, undo->bytes, undo->length, undo->offset);
  }
}

static void MarkSynced(int fd) {
  struct stat info;
  if (RealFstat(fd, &info) != 0) return;
  if (S_ISDIR(info.st_mode)) {
    int kept = 0;
    for (int i = 0; i < name_count; ++i) {
      if (names[i].dir_dev == info.st_dev && names[i].dir_ino == info.st_ino) {
        if (names[i].kind == kRestore) (void)syscall(SYS_unlinkat, AT_FDCWD, names[i].trash, 0);
        continue;
      }
      if (kept != i) names[kept] = names[i];
      ++kept;
    }
    name_count = kept;
    return;
  }
  struct Inode* inode = InodeOf(info.st_dev, info.st_ino);
  if (inode != NULL) DropInode(inode);
}

static int DirectoryOf(const char* path, struct stat* info) {
  char directory[kPathBytes];
  CopyText(directory, path);
  char* slash = strrchr(directory, '/');
  if (slash == NULL) return 0;
  if (slash == directory) slash[1] = '\0';
  else *slash = '\0';
  return RealStatAt(AT_FDCWD, directory, info, 0) == 0;
}

static struct NameChange* AddName(int kind, const char* path) {
  struct stat directory;
  if (!DirectoryOf(path, &directory)) return NULL;
  if (name_count == kMaxNames) {
    has_overflowed = 1;
    return NULL;
  }
  struct NameChange* change = &names[name_count++];
  change->kind = kind;
  change->dir_dev = directory.st_dev;
  change->dir_ino = directory.st_ino;
  CopyText(change->path, path);
  change->trash[0] = '\0';
  return change;
}

// A name created since its directory's last fsync is not durable.
static int IsDurableName(const char* path) {
  for (int i = 0; i < name_count; ++i) {
    if (names[i].kind == kCreated && strcmp(names[i].path, path) == 0) return 0;
  }
  return 1;
}

// Before `path` goes away (unlink, or replaced by a rename): keep its file to put back.
static void KeepName(const char* path, const char* link_from) {
  if (!IsDurableName(path) || settings.trash[0] == '\0') return;
  struct NameChange* change = AddName(kRestore, path);
  if (change == NULL) return;
  if (snprintf(change->trash, kPathBytes, "%.900s/%llu", settings.trash, trash_files++) >= kPathBytes) {
    --name_count;
    return;
  }
  if (syscall(SYS_linkat, AT_FDCWD, link_from, AT_FDCWD, change->trash, 0) != 0) --name_count;
}

static void RemoveTree(const char* path) {
  if (syscall(SYS_unlinkat, AT_FDCWD, path, 0) == 0 || errno == ENOENT) return;
  const int fd = (int)RealOpen(AT_FDCWD, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
  if (fd < 0) return;
  char buffer[8192];
  long got;
  while ((got = syscall(SYS_getdents64, fd, buffer, sizeof(buffer))) > 0) {
    for (long at = 0; at < got;) {
      struct dirent64* entry = (struct dirent64*)(buffer + at);
      at += entry->d_reclen;
      if (strcmp(entry->d_name, ".") == 0 || strcmp(entry->d_name, "..") == 0) continue;
      char child[kPathBytes];
      if (snprintf(child, sizeof(child), "%s/%s", path, entry->d_name) < kPathBytes) RemoveTree(child);
    }
  }
  RealClose(fd);
  (void)syscall(SYS_unlinkat, AT_FDCWD, path, AT_REMOVEDIR);
}

static void PowerCut(void) {
  int files = 0;
  for (int i = 0; i < kMaxInodes; ++i) {
    if (!inodes[i].in_use) continue;
    RevertInode(&inodes[i]);
    ++files;
  }
  for (int i = name_count - 1; i >= 0; --i) {
    if (names[i].kind == kCreated) RemoveTree(names[i].path);
    else (void)syscall(SYS_renameat, AT_FDCWD, names[i].trash, AT_FDCWD, names[i].path);
  }
  Report("power_cut files=%d names=%d overflow=%d", files, name_count, has_overflowed);
}

// ----- faults ------------------------------------------------------------------------------------

// How many of `bytes` a write on `slot` may store (0 with *error set: it fails).
static size_t AllowedBytes(const struct PathSlot* slot, size_t bytes, int* error) {
  *error = 0;
  if (slot == NULL || !slot->is_matched || bytes == 0) return bytes;
  const int is_direct = (slot->open_flags & O_DIRECT) != 0;
  size_t allowed = bytes;
  if (settings.kind == kNoSpace) {
    pthread_mutex_lock(&mutex);
    const unsigned long long left = settings.after > fault_count ? settings.after - fault_count : 0;
    if (allowed > left) allowed = (size_t)left;
    if (is_direct && allowed < bytes) allowed -= allowed % kDirectBlock;
    fault_count += allowed;
    pthread_mutex_unlock(&mutex);
    if (allowed == 0) {
      Report("enospc %s", slot->path);
      *error = ENOSPC;
    }
  } else if (settings.kind == kShortWrites && bytes > 1) {
    allowed = bytes / 2;
    if (is_direct) allowed -= allowed % kDirectBlock;
    if (allowed == 0) allowed = bytes;
  }
  return allowed;
}

static int SyncFails(const struct PathSlot* slot) {
  if (slot == NULL || !slot->is_matched || settings.kind != kFsyncEio) return 0;
  pthread_mutex_lock(&mutex);
  const int fails = fault_count++ >= settings.after;
  pthread_mutex_unlock(&mutex);
  if (fails) Report("fsync_eio %s", slot->path);
  return fails;
}

// ----- interposed calls ----------------------------------------------------------------------------

static int OpenTracked(int dirfd, const char* path, int flags, mode_t mode) {
  char absolute[kPathBytes];
  if (!IsActive() || !Resolve(dirfd, path, absolute)) return (int)RealOpen(dirfd, path, flags, mode);
  const int is_tracked = IsUnderRoot(absolute);
  const int is_matched = IsMatched(absolute);
  if (!is_tracked && !is_matched) return (int)RealOpen(dirfd, path, flags, mode);
  pthread_mutex_lock(&mutex);
  struct stat before;
  const int existed = RealStatAt(AT_FDCWD, absolute, &before, 0) == 0;
  struct Inode* truncated = NULL;
  if (is_tracked && existed && (flags & O_TRUNC) && S_ISREG(before.st_mode) && before.st_size > 0) {
    const int old = (int)RealOpen(AT_FDCWD, absolute, O_RDONLY | O_CLOEXEC, 0);
    if (old >= 0) {
      truncated = TrackInode(old);
      if (truncated != NULL) KeepOldBytes(truncated, 0, (size_t)before.st_size);
      RealClose(old);
    }
  }
  const int fd = (int)RealOpen(dirfd, path, flags, mode);
  const int saved_errno = errno;
  if (fd >= 0) {
    if (is_tracked && !existed && (flags & O_CREAT)) AddName(kCreated, absolute);
    RememberFd(fd, absolute, flags, is_tracked, is_matched);
  }
  pthread_mutex_unlock(&mutex);
  errno = saved_errno;
  return fd;
}

static mode_t ModeOf(int flags, va_list args) {
  return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? (mode_t)va_arg(args, int) : 0;
}

EXPORT int open(const char* path, int flags, ...) {
  va_list args;
  va_start(args, flags);
  const mode_t mode = ModeOf(flags, args);
  va_end(args);
  return OpenTracked(AT_FDCWD, path, flags, mode);
}
EXPORT int open64(const char* path, int flags, ...) {
  va_list args;
  va_start(args, flags);
  const mode_t mode = ModeOf(flags, args);
  va_end(args);
  return OpenTracked(AT_FDCWD, path, flags, mode);
}
EXPORT int openat(int dirfd, const char* path, int flags, ...) {
  va_list args;
  va_start(args, flags);
  const mode_t mode = ModeOf(flags, args);
  va_end(args);
  return OpenTracked(dirfd, path, flags, mode);
}
EXPORT int openat64(int dirfd, const char* path, int flags, ...) {
  va_list args;
  va_start(args, flags);
  const mode_t mode = ModeOf(flags, args);
  va_end(args);
  return OpenTracked(dirfd, path, flags, mode);
}
EXPORT int __open_2(const char* path, int flags) { return OpenTracked(AT_FDCWD, path, flags, 0); }
EXPORT int __open64_2(const char* path, int flags) { return OpenTracked(AT_FDCWD, path, flags, 0); }
EXPORT int __openat_2(int dirfd, const char* path, int flags) {
  return OpenTracked(dirfd, path, flags, 0);
}
EXPORT int __openat64_2(int dirfd, const char* path, int flags) {
  return OpenTracked(dirfd, path, flags, 0);
}
EXPORT int creat(const char* path, mode_t mode) {
  return OpenTracked(AT_FDCWD, path, O_WRONLY | O_CREAT | O_TRUNC, mode);
}
EXPORT int creat64(const char* path, mode_t mode) { return creat(path, mode); }

EXPORT int close(int fd) {
  ForgetFd(fd);
  return RealClose(fd);
}

// The offset a write() at the file position of `fd` goes to.
static off_t CurrentOffset(int fd, const struct PathSlot* slot) {
  if (slot->open_flags & O_APPEND) {
    struct stat info;
    return RealFstat(fd, &info) == 0 ? info.st_size : 0;
  }
  return (off_t)syscall(SYS_lseek, fd, 0, SEEK_CUR);
}

// Runs one write of `bytes` at `offset` (-1: the file position) with the bookkeeping of a tracked
// descriptor around it.
static ssize_t TrackedWrite(int fd, struct PathSlot* slot, off_t offset, size_t bytes,
                            ssize_t (*write_call)(int, off_t, size_t, void*), void* context) {
  int error = 0;
  const size_t allowed = AllowedBytes(slot, bytes, &error);
  if (error != 0) {
    errno = error;
    return -1;
  }
  if (slot == NULL || !slot->is_tracked) return write_call(fd, offset, allowed, context);
  pthread_mutex_lock(&mutex);
  const int is_sync = (slot->open_flags & (O_SYNC | O_DSYNC)) != 0;
  if (!is_sync) {
    struct Inode* inode = TrackInode(fd);
    if (inode != NULL) KeepOldBytes(inode, offset >= 0 ? offset : CurrentOffset(fd, slot), allowed);
  }
  const ssize_t written = write_call(fd, offset, allowed, context);
  const int saved_errno = errno;
  pthread_mutex_unlock(&mutex);
  errno = saved_errno;
  return written;
}

static ssize_t PlainWrite(int fd, off_t offset, size_t bytes, void* data) {
  if (offset < 0) return syscall(SYS_write, fd, data, bytes);
  return RealPwrite(fd, data, bytes, offset);
}

EXPORT ssize_t write(int fd, const void* data, size_t bytes) {
  struct PathSlot* slot = SlotOf(fd);
  if (slot == NULL) return syscall(SYS_write, fd, data, bytes);
  return TrackedWrite(fd, slot, -1, bytes, PlainWrite, (void*)data);
}
EXPORT ssize_t pwrite(int fd, const void* data, size_t bytes, off_t offset) {
  struct PathSlot* slot = SlotOf(fd);
  if (slot == NULL) return RealPwrite(fd, data, bytes, offset);
  return TrackedWrite(fd, slot, offset, bytes, PlainWrite, (void*)data);
}
EXPORT ssize_t pwrite64(int fd, const void* data, size_t bytes, off_t offset) {
  return pwrite(fd, data, bytes, offset);
}

struct Vectors {
  const struct iovec* iov;
  int count;
};

// A vectored write cut to `bytes` (the fault may shorten it).
static ssize_t VectorWrite(int fd, off_t offset, size_t bytes, void* context) {
  const struct Vectors* vectors = context;
  struct iovec cut[IOV_MAX];
  int count = 0;
  for (int i = 0; i < vectors->count && count < IOV_MAX && bytes > 0; ++i) {
    cut[count] = vectors->iov[i];
    if (cut[count].iov_len > bytes) cut[count].iov_len = bytes;
    bytes -= cut[count].iov_len;
    ++count;
  }
  if (offset < 0) return syscall(SYS_writev, fd, cut, count);
  return syscall(SYS_pwritev, fd, cut, count, (unsigned long)offset, 0UL);
}

static size_t TotalBytes(const struct iovec* iov, int count) {
  size_t total = 0;
  for (int i = 0; i < count; ++i) total += iov[i].iov_len;
  return total;
}

EXPORT ssize_t writev(int fd, const struct iovec* iov, int count) {
  struct PathSlot* slot = SlotOf(fd);
  if (slot == NULL) return syscall(SYS_writev, fd, iov, count);
  struct Vectors vectors = {iov, count};
  return TrackedWrite(fd, slot, -1, TotalBytes(iov, count), VectorWrite, &vectors);
}
EXPORT ssize_t pwritev(int fd, const struct iovec* iov, int count, off_t offset) {
  struct PathSlot* slot = SlotOf(fd);
  if (slot == NULL) return syscall(SYS_pwritev, fd, iov, count, (unsigned long)offset, 0UL);
  struct Vectors vectors = {iov, count};
  return TrackedWrite(fd, slot, offset, TotalBytes(iov, count), VectorWrite, &vectors);
}
EXPORT ssize_t pwritev64(int fd, const struct iovec* iov, int count, off_t offset) {
  return pwritev(fd, iov, count, offset);
}

static int TrackedTruncate(int fd, off_t size) {
  struct PathSlot* slot = SlotOf(fd);
  if (slot == NULL || !slot->is_tracked) return (int)syscall(SYS_ftruncate, fd, size);
  pthread_mutex_lock(&mutex);
  struct Inode* inode = TrackInode(fd);
  if (inode != NULL && size < inode->durable_bytes) {
    KeepOldBytes(inode, size, (size_t)(inode->durable_bytes - size));
  }
  const int rc = (int)syscall(SYS_ftruncate, fd, size);
  const int saved_errno = errno;
  pthread_mutex_unlock(&mutex);
  errno = saved_errno;
  return rc;
}
EXPORT int ftruncate(int fd, off_t size) { return TrackedTruncate(fd, size); }
EXPORT int ftruncate64(int fd, off_t size) { return TrackedTruncate(fd, size); }

static int TrackedSync(int fd, long call) {
  struct PathSlot* slot = SlotOf(fd);
  if (SyncFails(slot)) {
    // What Linux does with pages it could not write: drops them (and marks them clean).
    if (slot->is_tracked) {
      pthread_mutex_lock(&mutex);
      struct stat info;
      struct Inode* inode = RealFstat(fd, &info) == 0 ? InodeOf(info.st_dev, info.st_ino) : NULL;
      if (inode != NULL) {
        RevertInode(inode);
        DropInode(inode);
      }
      pthread_mutex_unlock(&mutex);
    }
    errno = EIO;
    return -1;
  }
  const int rc = (int)syscall(call, fd);
  if (rc != 0 || settings.root_count == 0) return rc;
  pthread_mutex_lock(&mutex);
  MarkSynced(fd);
  pthread_mutex_unlock(&mutex);
  return rc;
}
EXPORT int fsync(int fd) { return TrackedSync(fd, SYS_fsync); }
EXPORT int fdatasync(int fd) { return TrackedSync(fd, SYS_fdatasync); }

// Names: creations, removals and renames under a root.
static int TrackedUnlink(int dirfd, const char* path, int flags) {
  char absolute[kPathBytes];
  if (!IsActive() || settings.root_count == 0 || !Resolve(dirfd, path, absolute) ||
      !IsUnderRoot(absolute)) {
    return (int)syscall(SYS_unlinkat, dirfd, path, flags);
  }
  pthread_mutex_lock(&mutex);
  if (!(flags & AT_REMOVEDIR)) KeepName(absolute, absolute);
  const int rc = (int)syscall(SYS_unlinkat, dirfd, path, flags);
  const int saved_errno = errno;
  if (rc != 0 && !(flags & AT_REMOVEDIR) && name_count > 0 && names[name_count - 1].kind == kRestore &&
      strcmp(names[name_count - 1].path, absolute) == 0) {
    (void)syscall(SYS_unlinkat, AT_FDCWD, names[--name_count].trash, 0);
  }
  pthread_mutex_unlock(&mutex);
  errno = saved_errno;
  return rc;
}
EXPORT int unlink(const char* path) { return TrackedUnlink(AT_FDCWD, path, 0); }
EXPORT int unlinkat(int dirfd, const char* path, int flags) {
  return TrackedUnlink(dirfd, path, flags);
}
EXPORT int rmdir(const char* path) { return TrackedUnlink(AT_FDCWD, path, AT_REMOVEDIR); }
EXPORT int remove(const char* path) {
  struct stat info;
  if (RealStatAt(AT_FDCWD, path, &info, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(info.st_mode)) {
    return rmdir(path);
  }
  return unlink(path);
}

static int TrackedRename(int from_dirfd, const char* from, int to_dirfd, const char* to,
                         unsigned int flags) {
  char from_path[kPathBytes];
  char to_path[kPathBytes];
  if (!IsActive() || settings.root_count == 0 || !Resolve(from_dirfd, from, from_path) ||
      !Resolve(to_dirfd, to, to_path) || !(IsUnderRoot(from_path) || IsUnderRoot(to_path))) {
    return (int)syscall(SYS_renameat2, from_dirfd, from, to_dirfd, to, flags);
  }
  pthread_mutex_lock(&mutex);
  struct stat target;
  const int replaces = RealStatAt(AT_FDCWD, to_path, &target, AT_SYMLINK_NOFOLLOW) == 0;
  const int from_is_durable = IsDurableName(from_path);
  if (replaces) KeepName(to_path, to_path);
  const int rc = (int)syscall(SYS_renameat2, from_dirfd, from, to_dirfd, to, flags);
  const int saved_errno = errno;
  if (rc == 0) {
    if (!replaces) AddName(kCreated, to_path);
    if (from_is_durable) KeepName(from_path, to_path);
  }
  pthread_mutex_unlock(&mutex);
  errno = saved_errno;
  return rc;
}
EXPORT int rename(const char* from, const char* to) {
  return TrackedRename(AT_FDCWD, from, AT_FDCWD, to, 0);
}
EXPORT int renameat(int from_dirfd, const char* from, int to_dirfd, const char* to) {
  return TrackedRename(from_dirfd, from, to_dirfd, to, 0);
}
EXPORT int renameat2(int from_dirfd, const char* from, int to_dirfd, const char* to,
                     unsigned int flags) {
  return TrackedRename(from_dirfd, from, to_dirfd, to, flags);
}

static int TrackedCreateName(const char* path, long result) {
  char absolute[kPathBytes];
  if (result == 0 && IsActive() && settings.root_count > 0 && Resolve(AT_FDCWD, path, absolute) &&
      IsUnderRoot(absolute)) {
    pthread_mutex_lock(&mutex);
    AddName(kCreated, absolute);
    pthread_mutex_unlock(&mutex);
  }
  return (int)result;
}
EXPORT int mkdir(const char* path, mode_t mode) {
  return TrackedCreateName(path, syscall(SYS_mkdirat, AT_FDCWD, path, mode));
}
EXPORT int link(const char* from, const char* to) {
  return TrackedCreateName(to, syscall(SYS_linkat, AT_FDCWD, from, AT_FDCWD, to, 0));
}

EXPORT int kill(pid_t pid, int signal_number) {
  if (signal_number == SIGKILL && (pid == getpid() || pid == 0) && settings.root_count > 0) {
    pthread_mutex_lock(&mutex);  // never released: no other thread writes a tracked file again
    PowerCut();
  }
  return (int)syscall(SYS_kill, pid, signal_number);
}
