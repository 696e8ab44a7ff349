"""``--overwrite`` follows one rule in every command that replaces a folder
(:mod:`tapt.util.folder_replace`): only a folder whose record reads back checked and that
holds nothing else is replaced; a symbolic link is refused before any work; once the new
folder is published the command ends as complete, even when Ctrl-C comes then."""

from __future__ import annotations

import json
import os
import shutil
import signal
from pathlib import Path

import pytest

from tapt.serving.export_folder import check_export_output
from tapt.serving.graph import ExportError

AREA = "overwrite safety"


def tree(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (not following links) and its bytes."""
    return {str(path.relative_to(folder)): path.read_bytes()
            for path in sorted(folder.rglob("*")) if path.is_file()}


def message_of(capsys) -> str:
    return " ".join(capsys.readouterr().out.split())


def leftovers(folder: Path) -> list[str]:
    """What a replace leaves beside ``folder``: a staging or an aside folder."""
    return sorted(path.name for path in folder.parent.iterdir()
                  if path.name.startswith(f"{folder.name}.")
                  and (path.name.endswith(".partial") or ".old-" in path.name))


def export(model: Path, output: Path, *extra: str) -> list[str]:
    return ["export", str(model), "--backend", "onnx", "--output", str(output), *extra]


@pytest.fixture(scope="module")
def onnx_export(tiny_bert_path, tmp_path_factory) -> Path:
    """A real ``tapt export --backend onnx`` of the tiny BERT (read-only: copy it)."""
    from tapt.cli import main

    output = tmp_path_factory.mktemp("exports") / "onnx"
    assert main(export(tiny_bert_path, output, "--quiet")) == 0
    return output


@pytest.fixture
def my_export(onnx_export, tmp_path) -> Path:
    return Path(shutil.copytree(onnx_export, tmp_path / "export"))


@pytest.mark.reliability(
    area=AREA, reader="tapt export --overwrite (tapt.util.folder_replace)",
    fault="--output a folder holding only a tapt_export.json of {} beside a user's src/main.py "
          "and notes",
    behaviour="refused before loading (exit 2): the record does not read back checked; every "
              "file stays, nothing is written beside it")
def test_a_folder_with_a_bare_manifest_is_not_replaced(tiny_bert_path, tmp_path, quiet_cli,
                                                       capsys):
    mine = tmp_path / "project"
    (mine / "src").mkdir(parents=True)
    (mine / "src" / "main.py").write_text("print('mine')\n", encoding="utf-8")
    (mine / "notes.md").write_text("# notes\n", encoding="utf-8")
    (mine / "tapt_export.json").write_text("{}", encoding="utf-8")
    before = tree(mine)
    assert quiet_cli.main(export(tiny_bert_path, mine, "--overwrite")) == 2
    message = message_of(capsys)
    assert f"--output {mine}: not a tapt export: its tapt_export.json does not read back" \
        in message, message
    assert tree(mine) == before and leftovers(mine) == []


@pytest.mark.reliability(
    area=AREA, reader="tapt export --overwrite (tapt.util.folder_replace)",
    fault="--output a real tapt export that also holds a user's benchmark results and notes",
    behaviour="refused before loading (exit 2), naming the entries its manifest does not "
              "list; every file stays. The same export without them (README.md and LICENSE "
              "beside it edited) passes the check")
def test_a_real_export_holding_foreign_files_is_not_replaced(my_export, tiny_bert_path,
                                                             quiet_cli, capsys):
    (my_export / "benchmarks").mkdir()
    (my_export / "benchmarks" / "latency.json").write_text("{}", encoding="utf-8")
    (my_export / "notes.md").write_text("measured on the staging box\n", encoding="utf-8")
    before = tree(my_export)
    assert quiet_cli.main(export(tiny_bert_path, my_export, "--overwrite")) == 2
    message = message_of(capsys)
    assert f"--output {my_export}: holds benchmarks, notes.md beside the tapt export its " \
           "tapt_export.json records" in message, message
    assert tree(my_export) == before and leftovers(my_export) == []

    shutil.rmtree(my_export / "benchmarks")
    (my_export / "notes.md").unlink()
    (my_export / "README.md").write_text("# edited card\n", encoding="utf-8")
    (my_export / "LICENSE").write_text("MIT\n", encoding="utf-8")
    check_export_output(my_export, str(tiny_bert_path), overwrite=True)  # replaceable


@pytest.mark.reliability(
    area=AREA, reader="tapt export --overwrite (tapt.util.folder_replace)",
    fault="--output a real tapt export one of whose files was changed since it was written",
    behaviour="refused before loading (exit 2), naming the file: a manifest that does not "
              "check is no proof the folder is tapt's as written")
def test_an_export_whose_manifest_no_longer_checks_is_not_replaced(my_export, tiny_bert_path,
                                                                   tmp_path):
    (my_export / "tokenizer_config.json").write_text("{}", encoding="utf-8")
    with pytest.raises(ExportError) as caught:
        check_export_output(my_export, str(tiny_bert_path), overwrite=True)
    assert "tokenizer_config.json" in str(caught.value)
    assert "not a tapt export" in str(caught.value)


@pytest.mark.reliability(
    area=AREA, reader="tapt export --overwrite (tapt.util.folder_replace)",
    fault="--output a symbolic link to a real tapt export",
    behaviour="refused before loading (exit 2), naming the link and its folder; the link, the "
              "export and the folder around them are unchanged (no OUTPUT.old-PID)")
def test_a_symlinked_output_is_refused_before_any_work(my_export, tiny_bert_path, tmp_path,
                                                       quiet_cli, capsys):
    link = tmp_path / "current"
    link.symlink_to(my_export, target_is_directory=True)
    before = tree(my_export)
    assert quiet_cli.main(export(tiny_bert_path, link, "--overwrite")) == 2
    message = message_of(capsys)
    assert f"--output {link} is a symbolic link (to {my_export})" in message, message
    assert link.is_symlink() and link.resolve() == my_export.resolve()
    assert tree(my_export) == before
    assert leftovers(link) == [] and leftovers(my_export) == []


@pytest.mark.reliability(
    area=AREA, reader="tapt export --overwrite (tapt.util.folder_replace, tapt.cli.main)",
    fault="Ctrl-C (SIGINT) just after the new export is renamed into place, while the old one "
          "is being removed",
    behaviour="the removal finishes, exit 0, one line saying the export is complete and where; "
              "no OUTPUT.old-PID left")
def test_ctrl_c_after_the_export_is_published_ends_complete(my_export, tiny_bert_path,
                                                            quiet_cli, capsys, monkeypatch):
    old_folder = my_export.stat().st_ino
    real_rmtree = shutil.rmtree

    def interrupted_rmtree(path, *args, **kwargs):
        if ".old-" in Path(path).name:  # the replaced export: the new one is in place
            os.kill(os.getpid(), signal.SIGINT)
        return real_rmtree(path, *args, **kwargs)

    monkeypatch.setattr(shutil, "rmtree", interrupted_rmtree)
    code = quiet_cli.main(export(tiny_bert_path, my_export, "--overwrite", "--quiet"))
    message = message_of(capsys)
    assert code == 0, message
    assert f"interrupted after the result was written: {my_export} is complete" in message
    assert leftovers(my_export) == []
    manifest = json.loads((my_export / "tapt_export.json").read_text(encoding="utf-8"))
    assert (my_export / manifest["graph"]).is_file()
    assert my_export.stat().st_ino != old_folder  # the new export (made while the old was)


# ------------------------------------------------------------------ merge and soup exports

@pytest.fixture
def merged(tiny_bert_path, tmp_path, quiet_cli, capsys) -> Path:
    """``tapt merge`` of the tiny BERT with itself (a real merge export)."""
    output = tmp_path / "merged"
    assert quiet_cli.main(["merge", str(tiny_bert_path), str(tiny_bert_path), "--output",
                           str(output)]) == 0, capsys.readouterr().out
    capsys.readouterr()
    return output


def merge(tiny_bert_path: Path, output: Path) -> list[str]:
    return ["merge", str(tiny_bert_path), str(tiny_bert_path), "--output", str(output),
            "--overwrite", "--weights", "0.25", "0.75"]


@pytest.mark.reliability(
    area=AREA, reader="tapt merge / tapt soup --overwrite (tapt.util.folder_replace)",
    fault="--output a real merge export that also holds a user's eval results",
    behaviour="refused before loading (exit 2), naming the file merge.json does not list; "
              "every file stays")
def test_a_merge_holding_a_users_file_is_not_replaced(merged, tiny_bert_path, quiet_cli,
                                                      capsys):
    (merged / "eval-results.json").write_text("{}", encoding="utf-8")
    before = tree(merged)
    assert quiet_cli.main(merge(tiny_bert_path, merged)) == 2
    message = message_of(capsys)
    assert "holds eval-results.json beside the tapt merge its merge.json records" in message
    assert tree(merged) == before and leftovers(merged) == []


@pytest.mark.reliability(
    area=AREA, reader="tapt merge --overwrite (tapt.util.folder_replace)",
    fault="the replaced folder cannot be removed once the new merge is in place (permission)",
    behaviour="exit 0: the merge is published; a warning names the folder left behind")
def test_a_replaced_folder_that_cannot_be_removed_is_a_warning(merged, tiny_bert_path,
                                                               quiet_cli, capsys, caplog,
                                                               monkeypatch):
    real_rmtree = shutil.rmtree

    def refusing_rmtree(path, *args, **kwargs):
        if ".old-" in Path(path).name:
            raise PermissionError(13, "Permission denied", str(path))
        return real_rmtree(path, *args, **kwargs)

    monkeypatch.setattr(shutil, "rmtree", refusing_rmtree)
    with caplog.at_level("WARNING", logger="tapt"):
        code = quiet_cli.main(merge(tiny_bert_path, merged))
    assert code == 0, capsys.readouterr().out
    (left,) = leftovers(merged)
    assert "could not be removed" in caplog.text and left in caplog.text
    record = json.loads((merged / "merge.json").read_text(encoding="utf-8"))
    assert record["weights"] == [0.25, 0.75]


# ------------------------------------------------------------------------ run folders

@pytest.mark.reliability(
    area=AREA, reader="tapt train --overwrite (tapt.run_folder.start)",
    fault="output_dir a symbolic link to a finished tapt run",
    behaviour="refused before data and model load (exit 2), naming the link; the run it "
              "points to is not moved")
def test_a_symlinked_run_folder_is_not_moved_aside(make_recipe, tmp_path, quiet_cli, capsys):
    from tapt.recipe import load_recipe
    from tapt.run_folder import input_fingerprint as fingerprint
    from tapt.run_folder.layout import RunDir, write_recipe

    recipe_file, _ = make_recipe("r")
    finished = tmp_path / "finished"
    link = tmp_path / "latest"
    recipe = load_recipe(recipe_file, [f"output_dir={link}"])
    write_recipe(RunDir(finished), recipe, fingerprint.input_fingerprint(recipe))
    (finished / "final").mkdir()
    link.symlink_to(finished, target_is_directory=True)
    before = tree(finished)
    assert quiet_cli.main(["train", str(recipe_file), f"output_dir={link}",
                           "--overwrite"]) == 2
    message = message_of(capsys)
    assert f"output_dir {link} is a symbolic link (to {finished})" in message, message
    assert link.is_symlink() and tree(finished) == before
    assert not list(tmp_path.glob("*.old-*"))


@pytest.mark.reliability(
    area=AREA, reader="tapt export (tapt.util.files.staging_folder)",
    fault="--output OUT where OUT.partial is a user's folder (a notes file, no tapt claim "
          "beside it)",
    behaviour="refused before writing (exit 2), naming OUT.partial; the user's folder is "
              "untouched and OUT is not created")
def test_a_users_partial_folder_is_not_deleted(tiny_bert_path, tmp_path, quiet_cli, capsys):
    output = tmp_path / "onnx"
    mine = tmp_path / "onnx.partial"
    mine.mkdir()
    (mine / "notes.md").write_text("# my notes\n", encoding="utf-8")
    before = tree(mine)
    assert quiet_cli.main(export(tiny_bert_path, output)) == 2
    message = message_of(capsys)
    assert f"{mine} exists and tapt did not make it" in message, message
    assert tree(mine) == before and not output.exists()


@pytest.mark.reliability(
    area=AREA, reader="tapt export (tapt.util.files.staging_folder)",
    fault="OUT.partial left by an interrupted export (with the claim tapt wrote beside it), "
          "holding a half-written graph",
    behaviour="the leftover is removed and the export completes; neither the staging folder "
              "nor its claim is left beside OUT")
def test_an_interrupted_exports_staging_folder_is_replaced(tiny_bert_path, tmp_path, quiet_cli,
                                                           onnx_export):
    from tapt.util.files import staging_folder

    output = tmp_path / "onnx"
    staging = staging_folder(output)  # what the interrupted export claimed
    staging.mkdir()
    (staging / "model.onnx").write_bytes(b"half a graph")
    assert quiet_cli.main(export(tiny_bert_path, output, "--quiet")) == 0
    assert (output / "model.onnx").read_bytes() == (onnx_export / "model.onnx").read_bytes()
    assert sorted(path.name for path in tmp_path.iterdir()) == ["onnx"]
