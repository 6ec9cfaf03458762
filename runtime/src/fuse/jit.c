/* Compiling generated source and loading it (codegen.h).
 *
 * The compiler is the one CMake built the runtime with (RT_CODEGEN_CC), or
 * TORCHNEURON_CC. It runs with the kernels' floating-point flags: ISO C11
 * (so no contraction of a multiply and an add; -ffp-contract=off says so
 * for compilers whose default differs), -fno-trapping-math,
 * -fno-math-errno, -O2 with the vectoriser, and the -march of the ISA level the process runs
 * at (the kernels' RT_SIMD_* clones are compiled for the same levels).
 *
 * The shared object is cached under TORCHNEURON_CACHE_DIR (default
 * ~/.cache/torchneuron), in kernels/, a directory created readable and
 * writable by its owner only and used only when it is owned by this user
 * and writable by no one else. An entry is named by a 128-bit hash of the
 * source, the compiler's identity (path, size and modification time of
 * its file, and the version CMake found for the default one) and the
 * flags. It is written to a temporary name and renamed into place, so
 * concurrent processes never see a partial entry. The file ends with a
 * trailer: a magic, the key, the payload's length and a checksum over key
 * and payload. The loader reads the whole file, checks the trailer, and
 * only then hands the verified bytes to dlopen through a memory file, so a
 * truncated or garbled entry is recompiled, never loaded. With
 * TORCHNEURON_DISK_CACHE=0 the object is compiled in a private temporary
 * directory, loaded and deleted.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>
#include "cpu_isa.h"
#include "fuse/codegen.h"
#include "internal.h"

extern char **environ;

#ifndef RT_CODEGEN_CC
#define RT_CODEGEN_CC "cc"
#endif
#ifndef RT_CODEGEN_CC_VERSION
#define RT_CODEGEN_CC_VERSION ""
#endif

#define TRAILER_MAGIC "TNGENSO1"
#define MAX_OBJECT_BYTES (64u << 20)

typedef struct trailer {
  char magic[8];
  uint64_t key[2];
  uint64_t length;
  uint64_t checksum;
} trailer;

void rt_jit_hash(const void *data, size_t len, uint64_t h[2]) {
  const unsigned char *p = data;
  uint64_t a = 0xcbf29ce484222325ull, b = 0x9e3779b97f4a7c15ull;
  for (size_t i = 0; i < len; i++) {
    a = (a ^ p[i]) * 0x100000001b3ull; /* FNV-1a */
    b = (b + p[i]) * 0xff51afd7ed558ccdull;
    b ^= b >> 29;
  }
  b ^= len;
  b *= 0xc4ceb9fe1a85ec53ull;
  b ^= b >> 32;
  h[0] = a;
  h[1] = b;
}

static uint64_t checksum(const uint64_t key[2], const char *data, size_t len) {
  uint64_t h[2], k[2];
  rt_jit_hash(data, len, h);
  rt_jit_hash(key, 2 * sizeof key[0], k);
  return h[0] ^ (h[1] * 31) ^ k[0];
}

static void reason(char *why, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void reason(char *why, size_t len, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, len, fmt, ap);
  va_end(ap);
}

/* The compiler's file: cc itself when it names a path, else found on PATH. */
static int find_compiler(const char *cc, char *path, size_t len) {
  if (strchr(cc, '/')) {
    snprintf(path, len, "%s", cc);
    return access(path, X_OK) == 0;
  }
  const char *dirs = getenv("PATH");
  if (!dirs) dirs = "/usr/bin:/bin";
  while (*dirs) {
    const char *end = strchr(dirs, ':');
    size_t n = end ? (size_t)(end - dirs) : strlen(dirs);
    if (n && (size_t)snprintf(path, len, "%.*s/%s", (int)n, dirs, cc) < len && access(path, X_OK) == 0) return 1;
    dirs += n + (end ? 1 : 0);
  }
  return 0;
}

