"""Writes the L-BFGS trajectories that tests/frontend/lbfgs_test.cpp checks kiln against.

Rerun by hand (needs torch, safetensors and numpy from pip) from the repository root:

    python tests/data/parity/make_lbfgs.py

One lbfgs_<case>.safetensors per case, float64 (so that trajectories agree to ~1e-10 over
several steps rather than drifting with float32 rounding). Keys:
    data.<name>          the problem's fixed tensors
    param.<name>         the parameters before the first step
    step.<k>.loss        0-d: what step k returned (the loss before it)
    step.<k>.<name>      the parameters after step k
    state.func_evals, state.n_iter   0-d: the optimizer's counters after the last step
The metadata holds the torch version and the optimizer's options.
"""

import os

import torch
from safetensors.torch import save_file

OUT_DIR = os.path.dirname(os.path.abspath(__file__))
STEPS = 4


def rosenbrock(params, data):
    (xy,) = params
    return (1 - xy[0]) ** 2 + 100 * (xy[1] - xy[0] ** 2) ** 2


def tanh_regression(params, data):
    w, b, v = params
    return ((torch.tanh(data["x"] @ w + b) @ v - data["y"]) ** 2).mean()


def write_case(name, loss_fn, params, data, options):
    tensors = {f"data.{k}": t.clone() for k, t in data.items()}
    named = dict(zip(["xy"] if len(params) == 1 else ["w", "b", "v"], params))
    for k, p in named.items():
        tensors[f"param.{k}"] = p.detach().clone()
    opt = torch.optim.LBFGS(params, **options)

    def closure():
        opt.zero_grad()
        loss = loss_fn(params, data)
        loss.backward()
        return loss

    for step in range(STEPS):
        tensors[f"step.{step}.loss"] = opt.step(closure).detach().clone()
        for k, p in named.items():
            tensors[f"step.{step}.{k}"] = p.detach().clone()
    state = opt.state[params[0]]
    tensors["state.func_evals"] = torch.tensor(float(state["func_evals"]), dtype=torch.float64)
    tensors["state.n_iter"] = torch.tensor(float(state["n_iter"]), dtype=torch.float64)
    path = os.path.join(OUT_DIR, f"lbfgs_{name}.safetensors")
    save_file({k: v.contiguous() for k, v in tensors.items()}, path,
              metadata={"source": f"torch {torch.__version__}", "options": repr(options)})
    print("wrote", path)


def main():
    torch.manual_seed(0)
    write_case("rosenbrock_wolfe", rosenbrock,
               [torch.tensor([-1.5, 2.0], dtype=torch.float64, requires_grad=True)], {},
               dict(lr=1, max_iter=20, history_size=10, line_search_fn="strong_wolfe"))
    data = {"x": torch.randn(16, 3, dtype=torch.float64), "y": torch.randn(16, dtype=torch.float64)}
    def regression_params():
        g = torch.Generator().manual_seed(1)
        return [torch.randn(3, 4, dtype=torch.float64, generator=g).requires_grad_(),
                torch.zeros(4, dtype=torch.float64, requires_grad=True),
                torch.randn(4, dtype=torch.float64, generator=g).requires_grad_()]
    write_case("regression_fixed_step", tanh_regression, regression_params(), data,
               dict(lr=0.5, max_iter=5, history_size=3))
    write_case("regression_wolfe", tanh_regression, regression_params(), data,
               dict(lr=1, max_iter=6, history_size=3, line_search_fn="strong_wolfe"))


if __name__ == "__main__":
    main()
