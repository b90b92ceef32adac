"""tilejit's losses as PyTorch operators (torch.library custom ops with
fake implementations and autograd: opcheck-clean, no graph break under
torch.compile). CUDA tensors run on torch's current stream; CPU tensors run
tilejit's interpreter (slow: for tests)."""
from .ce_tvd import FusedCETVDLoss, fused_ce_tvd
from .cross_entropy import cross_entropy
from .jsd import jsd, jsd_logits
from .kl_div import kl_div
from .linear_ce import FusedLinearCrossEntropyLoss, linear_cross_entropy

__all__ = ["cross_entropy", "fused_ce_tvd", "FusedCETVDLoss", "jsd",
           "jsd_logits", "kl_div", "linear_cross_entropy",
           "FusedLinearCrossEntropyLoss"]
