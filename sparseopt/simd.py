"""LLVM inlining for the Numba kernels: :func:`inline_in_llvm`.

``inline_in_llvm()``, called first in a small jitted helper, marks it ``alwaysinline``: LLVM
inlines it into every jitted caller when it links them, before its loop vectorizer runs, so
a loop that calls it vectorizes as if its body were written out. Numba's own
``inline="always"`` reaches the same code by inlining at Numba's IR level, which re-types
the helper at every call site; with nested helpers that made the 2:4 kernel compile for
minutes (``docs/prox.md``). ``tests/test_simd.py`` checks the attribute, the inlining and
the vectorized loop.
"""

from __future__ import annotations

from numba import types
from numba.extending import intrinsic, overload

__all__ = ["inline_in_llvm"]


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
