"""Which checkpoint a crashed run resumes from."""

from __future__ import annotations

import shutil

from tapt.run_folder.layout import RunDir, mark_complete


def test_resume_skips_a_checkpoint_killed_mid_save(tmp_path):
    """Only a checkpoint with its completion marker is whole: one killed before the marker
    was written (its trainer state there or not) is skipped."""
    run = RunDir(tmp_path)
    for step, complete in ((3, True), (6, True), (9, False), (12, False)):
        folder = run.checkpoints / f"checkpoint-{step}"
        folder.mkdir(parents=True)
        if complete or step == 12:
            (folder / "trainer_state.json").write_text("{}")
        if complete:
            mark_complete(folder, step)
    (run.checkpoints / "checkpoint-notes").mkdir()
    assert run.last_checkpoint() == str(run.checkpoints / "checkpoint-6")
    assert run.incomplete_checkpoints() == [run.checkpoints / "checkpoint-9",
                                            run.checkpoints / "checkpoint-12"]


def test_no_checkpoint_means_a_fresh_start(tmp_path):
    assert RunDir(tmp_path).last_checkpoint() is None
    (tmp_path / "checkpoints" / "checkpoint-2").mkdir(parents=True)
    assert RunDir(tmp_path).last_checkpoint() is None


def test_a_checkpoint_marker_records_content_digests_and_other_markers_are_incomplete(
        tmp_path):
    import json

    from tapt.run_folder.layout import CHECKPOINT_MARKER
    from tapt.util.digests import file_record

    run = RunDir(tmp_path)
    folder = run.checkpoints / "checkpoint-2"
    folder.mkdir(parents=True)
    (folder / "trainer_state.json").write_text("{}")
    (folder / "optimizer.pt").write_bytes(b"\x00" * 100)
    mark_complete(folder, 2)
    marker = json.loads((folder / CHECKPOINT_MARKER).read_text())
    assert marker["files"] == {name: file_record(folder / name)
                               for name in ("optimizer.pt", "trainer_state.json")}
    assert run.last_checkpoint() == str(folder)
    (folder / "optimizer.pt").write_bytes(b"\x01" * 100)  # same size, other content
    assert run.incomplete_checkpoints() == [folder] and run.last_checkpoint() is None
    # A module's subfolder (2_Dense/, 1_Pooling/) is recorded and checked too.
    (folder / "2_Dense").mkdir()
    (folder / "2_Dense" / "model.safetensors").write_bytes(b"\x02" * 64)
    mark_complete(folder, 2)
    assert "2_Dense/model.safetensors" in json.loads((folder / CHECKPOINT_MARKER).read_text())[
        "files"]
    assert run.last_checkpoint() == str(folder)
    (folder / "2_Dense" / "model.safetensors").write_bytes(b"\x03" * 64)
    assert run.last_checkpoint() is None
    (folder / "2_Dense" / "model.safetensors").write_bytes(b"\x02" * 64)
    marker = json.loads((folder / CHECKPOINT_MARKER).read_text())
    marker["files"]["../elsewhere.pt"] = marker["files"]["optimizer.pt"]  # not this folder's
    (folder.parent / "elsewhere.pt").write_bytes((folder / "optimizer.pt").read_bytes())
    (folder / CHECKPOINT_MARKER).write_text(json.dumps(marker))
    assert run.last_checkpoint() is None  # though the file there matches its record
    (folder.parent / "elsewhere.pt").unlink()
    shutil.rmtree(folder / "2_Dense")
    mark_complete(folder, 2)
    assert run.last_checkpoint() == str(folder)
    # A marker whose records are sizes, not digest records, or that records no files, does
    # not make the checkpoint whole, though every size matches.
    for marker in ({"step": 2, "files": {"optimizer.pt": 100, "trainer_state.json": 2}},
                   {"step": 2, "files": {}}, {"step": 2}, [2]):
        (folder / CHECKPOINT_MARKER).write_text(json.dumps(marker))
        assert run.incomplete_checkpoints() == [folder] and run.last_checkpoint() is None
