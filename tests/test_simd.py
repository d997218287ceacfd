"""sparseopt.simd.inline_in_llvm: the callee is marked alwaysinline, and a loop that calls it
is still vectorized."""

import re

import numpy as np
from numba import njit

from sparseopt.simd import inline_in_llvm


def _compiled(fn):
    """A fresh compilation (one loaded from Numba's cache shows no IR or assembly)."""
    jitted = njit(fn)
    x = np.linspace(-2.0, 2.0, 1001)
    out = np.empty_like(x)
    jitted(x, out)
    return jitted, x, out


@njit(error_model="numpy")
def _leaf(v, x):
    inline_in_llvm()
    return v * (1.0 + v) - 0.5 * x


def _loop_calling_leaf(x, out):
    for i in range(x.shape[0]):
        out[i] = _leaf(abs(x[i]), x[i])


def test_inline_in_llvm_marks_the_callee_and_keeps_the_loop_vectorized():
    """Fails if the attribute does not reach the callee's definition, or if LLVM leaves the
    call in the loop (then the loop stays scalar: no packed multiply, as in _body's loop)."""
    jitted, x, out = _compiled(_loop_calling_leaf)
    np.testing.assert_array_equal(out, np.abs(x) * (1.0 + np.abs(x)) - 0.5 * x)
    leaf_ir = "\n".join(_leaf.inspect_llvm().values())
    group = re.search(r"^define [^@]*@_ZN\d+test_simd\d+_leaf.*\s#(\d+)\s*\{$", leaf_ir,
                      re.MULTILINE)
    assert group, "the callee has no attribute group"
    attrs = re.search(rf"^attributes #{group.group(1)} = \{{(.*)\}}$", leaf_ir, re.MULTILINE)
    assert attrs and "alwaysinline" in attrs.group(1), attrs
    asm = "\n".join(jitted.inspect_asm().values())
    assert re.search(r"\bv?mulpd\b", asm), "the loop is not vectorized"
    assert not re.search(r"^\s*callq?\s+\S*\d_leafB", asm, re.MULTILINE), "not inlined"
    assert inline_in_llvm() is None  # plain Python: nothing
