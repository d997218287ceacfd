"""sparseopt.simd.wide_vectors: the LLVM attribute reaches the function, and on AVX-512 CPUs
its loops use 512-bit registers with the same results. sparseopt.simd.inline_in_llvm: the
callee is marked alwaysinline, and a loop that calls it is still vectorized."""

import re

import numpy as np
import pytest
from numba import njit

from sparseopt.simd import PREFER_512, avx512, inline_in_llvm, wide_vectors


@njit(inline="always")
def _body(x, out):
    for i in range(x.shape[0]):
        v = abs(x[i])
        out[i] = v * (1.0 + v) - 0.5 * x[i]  # no branch or division: LLVM vectorizes it


def _loop(x, out):
    _body(x, out)


def _wide_loop(x, out):
    wide_vectors()
    _body(x, out)


def _compiled(fn):
    """A fresh compilation (one loaded from Numba's cache shows no IR or assembly)."""
    jitted = njit(fn)
    x = np.linspace(-2.0, 2.0, 1001)
    out = np.empty_like(x)
    jitted(x, out)
    return jitted, x, out


def test_attribute_is_in_the_llvm_ir():
    """Fails if llvmlite stops writing the string attribute into the function's definition
    (then the kernels would silently lose their 512-bit loops)."""
    jitted, _, _ = _compiled(_wide_loop)
    ir = "\n".join(jitted.inspect_llvm().values())
    # LLVM prints string attributes in a group: define ... @<name>(...) ... #N {; the
    # function itself (not its CPython and cfunc wrappers) is @_ZN<module><name>...
    group = re.search(r"^define [^@]*@_ZN\d+test_simd\d+_wide_loop.*\s#(\d+)\s*\{$", ir,
                      re.MULTILINE)
    assert group, "the function has no attribute group"
    attrs = re.search(rf"^attributes #{group.group(1)} = \{{(.*)\}}$", ir, re.MULTILINE)
    assert attrs and PREFER_512 in attrs.group(1), attrs


def test_same_results_as_without():
    """The vector width changes which instructions run, not what each lane computes."""
    _, x, wide = _compiled(_wide_loop)
    _, _, plain = _compiled(_loop)
    np.testing.assert_array_equal(wide.view(np.uint64), plain.view(np.uint64))


@pytest.mark.skipif(not avx512(), reason="needs a CPU with AVX-512")
def test_loop_uses_512_bit_registers():
    """Fails if LLVM does not honour the attribute: then the loop has no zmm register."""
    jitted, _, _ = _compiled(_wide_loop)
    asm = "\n".join(jitted.inspect_asm().values())
    assert re.search(r"%zmm\d", asm), "no 512-bit register in the loop"


def test_plain_python_call_does_nothing():
    """Kernels stay callable without the JIT (``py_func``, ``NUMBA_DISABLE_JIT=1``)."""
    assert wide_vectors() is None
    x = np.linspace(-2.0, 2.0, 11)
    out = np.empty_like(x)
    _wide_loop(x, out)  # the plain function: _body is jitted, wide_vectors() is Python
    np.testing.assert_array_equal(out, np.abs(x) * (1.0 + np.abs(x)) - 0.5 * x)


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
