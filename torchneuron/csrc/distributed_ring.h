// Ring reductions for the c10d backend "neuron" (distributed.cpp): the
// bytes go through a transport group's send and recv (gloo, on CPU views of
// device memory), each received chunk is reduced into the local one by the
// runtime's own pointwise kernels (threaded, vectorised), never by gloo's
// or a C++ loop. Run on a stream worker, inside a collective's host task.
#pragma once

#include <ATen/Tensor.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>

#include "neuronrt/nrt.h"

namespace torchneuron {

// The CPU tensor over a neuron tensor's memory (the same bytes: device
// memory is host memory in the simulator).
at::Tensor cpu_view(const at::Tensor& t);

// The runtime op of a reduction (code, compute dtype, scalars), operands
// [into, a, b] left for the caller: into = a (op) b.
nrt_op reduction_op(const c10d::ReduceOp& op, at::ScalarType dtype, const char* what);

// The runtime kernel of a reduction: into = into (op) from, both dense
// device tensors of one dtype and shape. AVG reduces as SUM (the caller
// divides once at the end); PREMUL_SUM as SUM of premultiplied values.
void reduce_into(const at::Tensor& into, const at::Tensor& from, const c10d::ReduceOp& op);

// flat *= factor, or flat /= divisor (dense device tensors).
void scale_by(const at::Tensor& flat, double factor, bool divide);

// The PREMUL_SUM factor of op (1 for other ops).
double premul_factor(const c10d::ReduceOp& op);

// Every rank's flat (dense, 1-d, same size) reduced into every rank's flat.
// scratch holds at least ceil(numel / size) elements of flat's dtype.
void ring_allreduce(c10d::Backend& transport, const at::Tensor& flat, const at::Tensor& scratch,
                    const c10d::ReduceOp& op);

// Reduce-scatter in place: flat is size chunks of chunk elements; chunk
// `rank` of every rank's flat, reduced, ends in chunk `rank` of this one's
// (the others are left partly reduced). scratch holds chunk elements.
void ring_reduce_scatter(c10d::Backend& transport, const at::Tensor& flat, const at::Tensor& scratch,
                         int64_t chunk, const c10d::ReduceOp& op);

}  // namespace torchneuron
