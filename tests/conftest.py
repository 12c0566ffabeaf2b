import os

# Triton reads this when it is imported: set it before anything can import triton (CPU-only CI runs
# Triton kernels under its interpreter).
os.environ.setdefault("TRITON_INTERPRET", "1")
# The fast CPU path of the default executors runs regions through torch; trying Inductor on hot
# regions costs seconds of C++ compiling per region, so tests opt in (tests/compiler/test_cpu_path.py).
os.environ.setdefault("THUNDERVIS_CPU_INDUCTOR_MIN_US", "off")
# The persistent compile cache would let one test's compile answer another's (a test that patches
# a pass would read the unpatched passes): tests opt in (tests/compiler/test_compile_cache.py).
os.environ.setdefault("THUNDERVIS_COMPILE_CACHE", "off")

import importlib.util  # noqa: E402
import pathlib  # noqa: E402
import sys  # noqa: E402

import pytest  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[1]
_EXAMPLES: dict = {}


def load_example(name: str):
    """Return the module of ``examples/<name>.py`` (examples/ is not a package), loaded once."""
    if name not in _EXAMPLES:
        path = REPO / "examples" / f"{name}.py"
        spec = importlib.util.spec_from_file_location(f"thundervis_examples_{name}", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # registered like any imported module (dataclasses look it up)
        spec.loader.exec_module(module)
        _EXAMPLES[name] = module
    return _EXAMPLES[name]


@pytest.fixture(scope="session")
def example():
    """``example("train_gpt")`` returns that example script as a module (``build``, ``train``...)."""
    return load_example


def _golden_check(directory: pathlib.Path):
    def check(name: str, text: str) -> None:
        path = directory / "golden" / f"{name}.txt"
        if os.environ.get("THUNDERVIS_UPDATE_GOLDEN") == "1":
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            return
        if not path.exists():
            pytest.fail(f"no golden file {path.relative_to(REPO)}; run with THUNDERVIS_UPDATE_GOLDEN=1 to write it")
        expected = path.read_text(encoding="utf-8")
        assert text == expected, (f"{path.relative_to(REPO)} differs; if the change is intended, "
                                  f"rerun with THUNDERVIS_UPDATE_GOLDEN=1 and review the diff")
    return check


@pytest.fixture
def golden(request):
    """``golden(name, text)`` compares ``text`` with ``golden/<name>.txt`` next to the test file;
    ``THUNDERVIS_UPDATE_GOLDEN=1`` (re)writes the file instead."""
    return _golden_check(pathlib.Path(str(request.fspath)).parent)
