"""Iterative linear solvers written once in terms of backend operations: conjugate gradient (plain, preconditioned,
adaptive), BiCGStab and BiCGStab(l), as `Backend.linear_solve` and its siblings run them.

The step functions take the state as a dict of natives, the operator, an inner product and a division that gives 0
for 0 / 0; they are also the steps of the math layer's `solve_linear`, which runs them on its own state layout.
Vectors are laid out `(batch, values of one system)`, inner products and other scalars `(batch, 1)`, so that they
broadcast. Each batch entry stops on its own: one that converged or diverged keeps its state while others go on.
"""

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from ._dtype import DType

DIVERGENCE_GROWTH = 1e5
"""A squared residual this many times the initial one, after 8 iterations, counts as diverged (as phiml)."""

_INT32 = DType(int, 32)


class SolveResult(NamedTuple):
    """What a backend's linear solve returns, with the fields of phiml's `SolveResult`.

    With one row of `max_iter` the arrays have the batch axis first; with several rows (checkpoints) a new first
    axis lists the state at each checkpoint.
    """

    method: str
    x: Any  # (batch, vector)
    residual: Any  # (batch, vector): y - A x
    iterations: Any  # (batch,), int32
    function_evaluations: Any  # (batch,), int32
    converged: Any  # (batch,), bool
    diverged: Any  # (batch,), bool
    message: list  # a str per batch entry


def cg_step(operator: Callable, s: dict, dot: Callable, div: Callable, precondition: Callable | None = None) -> dict:
    """One conjugate gradient step (Hestenes and Stiefel): along the direction, then a new conjugate one.

    With `precondition` (an approximation of the inverse operator) the step is the preconditioned one and `rsq`
    holds `<r, precondition(r)>`, the measure phiml's preconditioned CG stops on.
    """
    image = operator(s['direction'])
    alpha = div(s['rsq'], dot(s['direction'], image))
    residual = s['residual'] - alpha * image
    preconditioned = residual if precondition is None else precondition(residual)
    rsq = dot(residual, preconditioned)
    direction = preconditioned + div(rsq, s['rsq']) * s['direction']
    return {'x': s['x'] + alpha * s['direction'], 'residual': residual, 'direction': direction, 'rsq': rsq,
            'evaluations': 1}


def adaptive_cg_step(operator: Callable, s: dict, dot: Callable, div: Callable) -> dict:
    """One step of the conjugate gradient form that measures its step against the residual itself (Hestenes
    and Stiefel's variant, as phiml's 'CG-adaptive'): the step is `<d, r> / <d, A d>` and the next direction is
    the residual made conjugate to `d` alone, `r - (<r, A d> / <d, A d>) d`. For a symmetric matrix it takes the
    steps of CG; unlike CG it also settles many systems that are not quite symmetric (upwind advection)."""
    curvature = dot(s['direction'], s['image'])
    alpha = div(dot(s['direction'], s['residual']), curvature)
    residual = s['residual'] - alpha * s['image']
    direction = residual - div(dot(residual, s['image']), curvature) * s['direction']
    return {'x': s['x'] + alpha * s['direction'], 'residual': residual, 'direction': direction,
            'image': operator(direction), 'rsq': dot(residual, residual), 'evaluations': 1}


def bicgstab_step(operator: Callable, s: dict, dot: Callable, div: Callable) -> dict:
    """One step of BiCGStab (van der Vorst): a BiCG step, then a minimal-residual step along `A s`."""
    rho = dot(s['shadow'], s['residual'])
    beta = div(rho, s['rho']) * div(s['alpha'], s['omega'])
    p = s['residual'] + beta * (s['p'] - s['omega'] * s['v'])
    v = operator(p)
    alpha = div(rho, dot(s['shadow'], v))
    half = s['residual'] - alpha * v
    t = operator(half)
    omega = div(dot(t, half), dot(t, t))
    residual = half - omega * t
    return {'x': s['x'] + alpha * p + omega * half, 'residual': residual, 'shadow': s['shadow'], 'p': p, 'v': v,
            'rho': rho, 'alpha': alpha, 'omega': omega, 'rsq': dot(residual, residual), 'evaluations': 2}


