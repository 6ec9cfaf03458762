/* The neuron-top page (neuronrt/top.h): the seqlock never hands a reader a
 * torn copy; the page is made 0600 in a 0700 directory under its
 * <pid>-<start>.page name, carries the layout it declares, counts what the
 * streams and the allocator did, and is removed at exit but not by a
 * forked child's exit; an unsafe directory or TORCHNEURON_TOP=0 makes none.
 * The page cases run in children, each with a directory of its own. */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include "check.h"
#include "child.h"
#include "gate.h"
#include "neuronrt/top.h"
#include "top_seqlock.h"

/* ---- the seqlock, in one process -------------------------------------- */

#define WORDS 200
static uint64_t shared_seq, shared_words[WORDS];
static atomic_int writer_done;

static void *writer_main(void *arg) {
  (void)arg;
  uint64_t body[WORDS];
  for (uint64_t k = 1; k <= 20000; k++) {
    for (int i = 0; i < WORDS; i++) body[i] = k;
    rt_seqlock_write(&shared_seq, shared_words, body, WORDS);
  }
  atomic_store(&writer_done, 1);
  return NULL;
}

static void test_seqlock_copies_are_never_torn(void) {
  pthread_t writer;
  CHECK(pthread_create(&writer, NULL, writer_main, NULL) == 0);
  uint64_t copy[WORDS], last = 0;
  long consistent = 0, torn = 0;
  while (!atomic_load(&writer_done) || consistent == 0) {
    if (!rt_seqlock_read(&shared_seq, copy, shared_words, WORDS)) continue;
    consistent++;
    for (int i = 1; i < WORDS; i++) torn += copy[i] != copy[0];
    CHECK(copy[0] >= last); /* never an older publication after a newer one */
    last = copy[0];
  }
  pthread_join(writer, NULL);
  CHECK(torn == 0);
  CHECK(consistent > 0);
  CHECK(rt_seqlock_read(&shared_seq, copy, shared_words, WORDS) && copy[0] == 20000);
  CHECK(shared_seq == 2 * 20000);
}

/* ---- the page, in children -------------------------------------------- */

static void nothing(void *arg) { (void)arg; }

static const char *top_dir(void) { return getenv("TORCHNEURON_TOP_DIR"); }

/* Waits up to 10 s for the publisher to name the page. */
static const char *wait_for_page(void) {
  for (int i = 0; i < 1000; i++) {
    const char *path = nrt_top_page_path();
    if (*path) return path;
    nanosleep(&(struct timespec){0, 10000000}, NULL);
  }
  return NULL;
}

/* A consistent copy of the page at path (malloc'ed), or NULL. */
static nrt_top_header *read_page(const char *path, size_t *bytes) {
  int fd = open(path, O_RDONLY);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) return NULL;
  *bytes = (size_t)st.st_size;
  uint64_t *map = mmap(NULL, *bytes, PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  if (map == MAP_FAILED) return NULL;
  nrt_top_header *copy = malloc(*bytes);
  size_t first = offsetof(nrt_top_header, published_ns) / 8;
  memcpy(copy, map, first * 8);
  while (!rt_seqlock_read(&((nrt_top_header *)map)->seq, (uint64_t *)copy + first, map + first,
                          *bytes / 8 - first)) {
  }
  munmap(map, *bytes);
  return copy;
}

/* Field 22 of /proc/self/stat (a proc file has no size: read, not seek). */
static uint64_t start_ticks_of_self(void) {
  char text[1024];
  FILE *f = fopen("/proc/self/stat", "r");
  size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
  if (f) fclose(f);
  text[n] = 0;
  char *p = strrchr(text, ')');
  for (int field = 2; p && field < 22; field++) p = strchr(p + 1, ' ');
  return p ? strtoull(p + 1, NULL, 10) : 0;
}

