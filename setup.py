"""Build the Cython twins, each into the package that owns it (SPEC §2):

    _native/tracker.pyx (+ its .pxi parts)  ->  sharegroup.tracker._native
    _native/records.pyx                     ->  persister._native_records
    _native/record_scan.pyx                 ->  sharegroup.topics._record_scan

`SHAREGROUP_PUREPYTHON=1` skips the extension build (the pure twins need none). A failing native build
is an error, never a silent fallback (`sharegroup._twins` is the one switch that chooses at run time).
"""

import glob
import os

from setuptools import Extension, setup

NATIVE_MODULES = {
    "tracker.pyx": "sharegroup.tracker._native",
    "records.pyx": "persister._native_records",
    "record_scan.pyx": "sharegroup.topics._record_scan",
}

ext_modules = []
if os.environ.get("SHAREGROUP_PUREPYTHON") != "1":
    from Cython.Build import cythonize

    sources = sorted(os.path.basename(path) for path in glob.glob(os.path.join("_native", "*.pyx")))
    unmapped = sorted(set(sources) - set(NATIVE_MODULES))
    if unmapped:
        raise SystemExit(f"setup.py: no owner package for {unmapped}: add them to NATIVE_MODULES")
    extensions = [
        Extension(NATIVE_MODULES[src], [os.path.join("_native", src)], extra_compile_args=["-O3"])
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
