"""The labs and their workbooks: the sources hold a stub and a solution; a learner running a
workbook top to bottom is stopped by the check with a helpful message. That `make notebooks`
gives learners the stub without the solution needs the build: test_make_notebooks.py.
"""

from __future__ import annotations

import types

import jupytext
import pytest

from attention_book import notebook_converter
from support import labs

LABS = labs.PAGES
NAMES = labs.NAMES
STUB = labs.STUB


def test_there_are_thirteen_labs():
    assert NAMES == [
        "01_scaled_dot_product_attention",
        "02_multi_head_attention",
        "03_positional_encoding",
        "04_masks",
        "05_encoder_layer",
        "06_pooling_and_search",
        "07_online_softmax",
        "08_kv_cache_decoding",
        "09_grouped_query_attention",
        "10_window_and_document_masks",
        "11_alibi",
        "12_linear_attention_step",
        "13_gated_delta_step",
    ]


@pytest.mark.parametrize("lab", LABS, ids=NAMES)
def test_the_source_has_a_stub_a_check_and_a_solution_of_the_same_function(lab):
    page = labs.read(lab)
    stub = page.stub
    names = page.functions  # one function, or a few (Lab 10 has two)
    assert names and len(names) == stub.count(STUB), "each function of the stub raises"
    solution = "\n".join(page.solution)
    for name in names:
        assert name.startswith("my_"), "the learner's function is called my_<something>"
        assert name in labs.defined_functions(solution) and STUB not in solution
        checks = [
            c for c in page.notebook.cells if c.cell_type == "code" and f"({name})" in c.source
        ]
        assert len(checks) == 2, "one check on the stub (raises) and one after the solution"
        assert "raises-exception" in checks[0].metadata.get("tags", [])
        assert "raises-exception" not in checks[1].metadata.get("tags", [])
    text = lab.read_text()
    assert text.count("```{dropdown} Hint") >= 3
    assert ":class: dropdown" in text.split("{solution-start}", 1)[1].split("\n", 2)[1]


@pytest.mark.parametrize("lab", LABS, ids=NAMES)
def test_a_learner_running_the_workbook_is_stopped_by_the_check_with_advice(lab, capsys):
    """Run the workbook's cells in order, as "Run All" does: the first error is the check's."""
    cells = notebook_converter.workbook_cells(jupytext.read(lab).cells, lab.name)
    namespace: dict = {}
    error = None
    for cell in cells:
        if cell.cell_type != "code":
            continue
        # IPython magics (%xmode) are not Python: the kernel runs them, exec cannot.
        source = "\n".join(
            "" if line.lstrip().startswith("%") else line for line in cell.source.splitlines()
        )
        try:
            exec(compile(source, lab.name, "exec"), namespace)  # noqa: S102 - our pages
        except Exception as exc:  # noqa: BLE001 - the point is which exception comes first
            error = exc
            break
    assert isinstance(error, AssertionError), error
    message = " ".join(str(error).split())
    assert "still the stub" in message and "raise NotImplementedError" in message


def test_a_lab_without_a_solution_is_refused(tmp_path):
    lab = tmp_path / "01_no_solution.md"
    lab.write_text(LABS[0].read_text().split("## Solution", 1)[0])
    with pytest.raises(notebook_converter.ConversionError, match="a lab needs a solution"):
        notebook_converter.workbook_cells(jupytext.read(lab).cells, lab.name)


def test_a_lab_without_a_stub_is_refused(tmp_path):
    lab = tmp_path / "01_no_stub.md"
    lab.write_text(LABS[0].read_text().replace(STUB, "return None  #"))
    with pytest.raises(notebook_converter.ConversionError, match="a lab needs a stub"):
        notebook_converter.workbook_cells(jupytext.read(lab).cells, lab.name)


def test_a_literal_include_with_dedent_reads_as_sphinx_shows_it():
    # Options arrive as text; Sphinx's directive turns :dedent: into an int before reading.
    page = types.SimpleNamespace(folder="notebooks_src/chapters")
    options = {
        "pyobject": "EncoderLayer.decode",
        "start-after": "if self.norm_first:",
        "end-before": "else:",
        "dedent": "12",
    }
    block = notebook_converter.literal_include(page, "../../lib/attention_lab/layers.py", options)
    code = block.split("```python\n", 1)[1].removesuffix("\n```")
    assert code.splitlines()[0].startswith("attended, weights = decode_step(")
    assert all(not line.startswith(" ") for line in code.splitlines())
