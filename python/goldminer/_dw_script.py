"""A TorchScript worker program run by a data worker (goldminer-dw) with the
job's own torch: `python -m goldminer._dw_child --torchscript --threads=N
--saved-by=VERSION` (goldminer._dw_pipe documents the pipe protocol).

goldminer.Session hands goldminer-dw the program this way when the trainer's
torch is not the libtorch goldminer-dw links. The program runs here as
dw_daemon/torch_program.cc runs it in process, so that either path gives the
same batches: the reader's tensors are forward's arguments in order (views,
not copies), torch.manual_seed(seed) before each batch, forward under
no_grad, and its result (a tensor, or a tuple or list of tensors) sent as
contiguous tensors of the wire's dtypes. Errors read as that file's do.
"""

import io
import mmap
import os
import struct
import sys
import warnings

from goldminer._dw_pipe import SharedMemory, of_environment, read, reply_error, reply_tensors

# The names libtorch gives the dtypes the wire cannot carry (c10::toString),
# so that an error reads the same whichever path ran the program.
_C10_NAMES = {"float16": "Half", "bfloat16": "BFloat16", "int8": "Char", "int16": "Short",
              "complex32": "ComplexHalf", "complex64": "ComplexFloat", "complex128": "ComplexDouble",
              "qint8": "QInt8", "quint8": "QUInt8", "qint32": "QInt32"}

_INTERPRETER_FAILED = "The following operation failed in the TorchScript interpreter"


class _ProgramError(Exception):
    """forward's failure, as the worker reports it; `environment`: the machine's (out of memory)."""

    def __init__(self, message, environment=False):
        super().__init__(message)
        self.environment = environment


def cause_of(what):
    """The line of a torch error's text that says what went wrong: its first,
    or for one the TorchScript interpreter wraps (a traceback follows) its
    last (torch_program.cc's cause_of)."""
    first = what.split("\n", 1)[0]
    if not first.startswith(_INTERPRETER_FAILED):
        return first
    lines = what.rstrip("\n").split("\n")
    return lines[-1] if lines and lines[-1] else first


def _first_line(what):
    """The first line of an error's text that is not empty (an unknown operator's starts with a newline)."""
    return next((line for line in what.split("\n") if line.strip()), "")


def _value_kind(v):
    """The IValue tag libtorch would name for a result that is no tensor."""
    if v is None:
        return "None"
    for t, name in ((bool, "Bool"), (int, "Int"), (float, "Double"), (str, "String"), (list, "GenericList"),
                    (dict, "GenericDict"), (tuple, "Tuple")):
        if isinstance(v, t):
            return name
    return type(v).__name__


class ScriptProgram:
    """The loaded module and what running it needs."""

    def __init__(self, torch, module):
        from goldminer._tree import WIRE_DTYPES
        self.torch = torch
        self.module = module
        self.wire = WIRE_DTYPES
        self.dtypes = {code: dtype for dtype, code in WIRE_DTYPES.items()}
        self.sizes = {code: torch.empty(0, dtype=dtype).element_size() for dtype, code in WIRE_DTYPES.items()}
        # torch.manual_seed also seeds CUDA's generators, as torch::manual_seed
        # does in process; without CUDA the CPU generator alone is the same
        # state, set in a few microseconds instead of 50-200.
        self.seed = torch.manual_seed if torch.cuda.is_available() else torch.default_generator.manual_seed
        self.oom_types = tuple(t for t in (MemoryError, getattr(torch, "OutOfMemoryError", None),
                                           getattr(torch.cuda, "OutOfMemoryError", None)) if t is not None)

    def inputs(self, table, memory):
        """The reader's tensors: views of the input memory (the program must not write to them)."""
        torch = self.torch
        tensors = []
        for i, (dtype, shape, nbytes, offset) in enumerate(table):
            if dtype not in self.dtypes:
                raise _ProgramError("torchscript program: input tensor %d has the unknown dtype %d" % (i, dtype))
            numel = 1
            for s in shape:
                numel *= s
            if numel * self.sizes[dtype] != nbytes or offset + nbytes > len(memory):
                raise _ProgramError("torchscript program: input tensor %d: %d bytes at %d for shape %s in %d bytes"
                                    % (i, nbytes, offset, list(shape), len(memory)))
            if numel == 0:
                tensors.append(torch.empty(shape, dtype=self.dtypes[dtype]))
            else:
                t = torch.frombuffer(memory, dtype=self.dtypes[dtype], count=numel, offset=offset)
                tensors.append(t.view(shape))
        return tensors

    def run(self, inputs, seed):
        """forward's output tensors, contiguous; raises _ProgramError."""
        torch = self.torch
        try:
            with torch.no_grad():
                self.seed(seed)
                out = self.module.forward(*inputs)
        except Exception as e:
            what = str(e)
            if isinstance(e, self.oom_types) or "DefaultCPUAllocator: can't allocate memory" in what:
                raise _ProgramError("program: forward ran out of memory: " + (cause_of(what) or type(e).__name__),
                                    environment=True) from None
            raise _ProgramError("program: forward failed: " + cause_of(what)) from None
        if isinstance(out, torch.Tensor):
            tensors = [out]
        elif isinstance(out, tuple):
            if not all(isinstance(v, torch.Tensor) for v in out):
                raise _ProgramError("program: forward returned a tuple holding a non-tensor")
            tensors = list(out)
        elif isinstance(out, list) and all(isinstance(v, torch.Tensor) for v in out):
            tensors = out
        else:
            raise _ProgramError("program: forward must return a tensor or a tuple of tensors, it returned "
                                + _value_kind(out))
        result = []
        for t in tensors:
            if t.dtype not in self.wire:
                name = str(t.dtype).replace("torch.", "")
                raise _ProgramError("program: output dtype %s cannot be sent (uint8, int32, int64, float32, float64, "
                                    "bool)" % _C10_NAMES.get(name, name))
            result.append(t.contiguous())
        return result


