// Random ops on neuron: each ATen call becomes one counter-based runtime op
// (neuronrt/ops/random.h says which Philox counters each element reads).
//
// At launch, on the host, an op takes its generator's seed and reserves
// NRT_RANDOM_BLOCKS(n) counter blocks by advancing the generator's offset,
// so ops draw disjoint numbers in the order they enter the stream, and
// get_rng_state / set_rng_state capture and replay exactly what follows.
// Argument checks are PyTorch's own (at::native::templates), with stubs
// that build the runtime op in place of the CPU kernels.
#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/native/DistributionTemplates.h>
#include <ATen/native/Resize.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <limits>
#include <mutex>

#include "neuron_device.h"
#include "generator.h"
#include "op_tracking.h"
#include "pointwise.h"
#include "tensor_view.h"
#include "runtime_limits.h"
#include "op_scalars.h"

namespace torchneuron {
namespace {


// One random op under construction: operands and the parameters that
// follow [seed, offset].
class RandomOp {
 public:
  RandomOp(nrt_op_code code, int outputs) : name_(nrt_op_name(code)) {
    op_.code = code;
    op_.num_outputs = outputs;
    op_.num_scalars = 2;
  }

  RandomOp& operand(const at::Tensor& t) {
    TORCH_CHECK(t.device().type() == kNeuron, name_, ": expected a neuron tensor, got one on ",
                t.device());
    if (op_.num_operands == 0 && t.dim() > NRT_MAX_DIMS) {
      // An output of more dims than the runtime takes, with its size-1 dims
      // dropped and dims that step alike merged: the same elements in the
      // same logical row-major order, which is what picks each element's
      // counters, so the values are those of the unmerged tensor. (A later
      // operand of that many dims still raises the dims limit.)
      nrt_tensor_view unused;
      elementwise_views(t, t, &op_.operands[0], &unused, name_);
      op_.num_operands = 1;
      return *this;
    }
    op_.operands[op_.num_operands++] = to_view(t, name_);
    return *this;
  }

  // A host value broadcast to the output's shape, kept in float64.
  RandomOp& immediate(double value) {
    nrt_tensor_view v = op_.operands[0];
    v.data = nullptr;
    v.dtype = NRT_FLOAT64;
    for (int d = 0; d < v.ndim; d++) v.strides[d] = 0;
    op_.immediate_mask |= 1u << op_.num_operands;
    op_.immediates[op_.num_operands] = float_scalar(value);
    op_.operands[op_.num_operands++] = v;
    return *this;
  }

  RandomOp& param(nrt_scalar s) {
    op_.scalars[op_.num_scalars++] = s;
    return *this;
  }
  RandomOp& param(double v) { return param(float_scalar(v)); }

  nrt_tensor_view& view(int k) { return op_.operands[k]; }

  // Reserves the counters of `elements` from gen (or the device's default
  // generator) and launches on the current stream of the device.
  void launch(c10::Device device, std::optional<at::Generator> gen, int64_t elements) {
    auto* g = at::get_generator_or_default<NeuronGeneratorImpl>(gen, default_generator(device.index()));
    {
      std::lock_guard<std::mutex> lock(g->mutex_);
      op_.scalars[0] = int_scalar(static_cast<int64_t>(g->current_seed()));
      op_.scalars[1] = int_scalar(static_cast<int64_t>(g->reserve(NRT_RANDOM_BLOCKS(static_cast<uint64_t>(elements)))));
    }
    c10::DeviceGuard guard(device);
    torchneuron::launch(device.index(), op_);
  }

  void launch_on(const at::Tensor& out, std::optional<at::Generator> gen) {
    launch(out.device(), std::move(gen), out.numel());
  }