/* The flags of level isa, NULL-terminated into flags (at most 12). */
static int compile_flags(int32_t isa, const char **flags) {
  int n = 0;
  flags[n++] = "-std=c11";
  /* -O2 with the vectoriser (dynamic cost model): the loops of -O3 at
   * 0.07 s of compiler CPU per kernel instead of 0.11, as fast. No flag
   * here changes a result; the floating-point ones are the kernels'. */
  flags[n++] = "-O2";
  flags[n++] = "-ftree-vectorize";
  flags[n++] = "-fvect-cost-model=dynamic";
  flags[n++] = "-ffp-contract=off";
  flags[n++] = "-fno-trapping-math";
  flags[n++] = "-fno-math-errno";
  flags[n++] = "-fPIC";
  flags[n++] = "-shared";
  flags[n++] = "-w";
#if defined(__x86_64__)
  if (isa == NRT_ISA_AVX512) {
    flags[n++] = "-march=x86-64-v4";
    /* All float32: no 16-bit table gathers, which made the kernels keep
     * 256-bit vectors (see runtime/CMakeLists.txt). */
    flags[n++] = "-mprefer-vector-width=512";
  } else if (isa == NRT_ISA_AVX2) {
    flags[n++] = "-march=x86-64-v3";
  } else {
    flags[n++] = "-march=x86-64";
  }
#else
  (void)isa;
#endif
  flags[n] = NULL;
  return n;
}

/* The directory of the cache, created if missing (0700); 0 when it is not
 * usable (then why says so). */
static int cache_directory(char *dir, size_t len, char *why, size_t why_len) {
  const char *base = getenv("TORCHNEURON_CACHE_DIR");
  char root[PATH_MAX];
  if (base && *base) {
    snprintf(root, sizeof root, "%s", base);
  } else {
    const char *home = getenv("HOME");
    if (!home || !*home) {
      reason(why, why_len, "no cache directory (neither TORCHNEURON_CACHE_DIR nor HOME is set)");
      return 0;
    }
    char dot[PATH_MAX];
    snprintf(dot, sizeof dot, "%s/.cache", home);
    if (mkdir(dot, 0700) && errno != EEXIST) {
      reason(why, why_len, "cannot create %s: %s", dot, strerror(errno));
      return 0;
    }
    snprintf(root, sizeof root, "%s/.cache/torchneuron", home);
  }
  if (mkdir(root, 0700) && errno != EEXIST) {
    reason(why, why_len, "cannot create the cache directory %s: %s", root, strerror(errno));
    return 0;
  }
  if ((size_t)snprintf(dir, len, "%s/kernels", root) >= len) {
    reason(why, why_len, "cache directory path too long");
    return 0;
  }
  if (mkdir(dir, 0700) && errno != EEXIST) {
    reason(why, why_len, "cannot create the cache directory %s: %s", dir, strerror(errno));
    return 0;
  }
  struct stat st;
  if (lstat(dir, &st) || !S_ISDIR(st.st_mode)) {
    reason(why, why_len, "%s is not a directory", dir);
    return 0;
  }
  if (st.st_uid != getuid() || (st.st_mode & 022)) {
    reason(why, why_len, "%s is not owned by this user alone (owner or mode); not using it", dir);
    return 0;
  }
  return 1;
}

/* Reads path, verifies its trailer against key, and loads its payload:
 * the handle, or NULL (why says why; *present 0 when there is no file). */
