/* The radix sort of (key, index) pairs for one key type; included by
 * radix_sort.c with K (the key type) and SUFFIX (its width) defined, after
 * its shared helpers.
 *
 * Short arrays: insertion sort. Arrays that fit in cache: LSD radix on
 * bytes, all histograms in one read, skipping bytes that are the same in
 * every key. Larger arrays: one MSD pass on the highest byte that varies
 * scatters the pairs into 256 buckets, which are then sorted on the lower
 * bytes independently (in cache, and in parallel at the top level). Every
 * step is stable, so the result is the unique stable order. */

#define CAT_(a, b) a##b
#define CAT2_(a, b) CAT_(a, b)
#define F(name) CAT2_(name, SUFFIX)

enum { F(BYTES_) = sizeof(K) };

static void F(insertion_)(K *keys, uint32_t *idx, int64_t n) {
  for (int64_t i = 1; i < n; i++) {
    K k = keys[i];
    uint32_t v = idx[i];
    int64_t j = i - 1;
    while (j >= 0 && keys[j] > k) {
      keys[j + 1] = keys[j];
      idx[j + 1] = idx[j];
      j--;
    }
    keys[j + 1] = k;
    idx[j + 1] = v;
  }
}

static void F(scatter_)(const K *ks, const uint32_t *is, K *kd, uint32_t *id, int64_t begin,
                        int64_t end, int shift, uint32_t *offsets) {
  for (int64_t i = begin; i < end; i++) {
    K k = ks[i];
    uint32_t pos = offsets[(k >> shift) & 0xff]++;
    kd[pos] = k;
    id[pos] = is[i];
  }
}

/* LSD on bytes [0, top]; the result is left in keys/idx. */
static void F(lsd_)(K *keys, uint32_t *idx, K *kt, uint32_t *it, int64_t n, int top) {
  uint32_t hist[F(BYTES_)][256];
  memset(hist, 0, sizeof hist);
  for (int64_t i = 0; i < n; i++) {
    K k = keys[i];
    for (int b = 0; b <= top; b++) hist[b][(k >> (8 * b)) & 0xff]++;
  }
  K *k0 = keys;
  uint32_t *i0 = idx;
  for (int b = 0; b <= top; b++) {
    uint32_t offsets[256];
    if (prefix_sum_(hist[b], offsets, n)) continue;
    F(scatter_)(keys, idx, kt, it, 0, n, 8 * b, offsets);
    K *tk = keys;
    keys = kt, kt = tk;
    uint32_t *ti = idx;
    idx = it, it = ti;
  }
  if (keys != k0) {
    memcpy(k0, keys, (size_t)n * sizeof(K));
    memcpy(i0, idx, (size_t)n * sizeof(uint32_t));
  }
}

/* Sorts keys/idx by bytes [0, top] in place, with scratch kt/it. */
static void F(sort_range_)(K *keys, uint32_t *idx, K *kt, uint32_t *it, int64_t n, int top) {
  if (n <= INSERTION_MAX) {
    F(insertion_)(keys, idx, n);
    return;
  }
  if (n <= LSD_MAX || top == 0) {
    F(lsd_)(keys, idx, kt, it, n, top);
    return;
  }
  uint32_t hist[256] = {0}, offsets[256];
  int shift = 8 * top;
  for (int64_t i = 0; i < n; i++) hist[(keys[i] >> shift) & 0xff]++;
  if (prefix_sum_(hist, offsets, n)) {
    F(sort_range_)(keys, idx, kt, it, n, top - 1);
    return;
  }
  F(scatter_)(keys, idx, kt, it, 0, n, shift, offsets);
  for (int v = 0, at = 0; v < 256; at += hist[v++])
    F(sort_range_)(kt + at, it + at, keys + at, idx + at, hist[v], top - 1);
  memcpy(keys, kt, (size_t)n * sizeof(K));
  memcpy(idx, it, (size_t)n * sizeof(uint32_t));
}

/* ---- the top level, split across threads ----------------------------------- */

typedef struct F(top_job_) {
  K *keys, *kt;
  uint32_t *idx, *it;
  int64_t n, block, blocks;
  int top;                              /* the MSD byte */
  uint32_t (*hist)[F(BYTES_)][256];     /* per block */
  uint32_t starts[257];                 /* bucket offsets after the scatter */
} F(top_job_);

