// Complex tensors through the real kernels of indexing and data-movement ops
// (complex_index.cpp), and complex_path_first(), which registers an aten
// kernel with such a complex path in front of it.
#pragma once

#include <ATen/ATen.h>
#include <torch/library.h>

#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "runtime_limits.h"
#include "storage_fallback.h"

namespace torchneuron {

// Each returns the op's result (for out= and in-place forms: the written
// tensor) when it computed it natively on the real view of a neuron complex
// tensor; nothing, touching nothing, for any other call.
using ComplexTry = std::optional<at::Tensor>;
ComplexTry try_complex_index_select(const at::Tensor& self, int64_t dim, const at::Tensor& index);
ComplexTry try_complex_index_select_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                                        at::Tensor& out);
ComplexTry try_complex_gather(const at::Tensor& self, int64_t dim, const at::Tensor& index, bool sparse_grad);
ComplexTry try_complex_gather_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, bool sparse_grad,
                                  at::Tensor& out);
ComplexTry try_complex_take(const at::Tensor& self, const at::Tensor& index);
ComplexTry try_complex_take_out(const at::Tensor& self, const at::Tensor& index, at::Tensor& out);
ComplexTry try_complex_index(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices);
ComplexTry try_complex_index_out(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices,
                                 at::Tensor& out);
ComplexTry try_complex_flip(const at::Tensor& self, at::IntArrayRef dims);
ComplexTry try_complex_triangle(bool upper, const at::Tensor& self, int64_t diagonal);
ComplexTry try_complex_triangle_out(bool upper, const at::Tensor& self, int64_t diagonal, at::Tensor& out);
ComplexTry try_complex_triangle_(bool upper, at::Tensor& self, int64_t diagonal);
ComplexTry try_complex_scatter_src_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                                       const at::Tensor& src, at::Tensor& out);
ComplexTry try_complex_scatter_value_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                                         const at::Scalar& value, at::Tensor& out);
ComplexTry try_complex_scatter_reduce_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                                          const at::Tensor& src, c10::string_view reduce, at::Tensor& out);
ComplexTry try_complex_scatter_value_reduce_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                                                const at::Scalar& value, c10::string_view reduce, at::Tensor& out);
ComplexTry try_complex_scatter_add_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                                       const at::Tensor& src, at::Tensor& out);
ComplexTry try_complex_scatter_reduce_two_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                                              const at::Tensor& src, c10::string_view reduce, bool include_self,
                                              at::Tensor& out);
ComplexTry try_complex_index_add_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                                     const at::Tensor& source, const at::Scalar& alpha, at::Tensor& out);
ComplexTry try_complex_index_copy_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                                      const at::Tensor& source, at::Tensor& out);
ComplexTry try_complex_index_fill_scalar_(at::Tensor& self, int64_t dim, const at::Tensor& index,
                                          const at::Scalar& value);
ComplexTry try_complex_index_fill_tensor_(at::Tensor& self, int64_t dim, const at::Tensor& index,
                                          const at::Tensor& value);
ComplexTry try_complex_put_(at::Tensor& self, const at::Tensor& index, const at::Tensor& source, bool accumulate);
ComplexTry try_complex_index_put_(at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices,
                                  const at::Tensor& values, bool accumulate, bool unsafe);

// fn registered as NEURON_LIBRARY_IMPL does (a runtime limit runs the call
// through the counted CPU fallback), with try_complex (same arguments,
// returning a ComplexTry) asked first. Unlike complex_first()
// (storage_fallback.h) the other storage dtypes still reach fn, whose
// kernels move them where they can.
template <class Ret, class... Args, class Try>
torch::CppFunction complex_path_first(const std::string& overload_name, Ret (*fn)(Args...), Try try_complex) {
  static_assert(limits_detail::guardable_v<Ret, Args...>, "complex_path_first: arguments must be borrowed");
  auto op = std::make_shared<limits_detail::LazyOp>(overload_name);
  auto count = std::make_shared<ComplexPathCount>(overload_name);
  return torch::CppFunction([fn, op, try_complex, count](Args... args) -> Ret {
    const int64_t mark = count->mark();
    if (ComplexTry r = try_complex(args...)) {
      count->served(mark);
      if constexpr (std::is_same_v<Ret, at::Tensor>) {
        return std::move(*r);
      } else {
        std::vector<at::Tensor*> written;
        (storage_fallback_detail::note_written<Args>(written, std::forward<Args>(args)), ...);
        return *written.at(0);
      }
    }
    return limits_detail::guarded_call<Ret, Args...>(*op, fn, args...);
  });
}

}  // namespace torchneuron
