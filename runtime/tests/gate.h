/* A gate for stream tests: a host function (gate_wait) launched on a
 * stream holds everything queued behind it until the test opens the gate,
 * so tests can observe work that is queued but not run. */
#ifndef NEURONRT_TESTS_GATE_H
#define NEURONRT_TESTS_GATE_H

#include <pthread.h>
#include <stdatomic.h>

typedef struct gate {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int open;
  atomic_int entered; /* gate_wait calls that started */
} gate;

static inline void gate_init(gate *g) {
  pthread_mutex_init(&g->mu, NULL);
  pthread_cond_init(&g->cv, NULL);
  g->open = 0;
  atomic_init(&g->entered, 0);
}

static inline void gate_destroy(gate *g) {
  pthread_mutex_destroy(&g->mu);
  pthread_cond_destroy(&g->cv);
}

static inline void gate_wait(void *arg) {
  gate *g = arg;
  atomic_fetch_add(&g->entered, 1);
  pthread_mutex_lock(&g->mu);
  while (!g->open) pthread_cond_wait(&g->cv, &g->mu);
  pthread_mutex_unlock(&g->mu);
}

static inline void gate_open(gate *g) {
  pthread_mutex_lock(&g->mu);
  g->open = 1;
  pthread_cond_broadcast(&g->cv);
  pthread_mutex_unlock(&g->mu);
}

#endif