def bicgstab_l_step(order: int) -> Callable:
    """The step of BiCGStab(l) (Sleijpen and Fokkema) for `order = l >= 2`: `l` BiCG steps, then a minimal-residual
    polynomial of degree `l` (by modified Gram-Schmidt), which copes with complex spectra where BiCGStab stagnates.

    The state holds `x`, `residual`, `u` (the last search direction), `shadow` (the fixed shadow residual) and the
    scalars `rho`, `alpha`, `omega` (starting at 1, 0, 1 with `u = 0`); a step costs `2 l` operator evaluations.
    """
    def step(operator: Callable, s: dict, dot: Callable, div: Callable) -> dict:
        shadow, alpha, x = s['shadow'], s['alpha'], s['x']
        rho = -s['omega'] * s['rho']
        r, u = [s['residual']], [s['u']]
        for j in range(order):  # the BiCG part: r[i], u[i] are A^i applied to the residual and the direction
            rho_next = dot(shadow, r[j])
            beta = alpha * div(rho_next, rho)
            rho = rho_next
            u = [r[i] - beta * u[i] for i in range(j + 1)]
            u.append(operator(u[j]))
            alpha = div(rho, dot(shadow, u[j + 1]))
            r = [r[i] - alpha * u[i + 1] for i in range(j + 1)]
            r.append(operator(r[j]))
            x = x + alpha * u[0]
        tau, sigma, gamma_r = {}, [None] * (order + 1), [None] * (order + 1)
        for j in range(1, order + 1):  # the minimal-residual part: r[1:] made orthogonal
            for i in range(1, j):
                tau[i, j] = div(dot(r[j], r[i]), sigma[i])
                r[j] = r[j] - tau[i, j] * r[i]
            sigma[j] = dot(r[j], r[j])
            gamma_r[j] = div(dot(r[0], r[j]), sigma[j])
        gamma = [None] * (order + 1)
        gamma[order] = gamma_r[order]
        for j in range(order - 1, 0, -1):
            gamma[j] = gamma_r[j] - sum(tau[j, i] * gamma[i] for i in range(j + 1, order + 1))
        x = x + gamma[1] * r[0]
        residual = r[0] - gamma_r[order] * r[order]
        direction = u[0] - gamma[order] * u[order]
        for j in range(1, order):
            direction = direction - gamma[j] * u[j]
            x = x + (gamma[j + 1] + sum(tau[j, i] * gamma[i + 1] for i in range(j + 1, order))) * r[j]
            residual = residual - gamma_r[j] * r[j]
        return {'x': x, 'residual': residual, 'u': direction, 'shadow': shadow, 'rho': rho, 'alpha': alpha,
                'omega': gamma[order], 'rsq': dot(residual, residual), 'evaluations': 2 * order}
    return step


def _preconditioner(pre: Any) -> Callable | None:
    """`pre` as a function of a `(batch, vector)` native: phiml's `Preconditioner` objects offer `apply`."""
    if pre is None or callable(pre):
        return pre
    if callable(getattr(pre, 'apply', None)):
        return pre.apply
    raise TypeError(f"pre must be None, a function of the residual or an object with an 'apply' method, "
                    f"got {type(pre).__name__}")


def _iteration_limits(max_iter: Any) -> tuple[np.ndarray, int | list[int]]:
    """The per-entry limits `(checkpoints, batch)` and what `while_loop` takes: the largest, or the checkpoints."""
    limits = np.asarray(max_iter)
    if limits.ndim == 0:
        limits = limits.reshape(1, 1)
    elif limits.ndim == 1:
        limits = limits[None, :]
    if limits.ndim != 2 or limits.dtype.kind not in 'iu' or limits.size == 0:
        raise ValueError(f"max_iter must hold integers laid out (checkpoints, batch), got {max_iter!r}")
    if limits.shape[0] == 1:
        return limits, int(limits.max())
    if not np.all(limits == limits[:, :1]):
        raise ValueError(f"With several checkpoints, max_iter must be equal for all batch entries, got {limits}")
    return limits, [int(c) for c in limits[:, 0]]


