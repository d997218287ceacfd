"""``import sparseopt``, OpenBLAS's thread timeout and libgomp's spin count
(sparseopt/__init__.py)."""

import os
import subprocess
import sys

import pytest


def _timeout_after(code, env_value):
    env = dict(os.environ)
    env.pop("OPENBLAS_THREAD_TIMEOUT", None)
    if env_value is not None:
        env["OPENBLAS_THREAD_TIMEOUT"] = env_value
    out = subprocess.run([sys.executable, "-c", code + "\nimport os\n"
                          "print(os.environ.get('OPENBLAS_THREAD_TIMEOUT'))"],
                         env=env, capture_output=True, text=True, check=True)
    return out.stdout.strip()


@pytest.mark.parametrize("user_value, expected", [(None, "4"), ("0", "0"), ("12", "12")])
def test_import_sets_the_timeout_unless_the_user_did(user_value, expected):
    assert _timeout_after("import sparseopt", user_value) == expected


def test_import_after_numpy_leaves_the_environment_alone():
    # OpenBLAS has read its environment already: setting it now would only mislead
    assert _timeout_after("import numpy\nimport sparseopt", None) == "None"


def _spincount_after(code, env_values):
    env = dict(os.environ)
    for key in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY"):
        env.pop(key, None)
    env.update(env_values)
    out = subprocess.run([sys.executable, "-c", code + "\nimport os\n"
                          "print(os.environ.get('GOMP_SPINCOUNT'))"],
                         env=env, capture_output=True, text=True, check=True)
    return out.stdout.strip()


@pytest.mark.parametrize("user_env, expected", [
    ({}, "10000"),
    ({"GOMP_SPINCOUNT": "300000"}, "300000"),  # the user's value is kept
    ({"OMP_WAIT_POLICY": "ACTIVE"}, "None"),  # so is the user's policy
])
def test_import_sets_the_openmp_spin_count_unless_the_user_chose(user_env, expected):
    assert _spincount_after("import sparseopt", user_env) == expected


def test_import_after_numpy_leaves_the_spin_count_alone():
    assert _spincount_after("import numpy\nimport sparseopt", {}) == "None"
