/* Compiled with -std=c11 -pedantic: the public API must stay portable C. */
#include "neuronrt/nrt.h"
#include "neuronrt/isa.h"
#include "neuronrt/adaptive_eager.h"
#include "neuronrt/fuse.h"
#include "neuronrt/graph.h"
#include "neuronrt/host_error.h"
#include "neuronrt/cache_inspect.h"
#include "neuronrt/top.h"

int nrt_header_check_dummy(void);
int nrt_header_check_dummy(void) { return NRT_OP_COUNT; }
