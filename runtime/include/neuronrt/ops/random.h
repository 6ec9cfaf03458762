/* random ops (see op_list.h). Each entry's comment states its operands and
 * scalars. */
#ifndef NEURONRT_OPS_RANDOM_H
#define NEURONRT_OPS_RANDOM_H

#define NRT_RANDOM_OPS(X)

#endif
