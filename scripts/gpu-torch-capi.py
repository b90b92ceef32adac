"""Runs ON the GPU machine: libtilejit.so in one process with PyTorch and
Triton (their own LLVMs), the reduced CE+TVD through the C ABI on torch CUDA
tensors on torch's current stream, against a float64 CE+TVD written with
torch.softmax; then the same call captured in a CUDA graph and replayed.

    python3 scripts/gpu-torch-capi.py gpu-bin/libtilejit.so [BT V]
"""
import ctypes
import sys

import torch
import triton  # noqa: F401  (loaded for its LLVM, beside tilejit's)

lib = ctypes.CDLL(sys.argv[1])
BT = int(sys.argv[2]) if len(sys.argv) > 2 else 4096
V = int(sys.argv[3]) if len(sys.argv) > 3 else 151936


class ReducedArgs(ctypes.Structure):
    _fields_ = [("dtype", ctypes.c_int32), ("bt", ctypes.c_int64),
                ("v", ctypes.c_int64), ("student", ctypes.c_void_p),
                ("teacher", ctypes.c_void_p), ("row_stride", ctypes.c_int64),
                ("teacher_stride", ctypes.c_int64),
                ("target", ctypes.c_void_p), ("grad", ctypes.c_void_p),
                ("grad_stride", ctypes.c_int64), ("loss", ctypes.c_void_p),
                ("ce", ctypes.c_void_p), ("tvd", ctypes.c_void_p),
                ("bad_target", ctypes.c_void_p),
                ("ignore_index", ctypes.c_int64), ("alpha", ctypes.c_double),
                ("beta", ctypes.c_double), ("mean", ctypes.c_int32),
                ("set", ctypes.c_void_p), ("n_set", ctypes.c_size_t)]


lib.tilejit_version.restype = ctypes.c_char_p
lib.tilejit_last_error.restype = ctypes.c_char_p
print("tilejit", lib.tilejit_version().decode(), "with torch", torch.__version__)


def check(rc):
    if rc != 0:
        raise RuntimeError(lib.tilejit_last_error().decode())


torch.manual_seed(0)
# A strided student: rows of a wider buffer (a non-contiguous view).
wide = torch.randn(BT, V + 64, device="cuda", dtype=torch.bfloat16) * 2
student = wide[:, :V]
teacher = (student.float() + 0.5 * torch.randn(BT, V, device="cuda")).bfloat16()
target = torch.randint(0, V, (BT,), device="cuda")
target[::7] = -100
grad = torch.empty(BT, V, device="cuda", dtype=torch.bfloat16)
loss = torch.empty(1, device="cuda")
bad = torch.empty(1, device="cuda", dtype=torch.int32)
a = ReducedArgs(3, BT, V, student.data_ptr(), teacher.data_ptr(),
                student.stride(0), teacher.stride(0), target.data_ptr(),
                grad.data_ptr(), V, loss.data_ptr(), None, None,
                bad.data_ptr(), -100, 1.0, 1.0, 1, None, 0)
nbytes = ctypes.c_size_t()
# Rows of another stride than the student's: a clear error, not wrong rows.
rc = lib.tilejit_ce_tvd_reduced_prepare(ctypes.byref(a), None, 0)
print("teacher stride", teacher.stride(0), "beside", student.stride(0), "->",
      lib.tilejit_last_error().decode() if rc else "accepted (WRONG)")
refused = rc != 0
wideT = torch.empty_like(wide)
wideT[:, :V] = teacher
teacher = wideT[:, :V]
a.teacher, a.teacher_stride = teacher.data_ptr(), teacher.stride(0)
check(lib.tilejit_ce_tvd_reduced_workspace_bytes(ctypes.byref(a),
                                                 ctypes.byref(nbytes)))
ws = torch.empty(nbytes.value, device="cuda", dtype=torch.uint8)
check(lib.tilejit_ce_tvd_reduced_prepare(ctypes.byref(a), None, 0))
stream = torch.cuda.current_stream().cuda_stream


def call():
    check(lib.tilejit_ce_tvd_reduced(ctypes.byref(a),
                                     ctypes.c_void_p(ws.data_ptr()),
                                     nbytes.value, 0, ctypes.c_void_p(stream)))


call()
torch.cuda.synchronize()

# float64 reference: mean over valid rows of CE + TVD, and its gradient.
s = student.double().requires_grad_()
p, q = torch.softmax(s, -1), torch.softmax(teacher.double(), -1)
valid = target != -100
ce = torch.nn.functional.cross_entropy(s, target, ignore_index=-100,
                                       reduction="none")
tvd = 0.5 * (p - q).abs().sum(-1)
ref = (ce + tvd * valid).sum() / valid.sum()
ref.backward()
rel = lambda x, y: ((x - y).norm() / y.norm()).item()
print(f"loss {loss.item():.6f} vs float64 {ref.item():.6f}: relative error "
      f"{abs(loss.item() - ref.item()) / abs(ref.item()):.2e}")
print(f"grad relative Frobenius error {rel(grad.double(), s.grad):.2e}; "
      f"bad_target {bad.item()}")
ok = refused and abs(loss.item() - ref.item()) <= 1e-4 * abs(ref.item()) and \
    rel(grad.double(), s.grad) <= 1e-2 and bad.item() == 0

# The call captured in a CUDA graph on a side stream, replayed twice.
g = torch.cuda.CUDAGraph()
side = torch.cuda.Stream()
with torch.cuda.stream(side):
    stream = side.cuda_stream
    with torch.cuda.graph(g, stream=side):
        call()
first = loss.clone()
for _ in range(2):
    loss.zero_()
    grad.zero_()
    g.replay()
    torch.cuda.synchronize()
    ok = ok and torch.equal(loss, first) and rel(grad.double(), s.grad) <= 1e-2
print("graph replay: loss", loss.item(), "PASS" if ok else "FAIL")
sys.exit(0 if ok else 1)
