"""Analysis reads run directories: it loads without torch or the training code, so a notebook or
a report on a laptop without the training stack's weight stays quick."""

import subprocess
import sys
from pathlib import Path

MODULES = sorted(p.stem for p in (Path(__file__).parents[2] / "analysis").glob("*.py") if p.stem != "__init__")


def test_no_analysis_module_imports_torch_or_marl():
    code = (
        f"import importlib, sys\nfor m in {MODULES!r}: importlib.import_module('analysis.' + m)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'marl', 'transformers')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert len(MODULES) >= 7 and done.stdout.strip() == "[]", done.stdout