def iterative_solve(b: Any, method: str, lin: Any, y: Any, x0: Any, rtol: Any, atol: Any, max_iter: Any,
                    pre: Any, order: int = 1) -> SolveResult:
    """Runs `method` ('CG', 'CG-adaptive' or 'biCG-stab' of polynomial `order`) on `b` for `lin(x) = y`; see
    `Backend.linear_solve`.

    A batch entry has converged when `|y - lin(x)|^2 <= max(rtol^2 * reference, atol^2)`, the reference being the
    initial squared residual for 'CG' (its preconditioned measure with `pre`) and `|y|^2` for the others.
    With `pre`, 'CG-adaptive' runs the preconditioned CG, as phiml does (a preconditioner from the right would make
    the operator unsymmetric, which costs adaptive CG many iterations); 'biCG-stab' takes it from the right: it
    solves `lin(pre(u)) = y - lin(x0)` for `u` and returns `x = x0 + pre(u)`, whose residual is that system's.
    """
    precondition = _preconditioner(pre)
    if method == 'CG-adaptive' and precondition is not None:
        method = 'CG'
    y, x0 = b.auto_cast(b.to_float(y), b.to_float(x0))
    dtype = b.dtype(y)
    batch = b.determine_size([y, x0], 0)
    size = b.staticshape(y)[1]
    y, x0 = (v if b.staticshape(v)[0] == batch else b.tile(v, (batch, 1)) for v in (y, x0))
    limits, loop_limit = _iteration_limits(max_iter)
    if limits.shape[1] not in (1, batch):
        raise ValueError(f"max_iter has {limits.shape[1]} batch entries but the system {batch}")

    def per_entry(value: Any, value_dtype: DType) -> Any:
        return b.reshape(b.cast(b.as_tensor(value), value_dtype), (-1, 1))

    def apply(vector: Any) -> Any:
        image = b.linear(lin, vector)
        return image if b.dtype(image) == dtype else b.cast(image, dtype)

    def dot(u: Any, v: Any) -> Any:
        return b.sum(u * v, -1, True)

    operator, y_norm = apply, dot(y, y)
    right = precondition is not None and method == 'biCG-stab'
    if right:  # x = x0 + pre(u) with lin(pre(u)) = r0
        start = x0
        operator = lambda u: apply(precondition(u))  # noqa: E731
        y, x0 = y - apply(x0), b.zeros_like(x0)
    r0 = y - apply(x0)
    evaluations = 1
    if method == 'CG':
        direction = r0 if precondition is None else precondition(r0)
        state = {'x': x0, 'residual': r0, 'direction': direction, 'rsq': dot(r0, direction)}
        reference = state['rsq']
        step = cg_step if precondition is None else lambda *a: cg_step(*a, precondition=precondition)
    elif method == 'CG-adaptive':
        state = {'x': x0, 'residual': r0, 'direction': r0, 'image': operator(r0), 'rsq': dot(r0, r0)}
        reference, step, evaluations = y_norm, adaptive_cg_step, 2
    elif method == 'biCG-stab' and order == 1:
        one, zero = b.ones((batch, 1), dtype), b.zeros((batch, size), dtype)
        state = {'x': x0, 'residual': r0, 'shadow': r0, 'p': zero, 'v': zero, 'rho': one, 'alpha': one,
                 'omega': one, 'rsq': dot(r0, r0)}
        reference, step = y_norm, bicgstab_step
    elif method == 'biCG-stab' and order >= 2:
        one = b.ones((batch, 1), dtype)
        state = {'x': x0, 'residual': r0, 'u': b.zeros((batch, size), dtype), 'shadow': r0, 'rho': one,
                 'alpha': one * 0, 'omega': one, 'rsq': dot(r0, r0)}
        reference, step = y_norm, bicgstab_l_step(order)
    else:
        raise ValueError(f"iterative_solve takes 'CG', 'CG-adaptive' or 'biCG-stab' of an order >= 1, got {method!r} "
                         f"of order {order!r}")
    bound = b.maximum(per_entry(rtol, dtype) ** 2 * reference, per_entry(atol, dtype) ** 2)
    initial = state['rsq']
    limit = per_entry(limits[-1], _INT32)

    def check(iterations: Any, rsq: Any) -> dict:
        converged = rsq <= bound
        diverged = ~b.isfinite(rsq) | ((b.divide_no_nan(rsq, initial) > DIVERGENCE_GROWTH) & (iterations >= 8))
        return {'continue': ~converged & ~diverged & (iterations < limit), 'converged': converged,
                'diverged': diverged}
    iterations = b.zeros((batch, 1), _INT32)
    state.update(iterations=iterations, evaluations=iterations + evaluations, **check(iterations, state['rsq']))
    names = ['continue', *(n for n in state if n != 'continue')]

    def body(*values: Any) -> tuple:
        s = dict(zip(names, values, strict=True))
        active = s['continue']
        new = step(operator, s, dot, b.divide_no_nan)
        count = b.cast(active, _INT32)
        iterations, evaluations = s['iterations'] + count, s['evaluations'] + count * new.pop('evaluations')
        flags = check(iterations, new['rsq'])
        new = {k: b.where(active, v, s[k]) for k, v in {**new, **flags}.items() if k != 'continue'}
        new.update({'continue': flags['continue'], 'iterations': iterations, 'evaluations': evaluations})
        return tuple(new[n] if b.dtype(new[n]) == b.dtype(s[n]) else b.cast(new[n], b.dtype(s[n])) for n in names)
    final = dict(zip(names, b.while_loop(body, tuple(state[n] for n in names), loop_limit), strict=True))
    x = final['x']
    if right:
        x = start + (b.stack([precondition(v) for v in b.unstack(x)]) if isinstance(loop_limit, list)
                     else precondition(x))
    scalars = {n: final[n][..., 0] for n in ('iterations', 'evaluations', 'converged', 'diverged')}
    suffix = ' with preconditioner' if precondition is not None else ''
    name = f'{method}({order})' if method == 'biCG-stab' and order != 1 else method
    return SolveResult(f'lazyphi {name} ({b.name}){suffix}', x, final['residual'], scalars['iterations'],
                       scalars['evaluations'], scalars['converged'], scalars['diverged'],
                       _messages(b, method, scalars, batch))


