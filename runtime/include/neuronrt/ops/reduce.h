/* reduce ops (see op_list.h). Each entry's comment states its operands and
 * scalars. */
#ifndef NEURONRT_OPS_REDUCE_H
#define NEURONRT_OPS_REDUCE_H

#define NRT_REDUCE_OPS(X)

#endif
