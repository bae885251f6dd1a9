"""``attention_lab.book.glue``: myst-nb's glue where it is installed, quiet where it is not."""

from __future__ import annotations

import subprocess
import sys

from support.paths import ROOT

# Run in a fresh interpreter with myst_nb made unimportable, as in a learner's environment.
WITHOUT_MYST_NB = """
import sys
sys.modules["myst_nb"] = None  # `import myst_nb` now raises ImportError
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output
from attention_lab.book.glue import glue
InteractiveShell.instance()
with capture_output() as captured:
    glue("quiet", 3.25, display=False)
    glue("shown", 41.5)
print(len(captured.outputs), captured.outputs[0].data["text/plain"] if captured.outputs else "")
"""


def test_glue_without_myst_nb_drops_quiet_values_and_shows_the_rest():
    result = subprocess.run(
        [sys.executable, "-c", WITHOUT_MYST_NB],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT / "lib"), "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["1", "41.5"]


def test_glue_with_myst_nb_records_the_value_for_the_book():
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    from attention_lab.book.glue import glue

    InteractiveShell.instance()
    try:
        with capture_output() as captured:
            glue("kept", 7, display=False)
    finally:
        InteractiveShell.clear_instance()
    (output,) = captured.outputs
    assert "application/papermill.record/text/plain" in output.data
    assert output.metadata["scrapbook"]["name"] == "kept"
