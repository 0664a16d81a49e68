"""Builds npusim's C kernels: each ``npusim/native/<name>.c`` into the extension module
``npusim.native._<name>`` (why C, and how they are loaded: ``npusim/native/__init__.py``). The
rest of the package is described in pyproject.toml."""

from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.errors import CCompilerError, CompileError, ExecError, LinkError, PlatformError

NATIVE = Path(__file__).parent / "npusim" / "native"
KERNELS = sorted(p.stem for p in NATIVE.glob("*.c"))
HEADERS = sorted(f"npusim/native/{p.name}" for p in NATIVE.glob("*.h"))
HINT = ("npusim: building its C kernels failed ({}). The install needs a C compiler (gcc or clang) and "
        "Python's headers, e.g. `apt install gcc python3-dev` on Debian/Ubuntu; then install again.")


class BuildKernels(build_ext):
    """build_ext, ending a failed build with what to install (pip shows the compiler's own output above it)."""

    def run(self):
        try:
            super().run()
        except (CCompilerError, CompileError, ExecError, LinkError, PlatformError, OSError) as exc:
            raise SystemExit(HINT.format(exc)) from None


# -ffp-contract=off: no fused multiply-add, so every float operation rounds as Python's does;
# -O3: 2.4 % fewer instructions per DRAM access than -O2 (callgrind, resnet18's banks run), the same results
setup(ext_modules=[Extension(f"npusim.native._{name}", [f"npusim/native/{name}.c"], depends=HEADERS,
                             extra_compile_args=["-O3", "-ffp-contract=off"])
                   for name in KERNELS],
      cmdclass={"build_ext": BuildKernels})
