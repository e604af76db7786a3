"""Builds the tact package's C extension against libtact.

TACT_PREFIX (default: the build tree next to this folder, ../build, with
../include) says where tact.h and libtact.so are: an install prefix
(PREFIX/include, PREFIX/lib) or a build tree.  `pip install ./python` from
the repository's root after `make build`; docs/python.md.
"""
import os

from setuptools import Extension, setup

here = os.path.dirname(os.path.abspath(__file__))
prefix = os.environ.get("TACT_PREFIX")
inc, lib = os.path.join(here, "..", "include"), os.path.join(here, "..", "build")
if prefix and os.path.exists(os.path.join(prefix, "libtact.so")):
    lib = prefix  # a build tree: the header is this checkout's
elif prefix:
    inc, lib = os.path.join(prefix, "include"), os.path.join(prefix, "lib")  # an install
inc, lib = os.path.abspath(inc), os.path.abspath(lib)

setup(
    name="tact",
    version="0.1.0",
    description="tact's tensors from Python, with the reference's (tinygrad 0.9.2) Tensor API",
    packages=["tact", "tact.nn"],
    ext_modules=[
        Extension(
            "tact._tact",
            sources=["tact/_tact.c"],
            include_dirs=[inc],
            library_dirs=[lib],
            runtime_library_dirs=[lib],
            libraries=["tact"],
            extra_compile_args=["-std=c11", "-Wall", "-Wextra", "-Werror", "-Wno-missing-field-initializers", "-Wno-cast-function-type"],
        )
    ],
)
