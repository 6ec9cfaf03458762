/* Pairwise distances (torch.cdist, torch.pdist). Operands are 3-d views
 * (any strides), float32 or float64, accumulated in float64:
 *   CDIST          [out [B, P, R], x1 [B, P, M], x2 [B, R, M]]  scalars [p]:
 *                  out[b, i, j] = || x1[b, i] - x2[b, j] ||_p; p = 0 counts
 *                  the differing coordinates, p = inf takes the largest
 *   CDIST_BACKWARD [grad_x1 [B, P, M], grad [B, P, R], x1, x2, dist [B, P, R]]
 *                  scalars [p]: grad_x1[b, i] = sum over j of grad[b, i, j]
 *                  times the gradient of dist[b, i, j] in x1[b, i] (0 where
 *                  the distance is 0, and for p = 0) */
#ifndef NEURONRT_OPS_DISTANCE_H
#define NEURONRT_OPS_DISTANCE_H

#define NRT_DISTANCE_OPS(X) X(CDIST, cdist) X(CDIST_BACKWARD, cdist_backward)

#endif
