"""Names that become paths are one file name; no token reaches a name, a file or a picture."""

from __future__ import annotations

import pytest

from tapt.util.ids import path_component, path_component_problem
from tapt.util.redaction import redact

TOKEN = "hf_" + "Qw3rTy7uIo9pAs1dFg5hJk2lZx8cVb"


@pytest.mark.parametrize("name", ["", " ", ".", "..", "a/b", "../x", "a\\b", "t\x00",
                                  "tab\there", "zero\u200bwidth", TOKEN, f"local__{TOKEN}",
                                  f"run_{TOKEN}"])
def test_a_name_that_is_not_one_file_name_is_refused(name):
    assert path_component_problem(name) is not None
    with pytest.raises(ValueError) as refused:
        path_component(name, "--name")
    assert "Qw3rTy7uIo9" not in str(refused.value)


@pytest.mark.parametrize("name", ["SciFact", "scifact-structured", "d-é", "文書7", "a.b",
                                  "hf_short"])
def test_ordinary_names_pass(name):
    assert path_component(name, "--name") == name


@pytest.mark.parametrize("before", ["local__", "run_", "a-", "/", " ", "1."])
def test_a_token_after_an_underscore_or_a_dash_is_still_a_token(before):
    assert redact(f"{before}{TOKEN}") == f"{before}***"
    assert redact(f"x{TOKEN}") == f"x{TOKEN}"  # inside a word: not a token's start


def test_every_text_of_a_saved_figure_is_redacted(tmp_path):
    """Titles, axis labels, legends and annotations go through redaction before the PNG is
    written (a picture is a file tapt writes)."""
    from matplotlib.text import Text

    from tapt.util.figures import new_figure, save

    figure, ax = new_figure()
    ax.plot([0, 1], [0, 1], label=f"model {TOKEN}")
    ax.set_title(f"/home/u/{TOKEN}/final")
    ax.set_xlabel(TOKEN)
    ax.annotate(f"run_{TOKEN}", (0.5, 0.5))
    ax.legend()
    save(figure, tmp_path / "f.png")
    texts = [text.get_text() for text in figure.findobj(Text)]
    assert any("***" in text for text in texts)
    assert not any("Qw3rTy7uIo9" in text for text in texts)
    assert (tmp_path / "f.png").stat().st_size > 0


def test_a_local_model_is_labelled_by_its_last_two_folders(tmp_path):
    """Tables and pictures of the analyses name a local model without this machine's
    absolute path."""
    from tapt.analysis.embed import labelled

    model = tmp_path / "runs" / "x" / "final"
    model.mkdir(parents=True)
    assert labelled(str(model)) == ("x/final", str(model))
    assert labelled(f"mine={model}") == ("mine", str(model))
    assert labelled("org/model") == ("org/model", "org/model")


@pytest.mark.parametrize("config", ["../other", "a/b", ".."])
def test_a_config_is_one_folder_name(config, tmp_path, capsys):
    from tapt.cli import main

    assert main(["bm25", "--data", str(tmp_path), "--config", config]) == 2
    assert "--config" in capsys.readouterr().out
