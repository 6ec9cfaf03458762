/* The neuron-top page (neuronrt/top.h): created when the runtime starts,
 * published by a thread of its own, removed at exit.
 *
 * Why a publisher thread rather than counters kept in the page: the
 * runtime already counts what neuron-top shows (each stream's submitted
 * and completed commands, the allocator's statistics), and a thread that
 * copies them ten times a second costs the launch path nothing -- not even
 * the atomic adds into a shared page that would otherwise be on it -- and
 * lets the page carry a seqlock, so readers see one consistent moment.
 * The only additions on the hot side are the worker's: a clock read when
 * it goes idle and when work arrives (busy time), and a plain store per
 * command run (ops).
 *
 * Nothing here can fail the runtime: a page that cannot be made is logged
 * (at info, or warning for an unsafe directory) and the runtime runs on.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "internal.h"
#include "top_seqlock.h"

static atomic_uint_fast64_t fallbacks, device_fallbacks[NRT_MAX_DEVICES];
static pthread_once_t start_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t publish_mu = PTHREAD_MUTEX_INITIALIZER; /* the seqlock's one writer */
/* Set once before the publisher starts (which orders them before its use);
 * other threads use them only once `named` says the publisher has. */
static nrt_top_header *page;    /* the mapped file */
static nrt_top_header *staging; /* the next publication, built here, then copied */
static size_t page_bytes;
static char page_path[PATH_MAX], tmp_path[PATH_MAX]; /* its name, and its name until published */
static pid_t owner;              /* the process that made the page (not a forked child) */
static atomic_int stopped;       /* set at exit: the file is gone */
static int named;                /* under publish_mu: the publisher named the file */

void nrt_top_note_fallback(int32_t device) {
  atomic_fetch_add_explicit(&fallbacks, 1, memory_order_relaxed);
  if (device >= 0 && device < NRT_MAX_DEVICES)
    atomic_fetch_add_explicit(&device_fallbacks[device], 1, memory_order_relaxed);
}

const char *nrt_top_page_path(void) {
  pthread_mutex_lock(&publish_mu);
  const char *path = named && !atomic_load(&stopped) ? page_path : "";
  pthread_mutex_unlock(&publish_mu);
  return path;
}

/* ---- the publication -------------------------------------------------- */

typedef struct device_fill {
  nrt_top_device *device;
} device_fill;

static void add_stream(const nrt_top_stream *t, void *arg) {
  nrt_top_device *d = ((device_fill *)arg)->device;
  d->streams++;
  d->ops += t->ops;
  d->queued += t->queued;
  d->busy_ns += t->busy_ns;
  if (d->listed < NRT_TOP_MAX_STREAMS) d->stream[d->listed++] = *t;
}

/* Builds the publication in staging and copies it into the page under the
 * seqlock. Caller holds publish_mu. */
static void publish_locked(void) {
  nrt_top_device *devices = (nrt_top_device *)(staging + 1);
  for (uint32_t i = 0; i < staging->device_count; i++) {
    nrt_top_device *d = &devices[i];
    memset(d, 0, sizeof *d);
    nrt_cache_stats stats;
    if (nrt_cache_get_stats((int32_t)i, &stats) == NRT_SUCCESS) {
      d->allocated_bytes = (uint64_t)stats.allocated_bytes[NRT_POOL_ALL].current;
      d->reserved_bytes = (uint64_t)stats.reserved_bytes[NRT_POOL_ALL].current;
    }
    d->capacity_bytes = rt_device_props((int32_t)i)->hbm_bytes;
    d->fallbacks = atomic_load_explicit(&device_fallbacks[i], memory_order_relaxed);
    device_fill fill = {d};
    rt_stream_activity((int32_t)i, add_stream, &fill);
  }
  staging->published_ns = rt_now_ns();
  staging->fallbacks = atomic_load_explicit(&fallbacks, memory_order_relaxed);
  /* Everything from published_ns on changes; the fields before it do not. */
  size_t first = offsetof(nrt_top_header, published_ns) / sizeof(uint64_t);
  rt_seqlock_write(&page->seq, (uint64_t *)page + first, (const uint64_t *)staging + first,
                   page_bytes / sizeof(uint64_t) - first);
}

int nrt_top_publish_now(void) {
  pthread_mutex_lock(&publish_mu);
  int published = named && !atomic_load(&stopped);
  if (published) publish_locked();
  pthread_mutex_unlock(&publish_mu);
  return published ? 0 : -1;
}

/* The first publication, then the name readers look for, then one
 * publication per tick. Here, not in rt_top_start: its callers hold the
 * stream table's or the allocator's lock, which publishing takes. */
static void *publisher_main(void *arg) {
  (void)arg;
  pthread_mutex_lock(&publish_mu);
  if (!atomic_load(&stopped)) publish_locked();
  named = !atomic_load(&stopped) && rename(tmp_path, page_path) == 0;
  int failed = !named, err = errno;
  pthread_mutex_unlock(&publish_mu);
  if (failed) {
    if (!atomic_load(&stopped))
      rt_log(NRT_LOG_INFO, "neuron-top page not published: cannot rename %s: %s", tmp_path,
             strerror(err));
    unlink(tmp_path);
    return NULL;
  }
  const struct timespec tick = {0, NRT_TOP_INTERVAL_MS * 1000000L};
  while (!atomic_load(&stopped)) {
    nanosleep(&tick, NULL);
    pthread_mutex_lock(&publish_mu);
    if (!atomic_load(&stopped)) publish_locked();
    pthread_mutex_unlock(&publish_mu);
  }
  return NULL;
}

/* ---- the file --------------------------------------------------------- */

