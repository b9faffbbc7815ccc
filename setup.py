"""Build the Cython tracker from `_native/*.pyx` into modules inside the `sharegroup._native` package.

`SHAREGROUP_PUREPYTHON=1` skips the extension build (the pure twin needs none). A failing native build
is an error, never a silent fallback (SPEC §2).
"""

import glob
import os

from setuptools import Extension, setup

ext_modules = []
if os.environ.get("SHAREGROUP_PUREPYTHON") != "1":
    from Cython.Build import cythonize

    sources = sorted(glob.glob(os.path.join("_native", "*.pyx")))
    extensions = [
        Extension(
            "sharegroup._native." + os.path.splitext(os.path.basename(src))[0],
            [src],
            extra_compile_args=["-O3"],
        )
        for src in sources
    ]
    ext_modules = cythonize(
        extensions,
        language_level=3,
        compiler_directives={
            "boundscheck": False,
            "wraparound": False,
            "cdivision": True,
            "initializedcheck": False,
        },
        quiet=True,
    )

setup(ext_modules=ext_modules)
