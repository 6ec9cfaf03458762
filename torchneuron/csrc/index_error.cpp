#include "index_error.h"

#include <torch/csrc/Exceptions.h>
#include <torch/extension.h>

namespace torchneuron {
namespace {

// The Python class; created with the module, before any kernel can run.
PyObject* index_out_of_range_type = nullptr;

// torch::PyTorchError is what PyTorch's Python bindings turn into the
// Python type it names (c10::Error subclasses map to fixed built-in types).
struct IndexOutOfRangeError : torch::PyTorchError {
  using PyTorchError::PyTorchError;
  PyObject* python_type() override {
    return index_out_of_range_type != nullptr ? index_out_of_range_type : PyExc_IndexError;
  }
};

}  // namespace

void throw_index_out_of_range(const std::string& message) { throw IndexOutOfRangeError(message); }

}  // namespace torchneuron

void register_index_error(py::module_& m) {
  namespace tn = torchneuron;
  if (tn::index_out_of_range_type == nullptr) {
    py::tuple bases = py::make_tuple(py::handle(PyExc_IndexError), py::handle(PyExc_RuntimeError));
    tn::index_out_of_range_type = PyErr_NewExceptionWithDoc(
        "torchneuron.IndexOutOfRangeError",
        "An index out of range on the neuron device: both an IndexError and a RuntimeError, so "
        "that it is an instance of what the CPU raises for the same call.",
        bases.ptr(), nullptr);
    if (tn::index_out_of_range_type == nullptr) throw py::error_already_set();
  }
  m.attr("IndexOutOfRangeError") = py::handle(tn::index_out_of_range_type);
}