static int case_layout_and_counts(void) {
  nrt_stream_t s;
  CHECK_OK(nrt_stream_get_default(0, &s));
  void *block;
  CHECK_OK(nrt_cache_alloc(s, 3 << 20, &block));
  const char *path = wait_for_page();
  CHECK(path != NULL);
  if (!path) return check_failures;
  char expected[512];
  snprintf(expected, sizeof expected, "%s/%d-%llu.page", top_dir(), (int)getpid(),
           (unsigned long long)start_ticks_of_self());
  CHECK(strcmp(path, expected) == 0);
  struct stat st;
  CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600 && st.st_uid == getuid());
  CHECK(stat(top_dir(), &st) == 0 && (st.st_mode & 0777) == 0700);

  /* Busy: a gate holds the worker while commands queue behind it. */
  gate g;
  gate_init(&g);
  CHECK_OK(nrt_launch_host_func(s, gate_wait, &g));
  for (int i = 0; i < 5; i++) /* device to device: queued, not waited for */
    CHECK_OK(nrt_memcpy_async(s, block, (char *)block + (1 << 20), 4096));
  while (atomic_load(&g.entered) == 0) sched_yield();
  nanosleep(&(struct timespec){0, 30000000}, NULL);
  CHECK(nrt_top_publish_now() == 0);
  size_t bytes;
  nrt_top_header *h = read_page(path, &bytes);
  CHECK(h != NULL);
  if (!h) return check_failures;
  int32_t count;
  CHECK_OK(nrt_device_count(&count));
  CHECK(memcmp(h->magic, NRT_TOP_MAGIC, 8) == 0 && h->version == NRT_TOP_VERSION);
  CHECK(h->byte_order == NRT_TOP_BYTE_ORDER && h->header_bytes == sizeof(nrt_top_header));
  CHECK(h->device_bytes == sizeof(nrt_top_device) && h->stream_bytes == sizeof(nrt_top_stream));
  CHECK(h->max_streams == NRT_TOP_MAX_STREAMS && h->device_count == (uint32_t)count);
  CHECK(h->page_bytes == bytes && bytes == sizeof *h + (size_t)count * sizeof(nrt_top_device));
  CHECK(h->pid == getpid() && h->uid == getuid() && h->start_ticks == start_ticks_of_self());
  CHECK(h->interval_ns == NRT_TOP_INTERVAL_MS * 1000000ull && strcmp(h->target, "trn2") == 0);
  CHECK(h->seq % 2 == 0 && h->seq >= 4); /* the first publication, then ours */
  struct stat ns;
  CHECK(stat("/proc/self/ns/pid", &ns) == 0 && h->pid_namespace == (uint64_t)ns.st_ino);
  nrt_top_device *d = (nrt_top_device *)(h + 1);
  CHECK(d[0].allocated_bytes == 3 << 20 && d[0].reserved_bytes >= d[0].allocated_bytes);
  CHECK(d[0].capacity_bytes > d[0].reserved_bytes);
  CHECK(d[0].streams == 1 && d[0].listed == 1 && d[0].stream[0].id == 0);
  CHECK(d[0].stream[0].queued == 6 && d[0].queued == 6); /* the gate and the copies behind it */
  CHECK(d[0].stream[0].submitted == 6);
  CHECK(d[0].stream[0].busy_ns >= 30000000); /* the gate counts as work */
  uint64_t published = h->published_ns;
  free(h);

  gate_open(&g);
  CHECK_OK(nrt_stream_synchronize(s));
  nrt_top_note_fallback(0);
  nrt_top_note_fallback(-1); /* no device known: the process's total alone */
  CHECK(nrt_top_publish_now() == 0);
  h = read_page(path, &bytes);
  d = (nrt_top_device *)(h + 1);
  CHECK(h->published_ns > published && h->fallbacks == 2 && d[0].fallbacks == 1);
  CHECK(d[0].stream[0].queued == 0 && d[0].stream[0].ops == 5 && d[0].ops == 5);
  if (count > 1) CHECK(d[1].streams == 0 && d[1].reserved_bytes == 0 && d[1].ops == 0 && d[1].fallbacks == 0);
  free(h);
  /* Idle now (the worker marks it just after the completion the
   * synchronisation saw): busy time stops growing. */
  nanosleep(&(struct timespec){0, 20000000}, NULL);
  CHECK(nrt_top_publish_now() == 0);
  h = read_page(path, &bytes);
  d = (nrt_top_device *)(h + 1);
  uint64_t busy = d[0].busy_ns;
  free(h);
  nanosleep(&(struct timespec){0, 20000000}, NULL);
  CHECK(nrt_top_publish_now() == 0);
  h = read_page(path, &bytes);
  d = (nrt_top_device *)(h + 1);
  CHECK(d[0].busy_ns == busy);
  free(h);
  gate_destroy(&g);
  CHECK_OK(nrt_cache_free(block));
  return check_failures;
}

/* Another stream shows as a second entry, busy while a host function runs. */
static int case_streams_are_listed(void) {
  nrt_stream_t a, b;
  CHECK_OK(nrt_stream_get_default(0, &a));
  CHECK_OK(nrt_stream_create(0, NRT_STREAM_PRIORITY_HIGH, &b));
  char host[64] = {0};
  void *dev;
  CHECK_OK(nrt_malloc(0, 4096, &dev));
  CHECK_OK(nrt_memcpy_async(a, dev, host, 64));
  CHECK_OK(nrt_memcpy_async(b, dev, host, 64));
  CHECK_OK(nrt_device_synchronize(0));
  const char *path = wait_for_page();
  CHECK(path && nrt_top_publish_now() == 0);
  if (!path) return check_failures;
  size_t bytes;
  nrt_top_header *h = read_page(path, &bytes);
  nrt_top_device *d = (nrt_top_device *)(h + 1);
  CHECK(d[0].streams == 2 && d[0].listed == 2);
  CHECK(d[0].stream[0].id == 0 && d[0].stream[1].id == nrt_stream_id(b));
  CHECK(d[0].stream[1].priority == NRT_STREAM_PRIORITY_HIGH && d[0].stream[1].ops == 1);
  CHECK(d[0].ops == 2);
  free(h);
  CHECK_OK(nrt_stream_destroy(b));
  CHECK_OK(nrt_free(dev));
  return check_failures;
}

