/* Fused optimizer steps (see op_list.h): one op updates one parameter
 * tensor and its state in a single pass, as torch.optim's fused=True
 * implementations (_fused_adam_, _fused_adamw_, _fused_sgd_) do.
 *
 * The tensors of one op share a shape and a floating dtype (any strides);
 * float16 and bfloat16 compute in float32, float32 in float32, float64 in
 * float64. The optional control operand is a float64 (3) vector
 * [lr, grad_scale, found_inf] that the caller builds on the device when the
 * learning rate or the gradient scaler's values are tensors; flags say which
 * of its entries apply. With grad_scale the gradient is divided by it and
 * the unscaled gradient is written back; with found_inf != 0 nothing is
 * updated.
 *
 *   FUSED_ADAM  outputs [param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq (amsgrad)]
 *               inputs  [step (one element, any floating dtype), control?]
 *               scalars [lr, beta1, beta2, weight_decay, eps, flags]
 *               flags: NRT_OPTIM_AMSGRAD, MAXIMIZE, DECOUPLED (AdamW), CONTROL_LR,
 *                      CONTROL_AMP
 *   FUSED_SGD   outputs [param, grad, momentum_buffer (momentum != 0)]
 *               inputs  [control?]
 *               scalars [lr, weight_decay, momentum, dampening, flags]
 *               flags: MAXIMIZE, NESTEROV, FIRST_STEP (the buffer starts as the
 *                      gradient), CONTROL_LR, CONTROL_AMP
 */
#ifndef NEURONRT_OPS_OPTIM_H
#define NEURONRT_OPS_OPTIM_H

#define NRT_OPTIM_AMSGRAD 1
#define NRT_OPTIM_MAXIMIZE 2
#define NRT_OPTIM_DECOUPLED 4
#define NRT_OPTIM_NESTEROV 8
#define NRT_OPTIM_FIRST_STEP 16
#define NRT_OPTIM_CONTROL_LR 32
#define NRT_OPTIM_CONTROL_AMP 64

#define NRT_OPTIM_OPS(X) \
  X(FUSED_ADAM, fused_adam) \
  X(FUSED_SGD, fused_sgd)

#endif