def _messages(b: Any, method: str, final: dict, batch: int) -> list[str]:
    """A message per batch entry (of the last checkpoint); empty strings where the values are traced."""
    if not all(b.is_available(final[n]) for n in ('iterations', 'converged', 'diverged')):
        return [''] * batch
    iterations, converged, diverged = (np.reshape(b.numpy(final[n]), (-1, batch))[-1]
                                       for n in ('iterations', 'converged', 'diverged'))
    return [f'{method} diverged within {i} iterations' if d else f'Converged within {i} iterations' if c
            else f'{method} did not converge within {i} iterations'
            for i, c, d in zip(iterations, converged, diverged, strict=True)]


def method_of(method: str) -> tuple[str, int | None]:
    """The solver `linear_solve` runs for `method` and the polynomial order for BiCGStab."""
    if method in ('auto', 'CG-adaptive'):
        return 'CG-adaptive', None
    if method == 'CG':
        return 'CG', None
    if method in ('biCG', 'biCG-stab(0)'):
        return 'biCG-stab', 0
    if method == 'biCG-stab':
        return 'biCG-stab', 1
    if method.startswith('biCG-stab(') and method.endswith(')') and method[10:-1].isdigit():
        return 'biCG-stab', int(method[10:-1])
    raise ValueError(f"linear_solve method must be 'auto', 'CG', 'CG-adaptive', 'biCG-stab' or 'biCG-stab(l)' for "
                     f"l >= 1, got {method!r}")