/* A child forked from this multi-threaded process may inherit an allocator
 * lock that another thread held at the fork; LeakSanitizer's exit-time scan
 * would then wait for it forever. The child's leaks are not what it tests,
 * so leak checking is off in the child (LSan asks this function at exit;
 * without LSan nothing calls it). */
static volatile int forked_child;
int __lsan_is_turned_off(void);
int __lsan_is_turned_off(void) { return forked_child; }

/* Writes the page's path to $TOP_TEST_PATH_FILE, forks a child that exits
 * (the page must stay), then returns from main (the page must go). */
static int case_exit_removes(void) {
  nrt_stream_t s;
  CHECK_OK(nrt_stream_get_default(0, &s));
  CHECK_OK(nrt_launch_host_func(s, nothing, NULL));
  CHECK_OK(nrt_stream_synchronize(s));
  const char *path = wait_for_page();
  CHECK(path != NULL);
  if (!path) return check_failures;
  pid_t child = fork();
  if (child == 0) { /* runs the atexit handlers, in the child */
    forked_child = 1;
    exit(0);
  }
  int status;
  CHECK(child > 0 && waitpid(child, &status, 0) == child);
  CHECK(access(path, F_OK) == 0);
  FILE *f = fopen(getenv("TOP_TEST_PATH_FILE"), "w");
  CHECK(f != NULL);
  if (f) {
    fputs(path, f);
    fclose(f);
  }
  return check_failures;
}

static int case_no_page(void) {
  nrt_stream_t s;
  CHECK_OK(nrt_stream_get_default(0, &s));
  CHECK_OK(nrt_launch_host_func(s, nothing, NULL));
  CHECK_OK(nrt_stream_synchronize(s));
  nanosleep(&(struct timespec){0, 2 * NRT_TOP_INTERVAL_MS * 1000000L}, NULL);
  CHECK(*nrt_top_page_path() == 0 && nrt_top_publish_now() != 0);
  return check_failures;
}

static int case_bad_setting(void) {
  CHECK_STATUS(nrt_init(), NRT_ERROR_INVALID_CONFIG);
  CHECK(strstr(nrt_last_error(), "TORCHNEURON_TOP='yes' must be 0 or 1") != NULL);
  return check_failures;
}

static int run_case(const char *name) {
  if (strcmp(name, "bad") == 0) return case_bad_setting();
  if (strcmp(name, "layout") == 0) return case_layout_and_counts();
  if (strcmp(name, "streams") == 0) return case_streams_are_listed();
  if (strcmp(name, "exit") == 0) return case_exit_removes();
  if (strcmp(name, "none") == 0) return case_no_page();
  return 99;
}

static int dir_entries(const char *dir) {
  DIR *d = opendir(dir);
  int n = 0;
  for (struct dirent *e; d && (e = readdir(d));) n += e->d_name[0] != '.';
  if (d) closedir(d);
  return n;
}

static void test_page_cases(void) {
  char base[] = "/tmp/test_top_XXXXXX", dir[96], env[128], path_file[128], path_env[160];
  CHECK(mkdtemp(base) != NULL);
  snprintf(dir, sizeof dir, "%s/pages", base); /* made by the runtime, 0700 */
  snprintf(env, sizeof env, "TORCHNEURON_TOP_DIR=%s", dir);
  snprintf(path_file, sizeof path_file, "%s/path", base);
  snprintf(path_env, sizeof path_env, "TOP_TEST_PATH_FILE=%s", path_file);
  CHECK(child_run("layout", (const char *[]){env, NULL}) == 0);
  CHECK(child_run("streams", (const char *[]){env, NULL}) == 0);
  CHECK(dir_entries(dir) == 0); /* both removed at exit */
  CHECK(child_run("exit", (const char *[]){env, path_env, NULL}) == 0);
  char *path = NULL;
  CHECK(child_read_file(path_file, &path) > 0);
  if (path) CHECK(strstr(path, dir) == path && access(path, F_OK) != 0);
  free(path);
  remove(path_file);
  CHECK(dir_entries(dir) == 0);

  CHECK(child_run("none", (const char *[]){env, "TORCHNEURON_TOP=0", NULL}) == 0);
  CHECK(child_run("bad", (const char *[]){env, "TORCHNEURON_TOP=yes", NULL}) == 0);
  CHECK(dir_entries(dir) == 0);
  CHECK(chmod(dir, 0755) == 0); /* others may read it: refused */
  CHECK(child_run("none", (const char *[]){env, NULL}) == 0);
  CHECK(dir_entries(dir) == 0);
  rmdir(dir);
  rmdir(base);
}

int main(int argc, char **argv) {
  if (child_is_case(argc, argv)) return run_case(argv[2]);
  test_seqlock_copies_are_never_torn();
  test_page_cases();
  if (check_failures) fprintf(stderr, "%d check(s) failed\n", check_failures);
  return check_failures != 0;
}
