/* How much more device memory the host can back.
 *
 * Device memory is host memory committed lazily: an allocation the host
 * cannot back is accepted, and the process is killed by the kernel's OOM
 * killer when a kernel touches it. So nrt_malloc asks, for every new
 * extent, what the host can still give: the kernel's estimate of available
 * memory (MemAvailable) and, inside a memory cgroup, the limit less the
 * usage (page cache that can be dropped counts as free), at every level of
 * the cgroup hierarchy. Total RAM is no bound: other processes, and this
 * one's own host heap, hold part of it.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"

#define PATH_MAX_LEN 4096

/* The first unsigned number in file after key (a line prefix), or
 * UINT64_MAX when absent or unreadable. */
static uint64_t read_keyed(const char *path, const char *key) {
  FILE *f = fopen(path, "r");
  if (!f) return UINT64_MAX;
  char line[512];
  uint64_t value = UINT64_MAX;
  size_t key_len = strlen(key);
  while (fgets(line, sizeof line, f))
    if (strncmp(line, key, key_len) == 0) {
      char *end;
      unsigned long long v = strtoull(line + key_len, &end, 10);
      if (end != line + key_len) value = (uint64_t)v;
      break;
    }
  fclose(f);
  return value;
}

/* A file holding one number ("max" reads as no limit). */
static uint64_t read_number(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return UINT64_MAX;
  char text[64] = "";
  int ok = fgets(text, sizeof text, f) != NULL;
  fclose(f);
  char *end;
  unsigned long long v = strtoull(text, &end, 10);
  return ok && end != text ? (uint64_t)v : UINT64_MAX;
}

static uint64_t min_u64(uint64_t a, uint64_t b) { return a < b ? a : b; }

/* limit - usage + reclaimable cache, or UINT64_MAX without a limit. */
static uint64_t headroom_of(uint64_t limit, uint64_t usage, uint64_t cache) {
  if (limit == UINT64_MAX || limit >= ((uint64_t)1 << 62) || usage == UINT64_MAX) return UINT64_MAX;
  if (cache != UINT64_MAX) usage = usage > cache ? usage - cache : 0;
  return limit > usage ? limit - usage : 0;
}

/* Whether the comma-separated list names controller ("" matches only an
 * empty list: cgroup v2's "0::" line). */
static int lists_controller(char *list, const char *controller) {
  if (!*controller) return *list == 0;
  char *save = NULL;
  for (char *c = strtok_r(list, ",", &save); c; c = strtok_r(NULL, ",", &save))
    if (strcmp(c, controller) == 0) return 1;
  return 0;
}

/* The cgroup path of this process in the hierarchy of controller, from
 * /proc/self/cgroup ("id:controllers:path" lines). */
static int cgroup_path(const char *controller, char *out, size_t size) {
  FILE *f = fopen("/proc/self/cgroup", "r");
  if (!f) return 0;
  char line[PATH_MAX_LEN];
  int found = 0;
  while (!found && fgets(line, sizeof line, f)) {
    char *list = strchr(line, ':'), *path = list ? strchr(list + 1, ':') : NULL;
    if (!path) continue;
    *path++ = 0;
    path[strcspn(path, "\n")] = 0;
    if (lists_controller(list + 1, controller)) {
      snprintf(out, size, "%s", path);
      found = 1;
    }
  }
  fclose(f);
  return found;
}

/* cgroup v2: the least headroom from the process's cgroup up to the root. */
static uint64_t cgroup_v2_available(void) {
  char path[PATH_MAX_LEN];
  if (!cgroup_path("", path, sizeof path)) return UINT64_MAX;
  uint64_t least = UINT64_MAX;
  for (;;) {
    char dir[PATH_MAX_LEN + 32], file[PATH_MAX_LEN + 64];
    snprintf(dir, sizeof dir, "/sys/fs/cgroup%s", path);
    snprintf(file, sizeof file, "%s/memory.max", dir);
    uint64_t limit = read_number(file);
    snprintf(file, sizeof file, "%s/memory.current", dir);
    uint64_t usage = read_number(file);
    snprintf(file, sizeof file, "%s/memory.stat", dir);
    uint64_t cache = read_keyed(file, "inactive_file ");
    least = min_u64(least, headroom_of(limit, usage, cache));
    char *slash = strrchr(path, '/');
    if (!slash || slash == path) break;
    *slash = 0;
  }
  return least;
}

/* cgroup v1: memory.stat's hierarchical limit covers the ancestors. The
 * process may see its own cgroup as the hierarchy's root (a namespace). */
static uint64_t cgroup_v1_available(void) {
  char path[PATH_MAX_LEN], dir[PATH_MAX_LEN + 32], file[PATH_MAX_LEN + 64];
  if (!cgroup_path("memory", path, sizeof path)) return UINT64_MAX;
  snprintf(dir, sizeof dir, "/sys/fs/cgroup/memory%s", path);
  snprintf(file, sizeof file, "%s/memory.usage_in_bytes", dir);
  if (read_number(file) == UINT64_MAX) snprintf(dir, sizeof dir, "/sys/fs/cgroup/memory");
  snprintf(file, sizeof file, "%s/memory.usage_in_bytes", dir);
  uint64_t usage = read_number(file);
  snprintf(file, sizeof file, "%s/memory.stat", dir);
  uint64_t limit = min_u64(read_keyed(file, "hierarchical_memory_limit "),
                           read_keyed(file, "hierarchical_memsw_limit "));
  uint64_t cache = read_keyed(file, "total_inactive_file ");
  snprintf(file, sizeof file, "%s/memory.limit_in_bytes", dir);
  limit = min_u64(limit, read_number(file));
  return headroom_of(limit, usage, cache);
}

uint64_t rt_host_available(void) {
  uint64_t kib = read_keyed("/proc/meminfo", "MemAvailable:");
  uint64_t host = kib == UINT64_MAX ? UINT64_MAX : kib * 1024;
  return min_u64(host, min_u64(cgroup_v2_available(), cgroup_v1_available()));
}
