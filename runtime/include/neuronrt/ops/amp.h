/* The gradient scaler's ops (torch.amp.GradScaler, see op_list.h).
 *
 *   AMP_UNSCALE       outputs [grad, found_inf]  inputs [inv_scale]
 *       grad (float32, float64, bfloat16 or float16, any strides) is
 *       multiplied in place by inv_scale (float32, one element; float16 and
 *       bfloat16 compute in float32). found_inf (float32, one element) is set
 *       to 1 when an element of grad was infinite or NaN, and left as it is
 *       otherwise, so one found_inf collects the verdict of many gradients.
 *   AMP_UPDATE_SCALE  outputs [scale (float32, one element),
 *                              growth_tracker (int32, one element)]
 *                     inputs  [found_inf (float32, one element)]
 *                     scalars [growth_factor, backoff_factor, growth_interval]
 *       After an overflow the scale is multiplied by backoff_factor and the
 *       tracker restarts; otherwise the tracker counts successful steps and
 *       every growth_interval of them the scale grows by growth_factor
 *       (unless that would make it infinite).
 */
#ifndef NEURONRT_OPS_AMP_H
#define NEURONRT_OPS_AMP_H

#define NRT_AMP_OPS(X)        \
  X(AMP_UNSCALE, amp_unscale) \
  X(AMP_UPDATE_SCALE, amp_update_scale)

#endif