static void F(top_hist_)(int64_t begin, int64_t end, void *arg) {
  F(top_job_) *j = arg;
  for (int64_t b = begin; b < end; b++) {
    uint32_t(*h)[256] = j->hist[b];
    memset(h, 0, sizeof(uint32_t) * F(BYTES_) * 256);
    int64_t lo = b * j->block, hi = lo + j->block < j->n ? lo + j->block : j->n;
    for (int64_t i = lo; i < hi; i++) {
      K k = j->keys[i];
      for (int byte = 0; byte < F(BYTES_); byte++) h[byte][(k >> (8 * byte)) & 0xff]++;
    }
  }
}

static void F(top_scatter_)(int64_t begin, int64_t end, void *arg) {
  F(top_job_) *j = arg;
  for (int64_t b = begin; b < end; b++) {
    int64_t lo = b * j->block, hi = lo + j->block < j->n ? lo + j->block : j->n;
    F(scatter_)(j->keys, j->idx, j->kt, j->it, lo, hi, 8 * j->top, j->hist[b][j->top]);
  }
}

/* Range [begin, end) of scratch positions: sorts the buckets starting in it. */
static void F(top_buckets_)(int64_t begin, int64_t end, void *arg) {
  F(top_job_) *j = arg;
  for (int v = 0; v < 256; v++) {
    int64_t at = j->starts[v], count = (int64_t)j->starts[v + 1] - at;
    if (at < begin || at >= end || count == 0) continue;
    F(sort_range_)(j->kt + at, j->it + at, j->keys + at, j->idx + at, count, j->top - 1);
  }
}

static void F(run_)(int parallel, int64_t n, int64_t grain, rt_range_fn fn, void *ctx) {
  if (parallel)
    rt_parallel_for(n, grain, fn, ctx);
  else
    fn(0, n, ctx);
}

int F(rt_sort_pairs)(K *keys, uint32_t *idx, K *keys_tmp, uint32_t *idx_tmp, int64_t n,
                     int parallel) {
  if (n <= LSD_MAX) {
    F(sort_range_)(keys, idx, keys_tmp, idx_tmp, n, F(BYTES_) - 1);
    return 0;
  }
  F(top_job_) j = {.keys = keys, .kt = keys_tmp, .idx = idx, .it = idx_tmp, .n = n};
  j.block = (n + MAX_BLOCKS - 1) / MAX_BLOCKS;
  if (j.block < BLOCK) j.block = BLOCK;
  j.blocks = (n + j.block - 1) / j.block;
  j.hist = malloc((size_t)j.blocks * sizeof *j.hist);
  if (!j.hist) { /* the serial path needs no memory */
    F(sort_range_)(keys, idx, keys_tmp, idx_tmp, n, F(BYTES_) - 1);
    return 0;
  }
  F(run_)(parallel, j.blocks, 1, F(top_hist_), &j);
  /* The MSD byte: the highest one that varies. Blocks' histograms become
   * their write offsets for that byte. */
  j.top = -1;
  for (int byte = F(BYTES_) - 1; byte >= 0 && j.top < 0; byte--) {
    for (int v = 0; v < 256; v++) {
      uint64_t total = 0;
      for (int64_t b = 0; b < j.blocks; b++) total += j.hist[b][byte][v];
      if (total == (uint64_t)n) break;
      if (total > 0) {
        j.top = byte;
        break;
      }
    }
  }
  if (j.top < 0) { /* every key is equal: already in stable order */
    free(j.hist);
    return 0;
  }
  uint32_t sum = 0;
  for (int v = 0; v < 256; v++) {
    j.starts[v] = sum;
    for (int64_t b = 0; b < j.blocks; b++) {
      uint32_t c = j.hist[b][j.top][v];
      j.hist[b][j.top][v] = sum;
      sum += c;
    }
  }
  j.starts[256] = sum;
  F(run_)(parallel, j.blocks, 1, F(top_scatter_), &j);
  if (j.top > 0) F(run_)(parallel, n, LSD_MAX, F(top_buckets_), &j);
  free(j.hist);
  return 1;
}

#undef F
#undef CAT2_
#undef CAT_
