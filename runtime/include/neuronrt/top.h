/* The neuron-top page: what a process publishes about its devices for
 * `neuron-top` to read.
 *
 * A process whose runtime has started (created a stream or device memory)
 * maps one file, <dir>/<pid>-<start>.page, where <dir> is
 * TORCHNEURON_TOP_DIR or /dev/shm/torchneuron-<uid> (a directory of mode
 * 0700 owned by the user; the page is 0600) and <start> the process's start
 * time in clock ticks since boot (/proc/<pid>/stat field 22), so that a
 * page outlives neither its process nor a reused pid unnoticed. A
 * publisher thread copies the runtime's counters into it every
 * NRT_TOP_INTERVAL_MS under a seqlock; the launch path is untouched. The
 * file is removed at exit (exit() or a return from main); a killed
 * process's page stays until a reader in the same PID namespace finds its
 * pid gone or its start time different, and removes it (readers in other
 * namespaces, sharing the directory, cannot tell and leave it). TORCHNEURON_TOP=0 publishes nothing.
 *
 * Layout (version 2, native byte order, every field 8-byte aligned): the
 * header, then device_count device records of device_bytes each. A reader
 * takes a consistent copy when `seq` is even and unchanged across the copy.
 */
#ifndef NEURONRT_TOP_H
#define NEURONRT_TOP_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NRT_TOP_MAGIC "NRTTOP\0\0"
#define NRT_TOP_VERSION 2u
#define NRT_TOP_BYTE_ORDER 0x01020304u
#define NRT_TOP_MAX_STREAMS 16 /* streams listed per device; the device's totals count all */
#define NRT_TOP_INTERVAL_MS 100

typedef struct nrt_top_stream {
  int64_t id;          /* nrt_stream_id */
  int64_t priority;
  uint64_t queued;     /* commands submitted and not yet completed */
  uint64_t submitted;  /* commands submitted since the stream was made */
  uint64_t ops;        /* kernels (each member of a fused group), copies and host tasks run */
  uint64_t busy_ns;    /* time its worker had work, since it started */
} nrt_top_stream;

typedef struct nrt_top_device {
  uint64_t allocated_bytes; /* the caching allocator's, as torch.neuron.memory_allocated */
  uint64_t reserved_bytes;  /* ... memory_reserved */
  uint64_t capacity_bytes;
  uint64_t ops;             /* the sum of ops over all its streams */
  uint64_t queued;          /* ... of queued */
  uint64_t busy_ns;         /* ... of busy_ns (streams overlap: can grow faster than time) */
  uint64_t fallbacks;       /* ATen calls on its tensors run through the CPU fallback */
  uint32_t streams;         /* streams whose worker has started */
  uint32_t listed;          /* entries of stream[] filled (the lowest ids) */
  nrt_top_stream stream[NRT_TOP_MAX_STREAMS];
} nrt_top_device;

typedef struct nrt_top_header {
  char magic[8];
  uint32_t version;
  uint32_t byte_order;      /* NRT_TOP_BYTE_ORDER as written */
  uint32_t header_bytes;    /* sizeof(nrt_top_header) */
  uint32_t device_bytes;    /* sizeof(nrt_top_device) */
  uint32_t stream_bytes;    /* sizeof(nrt_top_stream) */
  uint32_t max_streams;     /* NRT_TOP_MAX_STREAMS */
  uint32_t device_count;
  uint32_t uid;
  uint64_t page_bytes;      /* header_bytes + device_count * device_bytes */
  int64_t pid;
  uint64_t start_ticks;     /* the process's start time, /proc/<pid>/stat field 22 */
  uint64_t interval_ns;     /* how often the page is published */
  char target[8];           /* "trn2" */
  uint64_t pid_namespace;   /* inode of /proc/self/ns/pid: pid and start mean something only there */
  /* Written under the seqlock. */
  uint64_t seq;             /* odd while a publication is in progress */
  uint64_t published_ns;    /* CLOCK_MONOTONIC at the publication */
  uint64_t fallbacks;       /* ATen calls run through the CPU fallback (never reset) */
} nrt_top_header;

/* Counts one ATen call run through the CPU fallback on device's tensors
 * (the shim's; relaxed atomic adds). A device out of range (-1: none
 * known) counts in the process's total alone. */
void nrt_top_note_fallback(int32_t device);

/* The page's path, or "" while none is published (for tests). */
const char *nrt_top_page_path(void);

/* Publishes now rather than at the next tick (for tests); returns 0 when a
 * page is published. */
int nrt_top_publish_now(void);

#ifdef __cplusplus
}
#endif
#endif
