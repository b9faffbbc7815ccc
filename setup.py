"""Build the Cython twins: `_native/*.pyx` into modules inside the `sharegroup._native` package, except
`_native/records.pyx`, the persister's frame codec, which becomes `persister._native_records` (the
persister may import only layer 0 of sharegroup, so its native module lives in its own package).

`SHAREGROUP_PUREPYTHON=1` skips the extension build (the pure twins need none). A failing native build
is an error, never a silent fallback.
"""

import glob
import os

from setuptools import Extension, setup

ext_modules = []
if os.environ.get("SHAREGROUP_PUREPYTHON") != "1":
    from Cython.Build import cythonize

    persister_sources = {os.path.join("_native", "records.pyx"): "persister._native_records"}
    sources = sorted(set(glob.glob(os.path.join("_native", "*.pyx"))) - set(persister_sources))
    extensions = [
        Extension(
            "sharegroup._native." + os.path.splitext(os.path.basename(src))[0],
            [src],
            extra_compile_args=["-O3"],
        )
        for src in sources
    ] + [Extension(name, [src], extra_compile_args=["-O3"]) for src, name in sorted(persister_sources.items())]
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
