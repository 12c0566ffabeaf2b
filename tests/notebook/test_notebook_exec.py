"""examples/notebook.ipynb runs headless (nbclient) and its outputs hold the widgets: a widget view,
the widget state with the recording's payload, and the static HTML fallback."""
from __future__ import annotations

import json
import pathlib
import shutil

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("anywidget")

NOTEBOOK = pathlib.Path(__file__).resolve().parents[2] / "examples" / "notebook.ipynb"
VIEW = "application/vnd.jupyter.widget-view+json"
STATE = "application/vnd.jupyter.widget-state+json"


@pytest.mark.slow
def test_example_notebook_runs_and_shows_the_widgets(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    for var in ("JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR", "IPYTHONDIR"):
        monkeypatch.setenv(var, str(tmp_path / var.lower()))
    shutil.copy(NOTEBOOK, tmp_path / "notebook.ipynb")
    nb = nbformat.read(tmp_path / "notebook.ipynb", as_version=4)
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3", store_widget_state=True,
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()

    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    views = [o for o in outputs if VIEW in o.get("data", {})]
    assert len(views) == 3  # show(), diff(), show(tab="fusions")
    for o in views:
        html = o["data"]["text/html"]
        assert "tv-static" in html and "<script" not in html
    assert "fused into" in views[1]["data"]["text/html"]  # the claim -> fuse diff, drawn statically
    assert "fusion diagram" in views[2]["data"]["text/html"]

    state = nb.metadata["widgets"][STATE]["state"]
    ids = [o["data"][VIEW]["model_id"] for o in views]
    models = [state[i]["state"] for i in ids]
    first, diff, fusions = models
    assert first["data"]["kind"] == "recording" and first["chain"] == "forward"
    chain = next(c for c in first["data"]["graphs"][0]["chains"] if c["kind"] == "forward")
    names = [p["name"] for p in chain["passes"]]
    # the notebook stepped the first widget to the fusion pass, diffed against the pass before
    assert names[first["pass_index"]] == "fuse" and names[first["compare_index"]] == names[names.index("fuse") - 1]
    assert diff["data"]["kind"] == "passes" and diff["data"]["diff"]["counts"]["fused-into"] > 0
    assert fusions["tab"] == "fusions" and chain["diagram"]["svg"]
    kernels = first["data"]["graphs"][0]["kernels"]
    assert {k["chain"] for k in kernels} >= {"forward", "backward"}
    assert all(k["timing"] and k["timing"]["calls"] >= 3 for k in kernels)  # profiled in the notebook
    json.dumps(first["data"])
