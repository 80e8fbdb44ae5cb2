// goldminer._split: Python binding of the split (pybind11 over split.h).
//
//   worker, trainer, report = goldminer.split(scripted_model, example_inputs,
//                                             transform=None, mode="extended")
//
// Programs cross the boundary serialized (torch.jit.save / torch.save bytes)
// rather than as torch's own pybind11 types: this module then needs neither
// torch's Python headers nor the same pybind11 build as torch, and the
// worker and trainer come back as ordinary torch.jit.ScriptModules. The
// trainer holds a copy of the model's parameters.
#include <pybind11/pybind11.h>

#include <string>

#include "goldminer/split.h"

namespace py = pybind11;

namespace goldminer {
namespace {

std::string save_program(const py::module_& torch, const py::module_& io, const py::object& program,
                         const char* what) {
  if (!py::isinstance(program, torch.attr("jit").attr("ScriptModule")))
    throw py::type_error(std::string("goldminer.split: ") + what +
                         " must be a torch.jit.ScriptModule (use torch.jit.script), not " +
                         py::str(py::type::of(program)).cast<std::string>());
  py::object buffer = io.attr("BytesIO")();
  torch.attr("jit").attr("save")(program, buffer);
  return buffer.attr("getvalue")().cast<std::string>();
}

// "cuda" when the model's parameters are on a GPU or one is visible to
// torch (where the trainer will run it), else "cpu".
std::string device_of(const py::module_& torch, const py::object& model) {
  for (const py::handle p : model.attr("parameters")())
    if (p.attr("is_cuda").cast<bool>()) return "cuda";
  return torch.attr("cuda").attr("is_available")().cast<bool>() ? "cuda" : "cpu";
}

py::tuple split(const py::object& model, const py::object& example_inputs, const py::object& transform,
                const std::string& mode, const std::string& method, const py::object& transfer_gbps, bool measure,
                int repeat, bool tensors_only, const py::object& trainer_device, int64_t batch_size, bool pinned,
                double keep_margin) {
  py::module_ torch = py::module_::import("torch");
  py::module_ io = py::module_::import("io");
  SplitOptions options;
  auto parsed = parse_split_mode(mode);
  if (!parsed.ok()) throw py::value_error("goldminer.split: mode: invalid value '" + mode +
                                          "': expected extended, dataset or max");
  options.mode = *parsed;
  options.method = method;
  options.transfer_gbps = transfer_gbps.is_none() ? 0 : transfer_gbps.cast<double>();
  if (!transfer_gbps.is_none() && options.transfer_gbps <= 0)
    throw py::value_error("goldminer.split: transfer_gbps must be > 0 (or None: detect)");
  options.measure = measure;
  options.repeat = repeat;
  options.tensors_only = tensors_only;
  if (batch_size < 0) throw py::value_error("goldminer.split: batch_size must be >= 1 (or 0: the example's)");
  options.batch_size = batch_size;
  options.pinned = pinned;
  if (!(keep_margin >= 0 && keep_margin < 1)) throw py::value_error("goldminer.split: keep_margin must be in [0, 1)");
  options.keep_margin = keep_margin;
  const std::string device = trainer_device.is_none() ? device_of(torch, model) : trainer_device.cast<std::string>();
  auto parsed_device = parse_trainer_device(device);
  if (!parsed_device.ok())
    throw py::value_error("goldminer.split: trainer_device: invalid value '" + device + "': expected cuda or cpu");
  options.trainer_device = *parsed_device;
  // The job's trainer address, as this Python process's environment has it
  // (a --goldminer job's GOLDMINER_LISTEN): its interface's speed is the
  // one the cut is priced at.
  options.listen = py::module_::import("os").attr("environ").attr("get")("GOLDMINER_LISTEN", "").cast<std::string>();

  SplitInputs in;
  in.model = save_program(torch, io, model, "model");
  if (!transform.is_none()) in.transform = save_program(torch, io, transform, "transform");
  py::tuple inputs = py::isinstance<py::tuple>(example_inputs) || py::isinstance<py::list>(example_inputs)
                         ? py::tuple(example_inputs)
                         : py::make_tuple(example_inputs);
  py::object buffer = io.attr("BytesIO")();
  torch.attr("save")(inputs, buffer);
  in.example = buffer.attr("getvalue")().cast<std::string>();
  in.example_name = "example_inputs";

  Expected<SerializedSplit> result = Status::error("not run");
  {
    py::gil_scoped_release release;
    result = split_serialized(in, options);
  }
  if (!result.ok()) throw py::value_error("goldminer.split: " + result.status().message());
  auto load = [&](const std::string& bytes) {
    return torch.attr("jit").attr("load")(io.attr("BytesIO")(py::bytes(bytes)));
  };
  py::object report = py::module_::import("json").attr("loads")(report_json(result->report));
  return py::make_tuple(load(result->worker), load(result->trainer), report);
}

}  // namespace
}  // namespace goldminer

PYBIND11_MODULE(_split, m) {
  m.doc() = "GoldMiner: automatic stateless-subgraph split of TorchScript programs (goldminer-split(1))";
  m.def("split", &goldminer::split,
        "split(model, example_inputs, transform=None, mode='extended', method='forward', transfer_gbps=None,\n"
        "      measure=True, repeat=5, tensors_only=True, trainer_device=None, batch_size=0, pinned=False,\n"
        "      keep_margin=0.05) -> (worker, trainer, report)\n\n"
        "Splits the scripted `model` (and the scripted per-batch `transform` run before it) into a worker\n"
        "program (runs on data workers, returns the cut values as a tuple) and a trainer program (holds\n"
        "all parameters): trainer(*worker(*x)) == model(*transform(*x)). `example_inputs` is a tuple of\n"
        "inputs (of the transform when given). `report` is a dict with the keys of\n"
        "goldminer-split --report-json. With tensors_only (the default) only tensors cross the cut, so\n"
        "goldminer-dw can run the worker program and send its outputs (goldminer.Session(program=worker)).\n"
        "The cut is priced for the trainer (goldminer-split(1)): trainer_device 'cuda' or 'cpu' (None: 'cuda'\n"
        "when the model's parameters are on a GPU or torch sees one, else 'cpu'), the job's batch_size (0: the\n"
        "example's), transfer_gbps the trainer's share of the network in GB/s (None: from the NIC's speed).\n"
        "Raises ValueError with the cause on bad input.",
        py::arg("model"), py::arg("example_inputs"), py::arg("transform") = py::none(),
        py::arg("mode") = "extended", py::arg("method") = "forward", py::arg("transfer_gbps") = py::none(),
        py::arg("measure") = true, py::arg("repeat") = 5, py::arg("tensors_only") = true,
        py::arg("trainer_device") = py::none(), py::arg("batch_size") = 0, py::arg("pinned") = false,
        py::arg("keep_margin") = 0.05);
}
