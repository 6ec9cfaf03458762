/* Where a process's kernel threads keep to when several ranks of a
 * launcher share the host (device.c decides, ops/engine/thread_pool.c
 * pins): each rank gets its own slice of the cores, starting here. */
#pragma once

/* Pinned kernel threads keep to this process's allowed cores from this
 * index on (0 unless LOCAL_WORLD_SIZE / LOCAL_RANK split them). */
int rt_kernel_core_offset(void);
