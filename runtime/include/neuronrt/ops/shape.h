/* shape ops (see op_list.h). Each entry's comment states its operands and
 * scalars. */
#ifndef NEURONRT_OPS_SHAPE_H
#define NEURONRT_OPS_SHAPE_H

#define NRT_SHAPE_OPS(X)

#endif