 private:
  const char* name_;
  nrt_op op_{};
};

// The tensor a nullary TensorIterator (borrowing_nullary_op(self)) was built on.
const at::Tensor& iter_self(at::TensorIteratorBase& iter) { return iter.tensor(0); }

// The error CPU kernels give for a dtype they do not dispatch.
void check_random_floating(const at::Tensor& self, const char* op) {
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(self.scalar_type()), '"', op,
                              "\" not implemented for '", self.scalar_type(), "'");
}

// ---- stubs for at::native::templates -----------------------------------------

template <typename RNG>
struct UniformStub {
  void operator()(at::TensorIteratorBase& iter, double from, double to,
                  std::optional<at::Generator> gen) {
    const at::Tensor& self = iter_self(iter);
    RandomOp(NRT_OP_UNIFORM, 1).operand(self).param(from).param(to).launch_on(self, gen);
  }
};

template <typename RNG>
struct NormalStub {
  void operator()(at::Tensor& self, double mean, double std, std::optional<at::Generator> gen) {
    check_random_floating(self, "normal_");
    RandomOp(NRT_OP_NORMAL, 1).operand(self).param(mean).param(std).launch_on(self, gen);
  }
};

// Parameters of a distribution over every dtype its CPU kernel accepts.
template <typename RNG>
struct ExponentialStub {
  void operator()(at::TensorIteratorBase& iter, double lambda, std::optional<at::Generator> gen) {
    const at::Tensor& self = iter_self(iter);
    check_random_floating(self, "exponential_");
    RandomOp(NRT_OP_EXPONENTIAL, 1).operand(self).param(lambda).launch_on(self, gen);
  }
};

template <typename RNG>
struct GeometricStub {
  void operator()(at::TensorIteratorBase& iter, double p, std::optional<at::Generator> gen) {
    const at::Tensor& self = iter_self(iter);
    AT_DISPATCH_ALL_TYPES_AND2(at::kHalf, at::kBFloat16, self.scalar_type(), "geometric_", [] {});
    RandomOp(NRT_OP_GEOMETRIC, 1).operand(self).param(p).launch_on(self, gen);
  }
};

template <typename RNG>
struct LogNormalStub {
  void operator()(at::TensorIteratorBase& iter, double mean, double std,
                  std::optional<at::Generator> gen) {
    const at::Tensor& self = iter_self(iter);
    check_random_floating(self, "log_normal_");
    RandomOp(NRT_OP_LOG_NORMAL, 1).operand(self).param(mean).param(std).launch_on(self, gen);
  }
};

template <typename RNG>
struct CauchyStub {
  void operator()(at::TensorIteratorBase& iter, double median, double sigma,
                  std::optional<at::Generator> gen) {
    const at::Tensor& self = iter_self(iter);
    RandomOp(NRT_OP_CAUCHY, 1).operand(self).param(median).param(sigma).launch_on(self, gen);
  }
};

template <typename RNG>
struct BernoulliScalarStub {
  void operator()(at::Tensor& self, double p, std::optional<at::Generator> gen) {
    RandomOp(NRT_OP_BERNOULLI, 1).operand(self).param(p).launch_on(self, gen);
  }
};

template <typename RNG>
struct BernoulliTensorStub {
  void operator()(at::Tensor& self, const at::Tensor& p_, std::optional<at::Generator> gen) {
    check_random_floating(p_, "bernoulli_");
    at::Tensor p = p_.device() == self.device() ? p_ : p_.to(self.device());
    RandomOp(NRT_OP_BERNOULLI_TENSOR, 1).operand(self).operand(p.expand(self.sizes()))
        .launch_on(self, gen);
  }
};

void launch_random(const at::Tensor& self, uint64_t range, int64_t base,
                   std::optional<at::Generator> gen) {
  RandomOp(NRT_OP_RANDOM, 1).operand(self).param(int_scalar(static_cast<int64_t>(range)))
      .param(int_scalar(base)).launch_on(self, gen);
}

// random_(): [0, max] for integers, [0, 2^digits] for floating dtypes (so
// that every value is exact), {0, 1} for bool, as on the CPU.
template <typename RNG>
struct RandomStub {
  void operator()(at::TensorIteratorBase& iter, std::optional<at::Generator> gen) {
    const at::Tensor& self = iter_self(iter);
    uint64_t range = 0;
    AT_DISPATCH_ALL_TYPES_AND3(at::kBool, at::kHalf, at::kBFloat16, self.scalar_type(), "random_", [&] {
      if constexpr (std::is_same_v<scalar_t, bool>) {
        range = 2;
      } else if constexpr (std::is_integral_v<scalar_t>) {
        range = static_cast<uint64_t>(std::numeric_limits<scalar_t>::max()) + 1;
      } else {
        range = (uint64_t{1} << std::numeric_limits<scalar_t>::digits) + 1;
      }
    });
    launch_random(self, range, 0, gen);
  }
};

template <typename RNG>
struct RandomFromToStub {
  void operator()(at::TensorIteratorBase& iter, uint64_t range, int64_t base,
                  std::optional<at::Generator> gen) {
    launch_random(iter_self(iter), range, base, gen);
  }
  void operator()(at::TensorIteratorBase& iter, std::optional<at::Generator> gen) {
    launch_random(iter_self(iter), 0, std::numeric_limits<int64_t>::min(), gen);  // all of int64
  }
};

// ---- registered kernels --------------------------------------------------------

using at::native::templates::bernoulli_impl_;

at::Tensor& uniform_(at::Tensor& self, double from, double to, std::optional<at::Generator> gen) {
  NEURON_TRACK_OP("aten::uniform_");
  return at::native::templates::uniform_impl_<UniformStub, NeuronGeneratorImpl>(self, from, to, gen);
}

at::Tensor& normal_(at::Tensor& self, double mean, double std, std::optional<at::Generator> gen) {
  NEURON_TRACK_OP("aten::normal_");
  return at::native::templates::normal_impl_<NormalStub, NeuronGeneratorImpl>(self, mean, std, gen);
}

// normal() with tensor mean and/or std: out = mean + std * z in one op, on
// the shape PyTorch gives each overload. A std < 0 inside a tensor raises
// at the call, as on CPU and CUDA (whose check also reads the minimum back).
at::Tensor& normal_into(at::Tensor& out, const at::Tensor* mean_t, double mean, const at::Tensor* std_t,
                        double std, std::optional<at::Generator> gen) {
  if (!std_t) TORCH_CHECK(std >= 0.0, "normal expects std >= 0.0, but found std ", std);
  if (std_t)
    TORCH_CHECK(std_t->numel() == 0 || std_t->min().ge(0).item<bool>(), "normal expects all elements of std >= 0.0");
  check_random_floating(out, "normal");
  if (out.numel() == 0) return out;
  RandomOp op(NRT_OP_NORMAL, 1);
  op.operand(out);
  for (auto [t, value] : {std::pair{mean_t, mean}, std::pair{std_t, std}}) {
    if (t && t->device() != out.device()) TORCH_CHECK(t->dim() == 0 && t->is_cpu(),
        "normal: expected mean and std on ", out.device(), ", got a tensor on ", t->device());
    if (t && t->device() == out.device())
      op.operand(t->expand(out.sizes()));
    else
      op.immediate(t ? t->item<double>() : value);
  }
  op.launch_on(out, gen);
  return out;
}

at::Tensor& normal_tensor_float_out(const at::Tensor& mean, double std,
                                    std::optional<at::Generator> gen, at::Tensor& out) {
  NEURON_TRACK_OP("aten::normal.Tensor_float_out");
  at::native::resize_output(out, at::infer_size(mean.sizes(), out.sizes()));
  return normal_into(out, &mean, 0, nullptr, std, gen);
}

at::Tensor& normal_float_tensor_out(double mean, const at::Tensor& std,
                                    std::optional<at::Generator> gen, at::Tensor& out) {
  NEURON_TRACK_OP("aten::normal.float_Tensor_out");
  at::native::resize_output(out, std.sizes());
  return normal_into(out, nullptr, mean, &std, 0, gen);
}

at::Tensor& normal_tensor_tensor_out(const at::Tensor& mean, const at::Tensor& std,
                                     std::optional<at::Generator> gen, at::Tensor& out) {
  NEURON_TRACK_OP("aten::normal.Tensor_Tensor_out");
  at::native::resize_output(out, at::infer_size(mean.sizes(), std.sizes()));
  return normal_into(out, &mean, 0, &std, 0, gen);
}

at::Tensor normal_tensor_float(const at::Tensor& mean, double std, std::optional<at::Generator> gen) {
  NEURON_TRACK_OP("aten::normal.Tensor_float");
  at::Tensor out = at::empty_like(mean, at::MemoryFormat::Contiguous);
  return normal_into(out, &mean, 0, nullptr, std, gen);
}

at::Tensor normal_float_tensor(double mean, const at::Tensor& std, std::optional<at::Generator> gen) {
  NEURON_TRACK_OP("aten::normal.float_Tensor");
  at::Tensor out = at::empty_like(std, at::MemoryFormat::Contiguous);
  return normal_into(out, nullptr, mean, &std, 0, gen);
}

at::Tensor normal_tensor_tensor(const at::Tensor& mean, const at::Tensor& std,
                                std::optional<at::Generator> gen) {
  NEURON_TRACK_OP("aten::normal.Tensor_Tensor");
  at::Tensor out = at::empty(at::infer_size(mean.sizes(), std.sizes()), mean.options(),
                             at::MemoryFormat::Contiguous);
  return normal_into(out, &mean, 0, &std, 0, gen);
}

at::Tensor& bernoulli_float_(at::Tensor& self, double p, std::optional<at::Generator> gen) {
  NEURON_TRACK_OP("aten::bernoulli_.float");
  return bernoulli_impl_<BernoulliScalarStub, NeuronGeneratorImpl>(self, p, gen);
}

at::Tensor& bernoulli_tensor_(at::Tensor& self, const at::Tensor& p, std::optional<at::Generator> gen) {
  NEURON_TRACK_OP("aten::bernoulli_.Tensor");
  return bernoulli_impl_<BernoulliTensorStub, NeuronGeneratorImpl>(self, p, gen);
}

at::Tensor& bernoulli_out(const at::Tensor& self, std::optional<at::Generator> gen, at::Tensor& out) {
  NEURON_TRACK_OP("aten::bernoulli.out");
  at::assert_no_internal_overlap(out);
  return at::native::templates::bernoulli_out_impl<BernoulliTensorStub, NeuronGeneratorImpl>(out, self, gen);
}

at::Tensor& random_(at::Tensor& self, std::optional<at::Generator> gen) {
  NEURON_TRACK_OP("aten::random_");
  return at::native::templates::random_impl<RandomStub, NeuronGeneratorImpl>(self, gen);
}

at::Tensor& random_from_(at::Tensor& self, int64_t from, std::optional<int64_t> to,
                         std::optional<at::Generator> gen) {
  NEURON_TRACK_OP("aten::random_.from");
  return at::native::templates::random_from_to_impl<RandomFromToStub, NeuronGeneratorImpl>(self, from, to, gen);
}

at::Tensor& random_to_(at::Tensor& self, int64_t to, std::optional<at::Generator> gen) {
  NEURON_TRACK_OP("aten::random_.to");
  return at::native::templates::random_from_to_impl<RandomFromToStub, NeuronGeneratorImpl>(self, 0, to, gen);
}

at::Tensor& exponential_(at::Tensor& self, double lambda, std::optional<at::Generator> gen) {
  NEURON_TRACK_OP("aten::exponential_");
  return at::native::templates::exponential_impl_<ExponentialStub, NeuronGeneratorImpl>(self, lambda, gen);
}

at::Tensor& geometric_(at::Tensor& self, double p, std::optional<at::Generator> gen) {
  NEURON_TRACK_OP("aten::geometric_");
  return at::native::templates::geometric_impl_<GeometricStub, NeuronGeneratorImpl>(self, p, gen);
}

at::Tensor& log_normal_(at::Tensor& self, double mean, double std, std::optional<at::Generator> gen) {
  NEURON_TRACK_OP("aten::log_normal_");
  return at::native::templates::log_normal_impl_<LogNormalStub, NeuronGeneratorImpl>(self, mean, std, gen);
}

at::Tensor& cauchy_(at::Tensor& self, double median, double sigma, std::optional<at::Generator> gen) {
  NEURON_TRACK_OP("aten::cauchy_");
  return at::native::templates::cauchy_impl_<CauchyStub, NeuronGeneratorImpl>(self, median, sigma, gen);
}

// n - 1 must be representable exactly in the output dtype (CPU's rule).
void check_randperm_size(int64_t n, at::ScalarType dtype) {
  TORCH_CHECK(n >= 0, "n must be non-negative, got", n);
  TORCH_CHECK(dtype != at::kBool, "randperm: not implemented for dtype Bool");
  AT_DISPATCH_ALL_TYPES_AND2(at::kHalf, at::kBFloat16, dtype, "randperm", [&] {
    if constexpr (std::is_integral_v<scalar_t>) {
      TORCH_CHECK(n <= 1 || n - 1 <= static_cast<int64_t>(std::numeric_limits<scalar_t>::max()),
                  "n is too large for result tensor type: '", dtype, "'");
    } else {
      constexpr int64_t exact = int64_t{1} << std::numeric_limits<scalar_t>::digits;
      TORCH_CHECK(n <= exact + 1, "n cannot be greater than ", exact + 1, " for ", dtype, " type.");
    }
  });
}

at::Tensor& randperm_out(int64_t n, std::optional<at::Generator> gen, at::Tensor& out) {
  NEURON_TRACK_OP("aten::randperm.generator_out");
  check_randperm_size(n, out.scalar_type());
  at::native::resize_output(out, {n});
  if (n == 0) return out;
  RandomOp(NRT_OP_RANDPERM, 1).operand(out).launch_on(out, gen);
  return out;
}

std::tuple<at::Tensor, at::Tensor> native_dropout(const at::Tensor& input, double p,
                                                  std::optional<bool> train) {
  NEURON_TRACK_OP("aten::native_dropout");
  check_random_floating(input, "native_dropout");
  if (input.numel() == 0) return {input, at::empty_like(input, input.options())};
  if (train.has_value() && !*train)
    return {input.clone(), at::ones_like(input, input.options().dtype(at::kBool))};
  TORCH_CHECK(p >= 0 && p <= 1, "native_dropout: p must be in [0, 1], but got ", p);
  double keep = 1.0 - p;
  at::Tensor out = at::empty_like(input);
  at::Tensor mask = at::empty_like(input, input.options().dtype(at::kBool));
  RandomOp(NRT_OP_DROPOUT, 2).operand(out).operand(mask).operand(input)
      .param(keep).param(keep == 0 ? 0.0 : 1.0 / keep).launch_on(out, std::nullopt);
  return {out, mask};
}

at::Tensor native_dropout_backward(const at::Tensor& grad, const at::Tensor& mask, double scale) {
  NEURON_TRACK_OP("aten::native_dropout_backward");
  TORCH_CHECK(mask.scalar_type() == at::kBool, "Mask should be Bool Scalar Type", mask.scalar_type());
  c10::DeviceGuard guard(grad.device());
  // Integer and bool gradients: the CPU computes grad * mask * scale, which
  // promotes to the default float dtype; the same native pointwise ops do.
  if (!at::isFloatingType(grad.scalar_type())) return grad * mask * scale;
  at::Tensor result;
  at::TensorIterator iter = at::TensorIteratorConfig()
                                .add_output(result)
                                .add_const_input(grad)
                                .add_const_input(mask)
                                .check_all_same_dtype(false)
                                .declare_static_dtype(grad.scalar_type())
                                .build();
  launch_iterator(NRT_OP_DROPOUT_BACKWARD, iter, {c10::IValue(scale)});
  return iter.output(0);
}

// The view of a 1-d tensor as one row.
nrt_tensor_view& as_row(nrt_tensor_view& v) {
  if (v.ndim == 1) {
    v.shape[1] = v.shape[0], v.strides[1] = v.strides[0];
    v.shape[0] = 1, v.strides[0] = 0;
    v.ndim = 2;
  }
  return v;
}

at::Tensor& multinomial_into(const at::Tensor& self, int64_t n_sample, bool replacement,
                             std::optional<at::Generator> gen, at::Tensor& out) {
  TORCH_CHECK(out.device() == self.device(), "multinomial arguments must have the same device");
  TORCH_CHECK(self.dim() > 0 && self.dim() <= 2, "prob_dist must be 1 or 2 dim");
  TORCH_CHECK(at::isFloatingType(self.scalar_type()),
              "multinomial only supports floating-point dtypes for input, got: ", self.scalar_type());
  TORCH_CHECK(out.scalar_type() == at::kLong, "multinomial expects Long tensor out, got: ",
              out.scalar_type());
  TORCH_CHECK(n_sample > 0, "cannot sample n_sample <= 0 samples");
  int64_t categories = self.size(-1);
  TORCH_CHECK(replacement || n_sample <= categories,
              "cannot sample n_sample > prob_dist.size(-1) samples without replacement");
  TORCH_CHECK(categories <= (int64_t{1} << 24), "number of categories cannot exceed 2^24");
  if (self.dim() == 1)
    out.resize_({n_sample});
  else
    out.resize_({self.size(0), n_sample});
  if (out.numel() == 0) return out;
  RandomOp op(NRT_OP_MULTINOMIAL, 1);
  op.operand(out).operand(self).param(int_scalar(replacement));
  as_row(op.view(0));
  as_row(op.view(1));
  int64_t rows = self.dim() == 1 ? 1 : self.size(0);
  op.launch(out.device(), gen, rows * (replacement ? n_sample : categories));
  return out;
}

at::Tensor& multinomial_out(const at::Tensor& self, int64_t n_sample, bool replacement,
                            std::optional<at::Generator> gen, at::Tensor& out) {
  NEURON_TRACK_OP("aten::multinomial.out");
  return multinomial_into(self, n_sample, replacement, gen, out);
}

at::Tensor multinomial(const at::Tensor& self, int64_t n_sample, bool replacement,
                       std::optional<at::Generator> gen) {
  NEURON_TRACK_OP("aten::multinomial");
  at::Tensor out = at::empty({0}, self.options().dtype(at::kLong));
  return multinomial_into(self, n_sample, replacement, gen, out);
}

}  // namespace

