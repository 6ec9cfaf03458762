/* Running a test case in a fresh process.
 *
 * The runtime reads its configuration from the environment once per
 * process, and flags a fork() after initialisation, so cases that need a
 * particular environment run in a child: the test binary re-executes itself
 * (posix_spawn of /proc/self/exe, which execs at once, so it is safe even
 * after the parent has initialised the runtime) with CHILD_FLAG and the
 * case's name as arguments and an environment made of the parent's minus
 * every NEURON_* variable plus the case's own (which replace inherited ones).
 *
 *   int main(int argc, char **argv) {
 *     if (child_is_case(argc, argv)) return run_case(argv[2]);
 *     ...
 *     CHECK(child_run("name", (const char *[]){"NEURON_X=1", NULL}) == 0);
 *   }
 */
#ifndef NEURONRT_TEST_CHILD_H
#define NEURONRT_TEST_CHILD_H

#include <errno.h>
#include <limits.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHILD_FLAG "--child-case"

extern char **environ;

static int child_is_case(int argc, char **argv) {
  return argc == 3 && strcmp(argv[1], CHILD_FLAG) == 0;
}

/* Nonzero if vars sets the variable of entry ("NAME=value"): getenv would
 * find the inherited entry first, so it is left out. */
static int child_overridden(const char *entry, const char *const *vars) {
  size_t name_len = strcspn(entry, "=");
  for (; vars && *vars; vars++)
    if (strncmp(*vars, entry, name_len) == 0 && (*vars)[name_len] == '=') return 1;
  return 0;
}

/* Runs this binary with `CHILD_FLAG name` in a fresh process whose
 * environment has no NEURON_* variable except those in vars (a
 * NULL-terminated list of "NAME=value", may be NULL). Returns the child's
 * exit code, 128 + signal if it was killed, or -1 if it could not start. */
static int child_run(const char *name, const char *const *vars) {
  char exe[PATH_MAX];
  ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (len <= 0) {
    perror("readlink /proc/self/exe");
    return -1;
  }
  exe[len] = 0;
  size_t n_env = 0, n_vars = 0;
  while (environ[n_env]) n_env++;
  while (vars && vars[n_vars]) n_vars++;
  char **envp = calloc(n_env + n_vars + 1, sizeof *envp);
  if (!envp) return -1;
  size_t k = 0;
  for (size_t i = 0; i < n_env; i++)
    if (strncmp(environ[i], "NEURON_", 7) != 0 && !child_overridden(environ[i], vars))
      envp[k++] = environ[i];
  for (size_t i = 0; i < n_vars; i++) envp[k++] = (char *)vars[i];
  envp[k] = NULL;
  char *argv[] = {exe, (char *)CHILD_FLAG, (char *)name, NULL};
  pid_t pid;
  int err = posix_spawn(&pid, exe, NULL, NULL, argv, envp);
  free(envp);
  if (err) {
    fprintf(stderr, "posix_spawn: %s\n", strerror(err));
    return -1;
  }
  int status;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}


/* Reads a whole file into *data (malloc'ed); returns its size or -1. */
static inline long child_read_file(const char *path, char **data) {
  FILE *f = fopen(path, "rb");
  if (!f) return -1;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  *data = malloc((size_t)n + 1);
  if (!*data || fread(*data, 1, (size_t)n, f) != (size_t)n) n = -1;
  fclose(f);
  return n;
}

/* Runs the case "threads" with 1 and with 3 kernel threads, each writing
 * its results to the file named by env_var; returns 1 if both wrote the
 * same non-empty bytes. */
static inline int child_results_agree_across_threads(const char *env_var, const char *tag) {
  char one[96], three[96], env_one[160], env_three[160];
  snprintf(one, sizeof one, "/tmp/test_%s_%d_1.bin", tag, (int)getpid());
  snprintf(three, sizeof three, "/tmp/test_%s_%d_3.bin", tag, (int)getpid());
  snprintf(env_one, sizeof env_one, "%s=%s", env_var, one);
  snprintf(env_three, sizeof env_three, "%s=%s", env_var, three);
  int ran = child_run("threads", (const char *[]){"TORCHNEURON_NUM_THREADS=1", env_one, NULL}) == 0 &&
            child_run("threads", (const char *[]){"TORCHNEURON_NUM_THREADS=3", env_three, NULL}) == 0;
  char *a = NULL, *b = NULL;
  long na = ran ? child_read_file(one, &a) : -1, nb = ran ? child_read_file(three, &b) : -1;
  int same = na > 0 && na == nb && memcmp(a, b, (size_t)na) == 0;
  free(a);
  free(b);
  remove(one);
  remove(three);
  return same;
}

#endif
