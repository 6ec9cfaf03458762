/* index ops (see op_list.h). Each entry's comment states its operands and
 * scalars. */
#ifndef NEURONRT_OPS_INDEX_H
#define NEURONRT_OPS_INDEX_H

#define NRT_INDEX_OPS(X)

#endif
