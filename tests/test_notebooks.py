"""Every notebook in notebooks/ runs top to bottom without errors (nbclient,
kernel python3, importing the same meshsim as these tests do)."""
import glob
import os

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOTEBOOKS = sorted(glob.glob(os.path.join(REPO, "notebooks", "*.ipynb")))
# Seconds per cell: only a guard against a hung kernel (speed is measured in benchmarks/),
# so generous enough for a loaded machine.
CELL_TIMEOUT = 900


@pytest.mark.parametrize("path", NOTEBOOKS, ids=os.path.basename)
def test_notebook_runs(path, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    import meshsim  # the kernel imports the package this test process imported
    python = os.path.dirname(os.path.dirname(meshsim.__file__))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        p for p in (python, os.environ.get("PYTHONPATH")) if p))
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(nb, kernel_name="python3", timeout=CELL_TIMEOUT,
                                     startup_timeout=CELL_TIMEOUT, resources={"metadata": {"path": os.path.dirname(path)}})
    client.execute()  # raises CellExecutionError naming the cell on the first error
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs
              if o.output_type == "error"]
    assert not errors
