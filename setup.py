"""Builds the Python package sluice with the project's CMake (pyproject.toml says why this way).

The extension sluice._sluice is built by CMake (target sluice_python) for the interpreter running
pip, without tests, benchmarks or examples; libsluice.so.0 is copied into the package beside it,
where the extension's RUNPATH ($ORIGIN) finds it. Set CMAKE_BUILD_PARALLEL_LEVEL to choose the
build's parallelism (default: the number of CPUs).
"""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent


def project_version():
    text = (ROOT / "CMakeLists.txt").read_text()
    return re.search(r"project\(sluice VERSION ([0-9.]+)", text).group(1)


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        # SLUICE_PREBUILT: a CMake build folder that already has the extension (target
        # sluice_python), packaged as it is; the install test uses it to check the packaging in
        # seconds (python/tests/pip-install.sh).
        prebuilt = os.environ.get("SLUICE_PREBUILT")
        build = Path(prebuilt).resolve() if prebuilt else Path(self.build_temp).resolve() / "cmake"
        if not prebuilt:
            self.cmake(build)
        built = build / "python" / "sluice"
        module = next(built.glob("_sluice*.so"), None)
        if module is None:
            raise RuntimeError(f"CMake built no extension in {built}: see the configure output above")
        target = Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(module, target)
        libsluice = (build / "src" / "libsluice.so.0").resolve()
        shutil.copy2(libsluice, target.parent / "libsluice.so.0")

    @staticmethod
    def cmake(build):
        subprocess.run(["cmake", "-S", str(ROOT), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release",
                        "-DSLUICE_BUILD_TESTS=OFF", "-DSLUICE_BUILD_BENCH=OFF",
                        "-DSLUICE_BUILD_EXAMPLES=OFF", f"-DSLUICE_PYTHON={sys.executable}"],
                       check=True)
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 1))
        subprocess.run(["cmake", "--build", str(build), "--target", "sluice_python", "-j", jobs],
                       check=True)


setup(
    version=project_version(),
    packages=["sluice"],
    package_dir={"": "python"},
    package_data={"sluice": ["py.typed", "*.pyi"]},
    ext_modules=[Extension("sluice._sluice", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    zip_safe=False,
)