/* At exit the file goes (the mapping stays until the process ends, so a
 * publication still in progress writes harmlessly). A forked child
 * inherits this handler and must leave its parent's page alone; it never
 * takes the lock, which the parent's publisher may have held at the fork. */
static void remove_page(void) {
  if (getpid() != owner || atomic_exchange(&stopped, 1)) return;
  unlink(tmp_path); /* exit before the first publication */
  unlink(page_path);
}

/* The process's start time in clock ticks since boot (field 22 of
 * /proc/self/stat, after the parenthesised command, which may hold
 * spaces), or 0 if unreadable. */
static uint64_t start_ticks(void) {
  char text[1024];
  FILE *f = fopen("/proc/self/stat", "re");
  if (!f) return 0;
  size_t n = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[n] = 0;
  char *p = strrchr(text, ')');
  for (int field = 2; p && field < 22; field++) p = strchr(p + 1, ' ');
  return p ? strtoull(p + 1, NULL, 10) : 0;
}

/* The directory of pages: TORCHNEURON_TOP_DIR or /dev/shm/torchneuron-<uid>,
 * made 0700 if missing. One that another user owns or may write is
 * refused: pages there could be replaced or read by others. */
static int page_dir(char *dir, size_t size) {
  const char *chosen = getenv("TORCHNEURON_TOP_DIR");
  int n = chosen && *chosen ? snprintf(dir, size, "%s", chosen)
                            : snprintf(dir, size, "/dev/shm/torchneuron-%u", (unsigned)getuid());
  if (n <= 0 || (size_t)n >= size) return -1;
  if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
    rt_log(NRT_LOG_INFO, "neuron-top page not published: cannot create %s: %s", dir, strerror(errno));
    return -1;
  }
  struct stat st;
  if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != getuid() ||
      (st.st_mode & 077) != 0) {
    rt_log(NRT_LOG_WARNING,
           "neuron-top page not published: %s must be a directory of yours that only you may "
           "use (mode 0700)", dir);
    return -1;
  }
  return 0;
}

/* Creates and maps the file under a hidden name, so that readers never see
 * it half made; returns the mapping or NULL (file removed). */
static nrt_top_header *create_page(const char *tmp, size_t bytes) {
  int fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0 && errno == EEXIST && unlink(tmp) == 0) /* left by an exec'ed image of this pid */
    fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return NULL;
  void *map = MAP_FAILED;
  if (fchmod(fd, 0600) == 0 && ftruncate(fd, (off_t)bytes) == 0)
    map = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (map == MAP_FAILED) {
    unlink(tmp);
    return NULL;
  }
  return map;
}

static void fill_identity(nrt_top_header *h, uint32_t devices, uint64_t ticks) {
  memcpy(h->magic, NRT_TOP_MAGIC, sizeof h->magic);
  h->version = NRT_TOP_VERSION;
  h->byte_order = NRT_TOP_BYTE_ORDER;
  h->header_bytes = sizeof(nrt_top_header);
  h->device_bytes = sizeof(nrt_top_device);
  h->stream_bytes = sizeof(nrt_top_stream);
  h->max_streams = NRT_TOP_MAX_STREAMS;
  h->device_count = devices;
  h->uid = (uint32_t)getuid();
  h->page_bytes = page_bytes;
  h->pid = (int64_t)getpid();
  h->start_ticks = ticks;
  h->interval_ns = (uint64_t)NRT_TOP_INTERVAL_MS * 1000000u;
  if (devices) snprintf(h->target, sizeof h->target, "%s", rt_device_props(0)->target_name);
  struct stat ns;
  h->pid_namespace = stat("/proc/self/ns/pid", &ns) == 0 ? (uint64_t)ns.st_ino : 0;
}

static void start_once_fn(void) {
  if (!rt_top_enabled()) return;
  char dir[PATH_MAX - 64];
  uint64_t ticks = start_ticks();
  if (page_dir(dir, sizeof dir) != 0) return;
  uint32_t devices = (uint32_t)rt_device_count();
  size_t bytes = sizeof(nrt_top_header) + devices * sizeof(nrt_top_device);
  pid_t pid = getpid();
  snprintf(tmp_path, sizeof tmp_path, "%s/.%d-%llu.tmp", dir, (int)pid, (unsigned long long)ticks);
  snprintf(page_path, sizeof page_path, "%s/%d-%llu.page", dir, (int)pid,
           (unsigned long long)ticks);
  nrt_top_header *map = create_page(tmp_path, bytes);
  nrt_top_header *next = map ? calloc(1, bytes) : NULL;
  pthread_attr_t attr;
  pthread_t thread;
  int ok = 0;
  if (next && pthread_attr_init(&attr) == 0) {
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    page_bytes = bytes;
    owner = pid;
    fill_identity(map, devices, ticks);
    fill_identity(next, devices, ticks);
    /* No lock here: callers may hold the stream table's lock, which the
     * publisher takes under publish_mu. */
    page = map;
    staging = next;
    ok = atexit(remove_page) == 0 && pthread_create(&thread, &attr, publisher_main, NULL) == 0;
    pthread_attr_destroy(&attr);
  }
  if (ok) return;
  rt_log(NRT_LOG_INFO, "neuron-top page not published: cannot create it in %s", dir);
  atomic_store(&stopped, 1); /* no publisher: nothing reads page */
  page = NULL;
  staging = NULL;
  if (map) {
    unlink(tmp_path);
    munmap(map, bytes);
  }
  free(next); /* staging is no longer read: page is NULL */
}

void rt_top_start(void) { pthread_once(&start_once, start_once_fn); }
