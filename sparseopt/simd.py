"""LLVM attributes for the Numba kernels: 512-bit vectors (:func:`wide_vectors`) and
inlining by LLVM (:func:`inline_in_llvm`).

LLVM tunes code for Intel's AVX-512 server CPUs (Skylake-X to Emerald Rapids) to prefer
256-bit vectors (its ``prefer-256-bit`` tuning: 512-bit instructions lower the clock, which
does not pay in code that uses them rarely). The passes of the 2:4 prox kernel over a chunk of
256 groups (``sparseopt.prox.alm``) are compute-bound floating-point loops, where a 512-bit
instruction does twice the work: on an Emerald Rapids machine the kernel took 13-22% less time
with them, with the same bits (``docs/benchmarks.md``; each lane computes what it computed
before, and no floating-point sum runs across lanes).

``wide_vectors()``, called in a jitted function, sets that function's LLVM attribute
``"prefer-vector-width"="512"`` (what clang's ``-mprefer-vector-width=512`` sets), so that
LLVM's loop vectorizer may use 512-bit registers there. It changes nothing on CPUs without
AVX-512 (their widest vectors remain the limit) and nothing in other functions, other
packages' Numba code included: unlike ``NUMBA_CPU_FEATURES=-prefer-256-bit``, which applies
to every function the process compiles and is part of the key of Numba's on-disk cache.

llvmlite's :class:`~llvmlite.ir.FunctionAttributes` accepts enum attributes only (its ``add``
checks the name against a list); a string attribute is put into the underlying set, which
llvmlite writes into the function's definition as it is. ``tests/test_simd.py`` checks that
the attribute reaches the LLVM IR, and on an AVX-512 host that the loop uses 512-bit
registers, so a change in llvmlite shows as a failing test, not as a silently slower kernel.

``inline_in_llvm()``, called first in a small jitted helper, marks it ``alwaysinline``: LLVM
inlines it into every jitted caller when it links them, before its loop vectorizer runs, so
a loop that calls it vectorizes as if its body were written out. Numba's own
``inline="always"`` reaches the same code by inlining at Numba's IR level, which re-types
the helper at every call site; with nested helpers that made the 2:4 kernel compile for
over two minutes (``docs/prox.md``). ``tests/test_simd.py`` checks the attribute, the
inlining and the vectorized loop.
"""

from __future__ import annotations

from numba import types
from numba.extending import intrinsic, overload

__all__ = ["wide_vectors", "inline_in_llvm", "PREFER_512", "avx512"]

#: The LLVM function attribute that :func:`wide_vectors` sets.
PREFER_512 = '"prefer-vector-width"="512"'


def wide_vectors():
    """Let LLVM vectorize the calling jitted function with 512-bit vectors (module docstring).

    Call it once, first in the function; it computes nothing at run time. Inlined callees
    (``inline="always"``) are part of the caller and get the caller's setting. Called from
    plain Python (``NUMBA_DISABLE_JIT=1``, a kernel's ``py_func``) it does nothing.
    """
    return None


@intrinsic
def _prefer_512(typingctx):
    def codegen(context, builder, signature, args):
        set.add(builder.function.attributes, PREFER_512)  # not FunctionAttributes.add: above
        return context.get_dummy_value()

    return types.void(), codegen


# inlined into the caller at Numba's IR level, so that the attribute lands on the caller
@overload(wide_vectors, inline="always")
def _wide_vectors_jit():
    return lambda: _prefer_512()


def inline_in_llvm():
    """Mark the calling jitted function ``alwaysinline`` for LLVM (see the module docstring).

    Call it first in a small function that vectorized loops call: LLVM inlines it into
    them before its loop vectorizer runs, as Numba's ``inline="always"`` does at Numba's IR
    level, but without re-typing the callee at every call site (which made the 2:4 kernel
    take minutes to compile). Called from plain Python it does nothing.
    """
    return None


@intrinsic
def _always_inline(typingctx):
    def codegen(context, builder, signature, args):
        builder.function.attributes.add("alwaysinline")
        return context.get_dummy_value()

    return types.void(), codegen


@overload(inline_in_llvm, inline="always")
def _inline_in_llvm_jit():
    return lambda: _always_inline()


def avx512() -> bool:
    """Whether Numba compiles for a CPU with AVX-512F (``NUMBA_CPU_FEATURES`` if set, else the
    host's features): where :func:`wide_vectors` can take effect."""
    import llvmlite.binding as ll
    from numba.core import config

    features = config.CPU_FEATURES  # as Numba's codegen: the setting if any, else the host's
    if features is None:
        features = ll.get_host_cpu_features().flatten()
    return "+avx512f" in features.split(",")
