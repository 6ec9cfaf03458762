// Whole-sequence nn.LSTM, nn.GRU and nn.RNN on neuron: lstm, gru, rnn_tanh
// and rnn_relu, padded (.input) and packed (.data).
//
// ATen's own implementation of these ops is CompositeImplicitAutograd and,
// for a non-CPU device, computes two small GEMMs per time step (the input
// and the hidden projection) before the step's cell. Here the input
// projection of all steps of a layer and direction is ONE GEMM
// ([steps * batch, features] x [features, gates * hidden]); each step then
// runs its hidden GEMM and the fused cell (_thnn_fused_lstm_cell,
// _thnn_fused_gru_cell; tanh/relu for the plain RNN) on its rows of the
// precomputed gates. Packed sequences run the same way: each step takes the
// rows of its batch size, the state shrinks (forward) or grows (reverse)
// as sequences end, and the final state of a sequence is the state it had
// at its last step. Dropout between layers is at::dropout on each layer's
// output in training mode, as ATen applies it (same generator, same draws).
//
// Autograd: once a PrivateUse1 kernel exists for a CompositeImplicitAutograd
// op, the AutogradPrivateUse1 slot no longer runs the composite, so the same
// functions are registered there too. Above autograd they build the graph
// from differentiable at:: ops (linear, the fused cells and their
// backward, tanh/relu, cat, dropout), as a composite does; below autograd
// (inference mode) they run the same ops.
//
// Autocast sees the ops inside (linear in the autocast dtype, the cells as
// its policy says), as it sees those of ATen's composite.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <algorithm>
#include <tuple>
#include <vector>

#include "op_tracking.h"
#include "runtime_limits.h"