static void *load_verified(const char *path, const uint64_t key[2], int *present, char *why, size_t why_len) {
  *present = 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    if (errno != ENOENT) *present = 1;
    reason(why, why_len, "cannot open %s: %s", path, strerror(errno));
    return NULL;
  }
  *present = 1;
  struct stat st;
  if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_uid != getuid() || (st.st_mode & 022) ||
      st.st_size < (off_t)sizeof(trailer) || st.st_size > (off_t)MAX_OBJECT_BYTES) {
    close(fd);
    reason(why, why_len, "%s is not a cache entry of this user (type, owner, mode or size)", path);
    return NULL;
  }
  size_t size = (size_t)st.st_size;
  char *data = malloc(size);
  size_t got = 0;
  while (data && got < size) {
    ssize_t n = read(fd, data + got, size - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += (size_t)n;
  }
  close(fd);
  if (!data || got != size) {
    free(data);
    reason(why, why_len, "cannot read %s", path);
    return NULL;
  }
  trailer tr;
  memcpy(&tr, data + size - sizeof tr, sizeof tr);
  size_t length = size - sizeof tr;
  if (memcmp(tr.magic, TRAILER_MAGIC, 8) || tr.key[0] != key[0] || tr.key[1] != key[1] ||
      tr.length != length || tr.checksum != checksum(key, data, length)) {
    free(data);
    reason(why, why_len, "%s fails its checksum (truncated, corrupt or foreign)", path);
    return NULL;
  }
  /* The verified bytes, not the file (which could change meanwhile). */
  int mfd = memfd_create("torchneuron-kernel", MFD_CLOEXEC);
  if (mfd < 0) {
    free(data);
    reason(why, why_len, "memfd_create: %s", strerror(errno));
    return NULL;
  }
  size_t put = 0;
  while (put < length) {
    ssize_t n = write(mfd, data + put, length - put);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    put += (size_t)n;
  }
  free(data);
  if (put != length) {
    close(mfd);
    reason(why, why_len, "cannot write the kernel to memory");
    return NULL;
  }
  char fd_path[64];
  snprintf(fd_path, sizeof fd_path, "/proc/self/fd/%d", mfd);
  /* The memory file stays open while the kernel is loaded (for the life
   * of the process): dlopen takes an object whose name it already loaded
   * for that object, and a closed descriptor's number comes back. */
  void *handle = dlopen(fd_path, RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    close(mfd);
    const char *e = dlerror();
    reason(why, why_len, "dlopen: %s", e ? e : "failed");
  }
  return handle;
}

