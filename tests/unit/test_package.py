import subprocess
import sys

import raims_node


def test_version_cli() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "raims_node", "--version"], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == f"raims {raims_node.__version__}"


def test_root_error_is_exception() -> None:
    assert issubclass(raims_node.RaimsError, Exception)