namespace torchneuron {
namespace {

using at::Tensor;
using at::TensorList;

enum class Cell { kLstm, kGru, kTanh, kRelu };

const char* op_name(Cell cell) {
  switch (cell) {
    case Cell::kLstm: return "lstm";
    case Cell::kGru: return "gru";
    case Cell::kTanh: return "rnn_tanh";
    case Cell::kRelu: return "rnn_relu";
  }
  return "rnn";
}

struct Weights {
  Tensor w_ih, w_hh, b_ih, b_hh, w_hr;  // biases and w_hr may be undefined
};

std::optional<Tensor> opt(const Tensor& t) { return t.defined() ? std::optional<Tensor>(t) : std::nullopt; }

// The input projection of every step at once: [rows, gates * hidden]. The
// plain RNN folds both biases in here (the step adds nothing else to
// them); LSTM and GRU hand theirs to the fused cell, as ATen does.
Tensor input_gates(Cell cell, const Tensor& x, const Weights& w) {
  if (cell == Cell::kLstm || cell == Cell::kGru) return at::linear(x, w.w_ih);
  Tensor gi = at::linear(x, w.w_ih, opt(w.b_ih));
  return w.b_hh.defined() ? gi + w.b_hh : gi;
}

// h W_hh^T [batch, gates * hidden]. For a float32 batch of 2-128 the
// runtime's GEMM computes it as (W_hh h^T)^T (gemm.c,
// small_m_transposed: W_hh's rows read where they lie instead of repacking
// W_hh^T on every step; the same bits). Session s46-lstm had done that here
// for batches that are a multiple of 32, with the cells reading the
// transposed gates with strides; through linear the gates come back
// row-major, and the LSTM step at hidden 256 took the same time either way
// (docs/performance.md, session s46-smallm).
Tensor hidden_gates(const Tensor& h, const Tensor& w_hh) { return at::linear(h, w_hh); }

// One step: the new (h, c) from the step's input gates and the state.
std::pair<Tensor, Tensor> step(Cell cell, const Tensor& gi, const Tensor& h, const Tensor& c, const Weights& w) {
  switch (cell) {
    case Cell::kLstm: {
      auto out = at::_thnn_fused_lstm_cell(gi, hidden_gates(h, w.w_hh), c, opt(w.b_ih), opt(w.b_hh));
      Tensor hy = std::get<0>(out);
      if (w.w_hr.defined()) hy = at::linear(hy, w.w_hr);
      return {hy, std::get<1>(out)};
    }
    case Cell::kGru:
      return {std::get<0>(at::_thnn_fused_gru_cell(gi, hidden_gates(h, w.w_hh), h, opt(w.b_ih), opt(w.b_hh))), c};
    case Cell::kTanh: return {at::tanh(at::addmm(gi, h, w.w_hh.t())), c};
    case Cell::kRelu: return {at::relu(at::addmm(gi, h, w.w_hh.t())), c};
  }
  return {h, c};
}

// Rows [start, start + n) of t (t itself when that is all of it).
Tensor rows(const Tensor& t, int64_t start, int64_t n) {
  return (start == 0 && n == t.size(0)) ? t : t.narrow(0, start, n);
}

struct DirectionResult {
  Tensor output, h, c;  // [rows, out], [batch, out], [batch, hidden] (c undefined but for LSTM)
};

// One layer in one direction over x [rows, features], whose rows are the
// steps' batches one after the other (sizes[t] rows for step t, not
// increasing). h0 [batch, out], c0 [batch, hidden] or undefined.
DirectionResult run_direction(Cell cell, const Tensor& x, const std::vector<int64_t>& sizes, const Weights& w,
                              const Tensor& h0, const Tensor& c0, bool reverse) {
  const int64_t steps = static_cast<int64_t>(sizes.size());
  const std::vector<Tensor> gates = at::split_with_sizes(input_gates(cell, x, w), sizes, 0);
  std::vector<Tensor> outs(steps);
  const bool lstm = cell == Cell::kLstm;
  if (!reverse) {
    // Sequences end as the batch shrinks: their final state is set aside.
    std::vector<Tensor> h_done, c_done;
    Tensor h = h0, c = c0;
    for (int64_t t = 0; t < steps; ++t) {
      const int64_t b = sizes[t], live = h.size(0);
      if (b < live) {
        h_done.push_back(h.narrow(0, b, live - b));
        h = h.narrow(0, 0, b);
        if (lstm) {
          c_done.push_back(c.narrow(0, b, live - b));
          c = c.narrow(0, 0, b);
        }
      }
      std::tie(h, c) = step(cell, gates[t], h, c, w);
      outs[t] = h;
    }
    if (!h_done.empty()) {
      h_done.push_back(h);
      std::reverse(h_done.begin(), h_done.end());
      h = at::cat(h_done, 0);
      if (lstm) {
        c_done.push_back(c);
        std::reverse(c_done.begin(), c_done.end());
        c = at::cat(c_done, 0);
      }
    }
    return {steps ? at::cat(outs, 0) : Tensor(), h, c};
  }
  // Reverse: the batch grows as earlier steps add sequences, each starting
  // from its own initial state.
  const int64_t first = steps ? sizes[steps - 1] : h0.size(0);
  Tensor h = rows(h0, 0, first), c = lstm ? rows(c0, 0, first) : c0;
  for (int64_t t = steps - 1; t >= 0; --t) {
    const int64_t b = sizes[t], live = h.size(0);
    if (b > live) {
      h = at::cat({h, h0.narrow(0, live, b - live)}, 0);
      if (lstm) c = at::cat({c, c0.narrow(0, live, b - live)}, 0);
    }
    std::tie(h, c) = step(cell, gates[t], h, c, w);
    outs[t] = h;
  }
  return {steps ? at::cat(outs, 0) : Tensor(), h, c};
}

struct SequenceResult {
  Tensor output, h, c;
};

// All layers and directions over x [rows, features] (sizes as above).
// hx: [layers * dirs, batch, out] and, for LSTM, cx [layers * dirs, batch, hidden].
SequenceResult run_sequence(Cell cell, const Tensor& x, const std::vector<int64_t>& sizes, const Tensor& hx,
                            const Tensor& cx, TensorList params, bool has_biases, int64_t num_layers,
                            double dropout, bool train, bool bidirectional) {
  const char* name = op_name(cell);
  const int64_t dirs = bidirectional ? 2 : 1;
  const bool proj = cell == Cell::kLstm && hx.size(2) != cx.size(2);
  const int64_t stride = (has_biases ? 4 : 2) + (proj ? 1 : 0);
  TORCH_CHECK(num_layers >= 1, name, ": expected at least one layer, got ", num_layers);
  TORCH_CHECK(static_cast<int64_t>(params.size()) == num_layers * dirs * stride, name, ": expected ",
              num_layers * dirs * stride, " weight tensors for ", num_layers, " layer(s), ", dirs,
              " direction(s)", has_biases ? " with biases" : "", proj ? " and projections" : "", ", got ",
              params.size());
  TORCH_CHECK(hx.dim() == 3 && hx.size(0) == num_layers * dirs, name, ": expected the initial hidden state to be [",
              num_layers * dirs, ", batch, hidden], got ", hx.sizes());
  TORCH_CHECK(!cx.defined() || (cx.dim() == 3 && cx.size(0) == hx.size(0) && cx.size(1) == hx.size(1)), name,
              ": expected the initial cell state to be [", num_layers * dirs, ", ", hx.size(1), ", hidden], got ",
              cx.sizes());
  TORCH_CHECK(sizes.empty() || sizes[0] == hx.size(1), name, ": the input's batch of ", sizes.empty() ? 0 : sizes[0],
              " differs from the hidden state's ", hx.size(1));
  std::vector<Tensor> hs, cs;
  Tensor input = x;
  for (int64_t layer = 0; layer < num_layers; ++layer) {
    std::vector<Tensor> outs;
    for (int64_t d = 0; d < dirs; ++d) {
      const int64_t index = layer * dirs + d;
      const TensorList p = params.slice(index * stride, stride);
      Weights w;
      w.w_ih = p[0];
      w.w_hh = p[1];
      if (has_biases) {
        w.b_ih = p[2];
        w.b_hh = p[3];
      }
      if (proj) w.w_hr = p[stride - 1];
      DirectionResult r = run_direction(cell, input, sizes, w, hx[index], cx.defined() ? cx[index] : Tensor(), d == 1);
      outs.push_back(r.output);
      hs.push_back(r.h);
      if (cx.defined()) cs.push_back(r.c);
    }
    if (sizes.empty()) {
      input = at::empty({0, hs.back().size(1) * dirs}, hs.back().options());
      continue;
    }
    input = dirs == 1 ? outs[0] : at::cat(outs, 1);
    if (dropout != 0 && train && layer + 1 < num_layers) input = at::dropout(input, dropout, train);
  }
  return {input, at::stack(hs, 0), cx.defined() ? at::stack(cs, 0) : Tensor()};
}

// .input: input [steps, batch, features] (batch_first: [batch, steps, features]).
SequenceResult run_padded(Cell cell, const Tensor& input, const Tensor& hx, const Tensor& cx, TensorList params,
                          bool has_biases, int64_t num_layers, double dropout, bool train, bool bidirectional,
                          bool batch_first) {
  const char* name = op_name(cell);
  TORCH_CHECK(input.dim() == 3, name, ": expected a 3-d input, got ", input.dim(), "-d");
  const Tensor seq = batch_first ? input.transpose(0, 1) : input;
  const int64_t steps = seq.size(0), batch = seq.size(1);
  const Tensor x = seq.reshape({steps * batch, seq.size(2)});
  SequenceResult r = run_sequence(cell, x, std::vector<int64_t>(steps, batch), hx, cx, params, has_biases,
                                  num_layers, dropout, train, bidirectional);
  r.output = r.output.view({steps, batch, r.output.size(1)});
  if (batch_first) r.output = r.output.transpose(0, 1);
  return r;
}

// .data: data [rows, features] packed step by step; batch_sizes on the host.
SequenceResult run_packed(Cell cell, const Tensor& data, const Tensor& batch_sizes, const Tensor& hx,
                          const Tensor& cx, TensorList params, bool has_biases, int64_t num_layers, double dropout,
                          bool train, bool bidirectional) {
  const char* name = op_name(cell);
  TORCH_CHECK(data.dim() == 2, name, ": expected packed data of 2 dimensions, got ", data.dim());
  TORCH_CHECK(batch_sizes.device().is_cpu() && batch_sizes.dim() == 1 && batch_sizes.scalar_type() == at::kLong,
              name, ": expected batch_sizes as a 1-d int64 tensor on the CPU, got ", batch_sizes.scalar_type(),
              " on ", batch_sizes.device());
  const Tensor bs = batch_sizes.contiguous();
  const int64_t* p = bs.data_ptr<int64_t>();
  std::vector<int64_t> sizes(p, p + bs.numel());
  int64_t total = 0;
  for (size_t t = 0; t < sizes.size(); ++t) {
    TORCH_CHECK(sizes[t] >= 0 && (t == 0 || sizes[t] <= sizes[t - 1]), name,
                ": expected non-increasing, non-negative batch_sizes");
    total += sizes[t];
  }
  TORCH_CHECK(total == data.size(0), name, ": batch_sizes add up to ", total, " rows, the data has ", data.size(0));
  return run_sequence(cell, data, sizes, hx, cx, params, has_biases, num_layers, dropout, train, bidirectional);
}

std::pair<Tensor, Tensor> lstm_state(TensorList hx) {
  TORCH_CHECK(hx.size() == 2, "lstm: expected two initial states (h0, c0), got ", hx.size());
  return {hx[0], hx[1]};
}

std::tuple<Tensor, Tensor, Tensor> lstm_input(const Tensor& input, TensorList hx, TensorList params, bool has_biases,
                                              int64_t num_layers, double dropout, bool train, bool bidirectional,
                                              bool batch_first) {
  NEURON_TRACK_OP("aten::lstm.input");
  auto [h0, c0] = lstm_state(hx);
  SequenceResult r = run_padded(Cell::kLstm, input, h0, c0, params, has_biases, num_layers, dropout, train,
                                bidirectional, batch_first);
  return {r.output, r.h, r.c};
}

std::tuple<Tensor, Tensor, Tensor> lstm_data(const Tensor& data, const Tensor& batch_sizes, TensorList hx,
                                             TensorList params, bool has_biases, int64_t num_layers, double dropout,
                                             bool train, bool bidirectional) {
  NEURON_TRACK_OP("aten::lstm.data");
  auto [h0, c0] = lstm_state(hx);
  SequenceResult r = run_packed(Cell::kLstm, data, batch_sizes, h0, c0, params, has_biases, num_layers, dropout,
                                train, bidirectional);
  return {r.output, r.h, r.c};
}

template <Cell kCell>
std::tuple<Tensor, Tensor> one_state_input(const Tensor& input, const Tensor& hx, TensorList params, bool has_biases,
                                           int64_t num_layers, double dropout, bool train, bool bidirectional,
                                           bool batch_first) {
  switch (kCell) {
    case Cell::kGru: NEURON_TRACK_OP("aten::gru.input"); break;
    case Cell::kTanh: NEURON_TRACK_OP("aten::rnn_tanh.input"); break;
    default: NEURON_TRACK_OP("aten::rnn_relu.input"); break;
  }
  SequenceResult r = run_padded(kCell, input, hx, Tensor(), params, has_biases, num_layers, dropout, train,
                                bidirectional, batch_first);
  return {r.output, r.h};
}

template <Cell kCell>
std::tuple<Tensor, Tensor> one_state_data(const Tensor& data, const Tensor& batch_sizes, const Tensor& hx,
                                          TensorList params, bool has_biases, int64_t num_layers, double dropout,
                                          bool train, bool bidirectional) {
  switch (kCell) {
    case Cell::kGru: NEURON_TRACK_OP("aten::gru.data"); break;
    case Cell::kTanh: NEURON_TRACK_OP("aten::rnn_tanh.data"); break;
    default: NEURON_TRACK_OP("aten::rnn_relu.data"); break;
  }
  SequenceResult r = run_packed(kCell, data, batch_sizes, hx, Tensor(), params, has_biases, num_layers, dropout,
                                train, bidirectional);
  return {r.output, r.h};
}

}  // namespace

// A macro rather than a template over the library type: TORCH_FN of the
// function templates must be named in a non-template context to instantiate.
#define NEURON_REGISTER_RNN_SEQUENCE(m)                                  \
  m.impl("lstm.input", TORCH_FN(lstm_input));                            \
  m.impl("lstm.data", TORCH_FN(lstm_data));                              \
  m.impl("gru.input", TORCH_FN(one_state_input<Cell::kGru>));            \
  m.impl("gru.data", TORCH_FN(one_state_data<Cell::kGru>));              \
  m.impl("rnn_tanh.input", TORCH_FN(one_state_input<Cell::kTanh>));      \
  m.impl("rnn_tanh.data", TORCH_FN(one_state_data<Cell::kTanh>));        \
  m.impl("rnn_relu.input", TORCH_FN(one_state_input<Cell::kRelu>));      \
  m.impl("rnn_relu.data", TORCH_FN(one_state_data<Cell::kRelu>))

NEURON_LIBRARY_IMPL(aten, m) { NEURON_REGISTER_RNN_SEQUENCE(m); }

// Above autograd: the graph is built from the differentiable ops inside.
TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) { NEURON_REGISTER_RNN_SEQUENCE(m); }

// This file's macros end here (the unity build puts files one after another).
#undef NEURON_REGISTER_RNN_SEQUENCE
}  // namespace torchneuron