static int write_all(int fd, const void *data, size_t len) {
  const char *p = data;
  while (len) {
    ssize_t n = write(fd, p, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return 0;
    p += n;
    len -= (size_t)n;
  }
  return 1;
}

/* The compiler run by the background worker (codegen_async.c), so that
 * process exit can stop it: its pid (which is also its process group, so
 * the compiler's own children go with it), 0 when none runs. Set and
 * cleared under child_lock, and cleared before the child is reaped, so a
 * signal never reaches a reused pid. */
static pthread_mutex_t child_lock = PTHREAD_MUTEX_INITIALIZER;
static pid_t child_pid;
static int child_stop;                  /* under child_lock: no further compiler may run */
static _Thread_local int tracked;       /* this thread's compilers are the worker's */

void rt_jit_track_thread(void) { tracked = 1; }

void rt_jit_stop_compilers(void) {
  pthread_mutex_lock(&child_lock);
  child_stop = 1;
  /* SIGTERM lets the compiler driver remove its own temporary files. */
  if (child_pid > 0) kill(-child_pid, SIGTERM);
  pthread_mutex_unlock(&child_lock);
}

void rt_jit_after_fork_child(void) {
  pthread_mutex_init(&child_lock, NULL);
  child_pid = 0; /* the parent's compiler is not this process's child */
}

/* Runs the compiler; 1 on success, else 0 with its first message lines. */
static int run_compiler(const char *cc, const char *const *flags, const char *src, const char *obj,
                        const char *log, char *why, size_t why_len) {
  const char *argv[32];
  int n = 0;
  argv[n++] = cc;
  for (int i = 0; flags[i]; i++) argv[n++] = flags[i];
  argv[n++] = "-o";
  argv[n++] = obj;
  argv[n++] = src;
  argv[n++] = "-lm";
  argv[n] = NULL;
  posix_spawn_file_actions_t actions;
  if (posix_spawn_file_actions_init(&actions)) {
    reason(why, why_len, "posix_spawn_file_actions_init failed");
    return 0;
  }
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  if (tracked) { /* a process group of its own, so that exit can stop it whole */
    posix_spawnattr_setpgroup(&attr, 0);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  }
  pid_t pid;
  int err;
  if (tracked) pthread_mutex_lock(&child_lock);
  if (tracked && child_stop)
    err = ECANCELED;
  else
    err = posix_spawnp(&pid, cc, &actions, &attr, (char *const *)argv, environ);
  if (tracked) {
    if (!err) child_pid = pid;
    pthread_mutex_unlock(&child_lock);
  }
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&actions);
  if (err) {
    reason(why, why_len, "cannot run the compiler %s: %s", cc, strerror(err));
    return 0;
  }
  if (tracked) { /* wait without reaping, forget the pid, then reap */
    siginfo_t info;
    while (waitid(P_PID, (id_t)pid, &info, WEXITED | WNOWAIT) < 0 && errno == EINTR) continue;
    pthread_mutex_lock(&child_lock);
    child_pid = 0;
    pthread_mutex_unlock(&child_lock);
  }
  int status = 0;
  pid_t w;
  while ((w = waitpid(pid, &status, 0)) < 0 && errno == EINTR) continue;
  if (w < 0) {
    reason(why, why_len, "waiting for the compiler %s: %s", cc, strerror(errno));
    return 0;
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return 1;
  char msg[300] = "";
  FILE *f = fopen(log, "r");
  if (f) {
    size_t got = fread(msg, 1, sizeof msg - 1, f);
    msg[got] = 0;
    fclose(f);
    for (char *c = msg; *c; c++)
      if (*c == '\n') *c = ' ';
  }
  if (WIFEXITED(status))
    reason(why, why_len, "the compiler %s failed (exit %d)%s%s", cc, WEXITSTATUS(status), *msg ? ": " : "",
           msg);
  else
    reason(why, why_len, "the compiler %s was killed (status %d)", cc, status);
  return 0;
}

/* Compiles source into dir/<name>.so (through temporary names) with its
 * trailer. 1 on success. */
static int compile_entry(const char dir[PATH_MAX / 2], const char *final_path, const char *cc, const char *const *flags,
                         const char *source, const uint64_t key[2], char *why, size_t why_len) {
  char src[PATH_MAX], obj[PATH_MAX], log[PATH_MAX];
  snprintf(src, sizeof src, "%.2000s/.tmp-XXXXXX.c", dir);
  int fd = mkstemps(src, 2);
  if (fd < 0) {
    reason(why, why_len, "cannot write to the cache directory %s: %s", dir, strerror(errno));
    return 0;
  }
  int ok = write_all(fd, source, strlen(source));
  close(fd);
  snprintf(obj, sizeof obj, "%.*s.so", (int)(strlen(src) - 2), src);
  snprintf(log, sizeof log, "%.*s.log", (int)(strlen(src) - 2), src);
  if (!ok) {
    reason(why, why_len, "cannot write the source to %s", src);
  } else if ((ok = run_compiler(cc, flags, src, obj, log, why, why_len))) {
    /* Append the trailer, then move into place. */
    int ofd = open(obj, O_RDWR | O_CLOEXEC);
    struct stat st;
    char *data = NULL;
    ok = ofd >= 0 && !fstat(ofd, &st) && st.st_size > 0 && st.st_size <= (off_t)MAX_OBJECT_BYTES &&
         (data = malloc((size_t)st.st_size)) != NULL;
    if (ok) {
      size_t got = 0, size = (size_t)st.st_size;
      while (got < size) {
        ssize_t n = read(ofd, data + got, size - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        got += (size_t)n;
      }
      trailer tr;
      memcpy(tr.magic, TRAILER_MAGIC, 8);
      tr.key[0] = key[0];
      tr.key[1] = key[1];
      tr.length = size;
      tr.checksum = checksum(key, data, size);
      ok = got == size && lseek(ofd, 0, SEEK_END) == (off_t)size && write_all(ofd, &tr, sizeof tr) &&
           fchmod(ofd, 0600) == 0;
    }
    free(data);
    if (ofd >= 0) close(ofd);
    if (!ok) reason(why, why_len, "cannot finish the cache entry %s", obj);
    else if (rename(obj, final_path)) {
      ok = 0;
      reason(why, why_len, "cannot rename into %s: %s", final_path, strerror(errno));
    }
  }
  unlink(src);
  unlink(log);
  unlink(obj); /* gone after a successful rename */
  return ok;
}

rt_gen_fn rt_jit_load(const char *source, const char *sym, int32_t isa, uint64_t key_out[2], int *from_cache,
                      int may_compile, int *missed, char *why, size_t why_len) {
  *from_cache = 0;
  *missed = 0;
  const char *cc_env = getenv("TORCHNEURON_CC");
  int default_cc = !(cc_env && *cc_env);
  const char *cc = default_cc ? RT_CODEGEN_CC : cc_env;
  char cc_path[PATH_MAX];
  if (!find_compiler(cc, cc_path, sizeof cc_path)) {
    reason(why, why_len, "no C compiler (%s not found; set TORCHNEURON_CC)", cc);
    return NULL;
  }
  const char *flags[16];
  compile_flags(isa, flags);
  /* The key: source, compiler identity, flags. */
  struct stat cst;
  char identity[PATH_MAX + 128];
  int id_len = snprintf(identity, sizeof identity, "%s|%s|", cc_path, default_cc ? RT_CODEGEN_CC_VERSION : "");
  if (!stat(cc_path, &cst))
    id_len += snprintf(identity + id_len, sizeof identity - (size_t)id_len, "%lld|%lld.%09ld",
                       (long long)cst.st_size, (long long)cst.st_mtim.tv_sec, (long)cst.st_mtim.tv_nsec);
  size_t src_len = strlen(source), total = src_len + (size_t)id_len + 512;
  char *keyed = malloc(total);
  if (!keyed) {
    reason(why, why_len, "out of host memory");
    return NULL;
  }
  size_t at = 0;
  memcpy(keyed, source, src_len);
  at = src_len;
  keyed[at++] = 0;
  memcpy(keyed + at, identity, (size_t)id_len);
  at += (size_t)id_len;
  for (int i = 0; flags[i] && at + strlen(flags[i]) + 2 < total; i++) {
    keyed[at++] = 0;
    memcpy(keyed + at, flags[i], strlen(flags[i]));
    at += strlen(flags[i]);
  }
  uint64_t key[2];
  rt_jit_hash(keyed, at, key);
  free(keyed);
  key_out[0] = key[0];
  key_out[1] = key[1];

  const char *disk = getenv("TORCHNEURON_DISK_CACHE");
  int use_disk = !(disk && !strcmp(disk, "0"));
  /* The directory's path is kept well below PATH_MAX, so that the names
   * made in it always fit. */
  char dir[PATH_MAX / 2], path[PATH_MAX];
  void *handle = NULL;
  if (use_disk) {
    if (!cache_directory(dir, sizeof dir, why, why_len)) return NULL;
    snprintf(path, sizeof path, "%.2000s/%016llx%016llx.so", dir, (unsigned long long)key[0],
             (unsigned long long)key[1]);
    int present;
    char miss[512];
    handle = load_verified(path, key, &present, miss, sizeof miss);
    if (handle) {
      *from_cache = 1;
    } else if (present) {
      rt_log(NRT_LOG_WARNING, "generated-code cache: %s; recompiling", miss);
    }
  } else {
    const char *tmp = getenv("TMPDIR");
    if (!tmp || !*tmp || strlen(tmp) > sizeof dir - 64) tmp = "/tmp";
    snprintf(dir, sizeof dir, "%.1900s/torchneuron-kernels-XXXXXX", tmp);
    if (!mkdtemp(dir)) {
      reason(why, why_len, "cannot create a temporary directory: %s", strerror(errno));
      return NULL;
    }
    snprintf(path, sizeof path, "%.2000s/kernel.so", dir);
  }
  if (!handle && !may_compile) { /* only a look in the cache */
    *missed = 1;
    reason(why, why_len, "not in the cache");
    if (!use_disk) rmdir(dir);
    return NULL;
  }
  if (!handle) {
    if (compile_entry(dir, path, cc, flags, source, key, why, why_len)) {
      int present;
      handle = load_verified(path, key, &present, why, why_len);
    }
  }
  if (!use_disk) {
    unlink(path);
    rmdir(dir);
  }
  if (!handle) return NULL;
  dlerror();
  rt_gen_fn fn;
  void *p = dlsym(handle, sym);
  memcpy(&fn, &p, sizeof fn);
  if (!fn) {
    reason(why, why_len, "the kernel %s is missing from its shared object", sym);
    dlclose(handle);
    return NULL;
  }
  return fn; /* the handle stays open for the life of the process */
}