class _InputMemory:
    """The memfd the worker writes a batch's tensors into (its second one), mapped as it grows."""

    def __init__(self, fd):
        self.fd, self.map = fd, None

    def view(self):
        size = os.fstat(self.fd).st_size
        if self.map is None or len(self.map) < size:
            # The old map closes when the last tensor viewing it goes.
            self.map = mmap.mmap(self.fd, size)
        return self.map


def _read_table(requests, count):
    table = []
    for _ in range(count):
        dtype, ndim = struct.unpack("<BB", read(requests, 2))
        shape = struct.unpack("<%dq" % ndim, read(requests, 8 * ndim))
        nbytes, offset = struct.unpack("<QQ", read(requests, 16))
        table.append((dtype, shape, nbytes, offset))
    return table


def _options(args):
    """--threads=N and --saved-by=VERSION."""
    options = {"threads": 1, "saved-by": "(not given)"}
    for a in args:
        key, _, value = a.lstrip("-").partition("=")
        if key not in options or not value:
            raise ValueError("goldminer._dw_child --torchscript: unknown argument %r" % a)
        options[key] = int(value) if key == "threads" else value
    return options


def load(payload, saved_by, threads):
    """The module as a ScriptProgram; raises RuntimeError naming both torch versions when it cannot load."""
    try:
        import torch
    except Exception as e:
        raise RuntimeError("torchscript program: %s cannot import torch: %s: %s" % (
            sys.executable, type(e).__name__, e)) from None
    torch.set_num_threads(max(1, threads))  # intra-op threads, as goldminer-dw's in-process runner
    try:
        # torch 2.x deprecates TorchScript: the trainer chose it, each child need not say so.
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=FutureWarning, message=".*torch.jit.load")
            module = torch.jit.load(io.BytesIO(payload), map_location="cpu")
        module.eval()
        has_forward = module._c._has_method("forward") if hasattr(module._c, "_has_method") \
            else hasattr(module, "forward")
        if not has_forward:
            raise RuntimeError("the TorchScript module has no forward method")
    except Exception as e:
        raise RuntimeError("torchscript program: torch %s (%s) cannot load the worker program saved by torch %s: "
                           "%s: %s" % (torch.__version__, sys.executable, saved_by, type(e).__name__,
                                       _first_line(str(e)))) from None
    return ScriptProgram(torch, module)


def serve(args, payload, requests, replies, memory):
    """Loads the program, answers ready, then runs each batch the worker
    sends; `memory`: the replies' memfd and the inputs' (_dw_pipe.open_pipes)."""
    try:
        options = _options(args)
        program = load(payload, options["saved-by"], options["threads"])
    except (RuntimeError, ValueError) as e:
        reply_error(replies, str(e))
        return 1
    shared = SharedMemory(memory[0])
    inputs = _InputMemory(memory[1])
    reply_tensors(replies, [], shared)
    while True:
        try:
            _epoch, seed, count = struct.unpack("<IQI", read(requests, 16))
            table = _read_table(requests, count)
        except EOFError:
            return 0
        try:
            try:
                outputs = program.run(program.inputs(table, inputs.view()), seed)
                reply_tensors(replies, outputs, shared)
            except _ProgramError as e:
                reply_error(replies, str(e), e.environment)
            except BrokenPipeError:
                raise
            except Exception as e:  # placing the outputs (the shared memory): the machine's, or a bug here
                reply_error(replies, "torchscript program: %s: %s" % (type(e).__name__, e), of_environment(e))
        except BrokenPipeError:  # the worker is gone (stopped or killed): so is its batch
            return 0