NEURON_LIBRARY_IMPL(aten, m) {
  m.impl("uniform_", uniform_);
  m.impl("normal_", normal_);
  m.impl("normal.Tensor_float", normal_tensor_float);
  m.impl("normal.Tensor_float_out", normal_tensor_float_out);
  m.impl("normal.float_Tensor", normal_float_tensor);
  m.impl("normal.float_Tensor_out", normal_float_tensor_out);
  m.impl("normal.Tensor_Tensor", normal_tensor_tensor);
  m.impl("normal.Tensor_Tensor_out", normal_tensor_tensor_out);
  m.impl("bernoulli_.float", bernoulli_float_);
  m.impl("bernoulli_.Tensor", bernoulli_tensor_);
  m.impl("bernoulli.out", bernoulli_out);
  m.impl("random_", random_);
  m.impl("random_.from", random_from_);
  m.impl("random_.to", random_to_);
  m.impl("exponential_", exponential_);
  m.impl("geometric_", geometric_);
  m.impl("log_normal_", log_normal_);
  m.impl("cauchy_", cauchy_);
  m.impl("randperm.generator_out", randperm_out);
  m.impl("native_dropout", native_dropout);
  m.impl("native_dropout_backward", native_dropout_backward);
  m.impl("multinomial", multinomial);
  m.impl("multinomial.out", multinomial_out);
}

}  // namespace torchneuron
