"""The custom backend as a script (docs/custom-backend.md): register MY with a `Device` call, then run on it.

  python examples/custom_backend/run_my.py      # from the repository root; or with my_backend pip-installed
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # my_backend beside this script

from my_backend.device import MyDevice   # noqa: E402
from refimpl import Tensor               # noqa: E402
from refimpl.device import Device        # noqa: E402

Device._devices["MY"] = MyDevice   # the skeleton's spelling; refimpl's own is Device.register("MY", MyDevice)

print((Tensor([1, 2, 3], device="MY") + 1).tolist())
print((Tensor([1, 2, 3], device="MY") + Tensor([4, 5, 6], device="MY")).tolist())
x = Tensor([[1.0, -2.0], [3.0, 0.5]], device="MY", requires_grad=True)
loss = (x @ x).relu().sum()
loss.backward()
print(loss.item(), x.grad.tolist())
