"""Claims of prox24-kubler Sec. 4 and Apps. C-D: layer pruning (see theory_checks.claims)."""

from theory_checks.claims import Claim

PAPER = "prox24-kubler"

CLAIMS: list[Claim] = [
    Claim("kubler-toy-greedy", PAPER, "Sec. 4.1",
          "On the toy problem Wanda and SparseGPT end at (0,5,3,0,0,5,5,0).",
          check="layer_toy"),
    Claim("kubler-toy-prox", PAPER, "Sec. 4.1",
          "On the toy problem the 2:4 optimum is (0,5,0,4,0,5,5,0), and prox (+GD) finds it.",
          check="layer_toy"),
]
