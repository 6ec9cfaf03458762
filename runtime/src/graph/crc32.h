/* CRC-32 (IEEE 802.3, reflected, as zlib.crc32) of the graph's bytes. */
#ifndef NEURONRT_GRAPH_CRC32_H
#define NEURONRT_GRAPH_CRC32_H

#include <stddef.h>
#include <stdint.h>

uint32_t rt_crc32(const void *data, size_t size);

#endif
