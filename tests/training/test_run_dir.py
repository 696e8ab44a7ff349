"""Which checkpoint a crashed run resumes from."""

from __future__ import annotations

from tapt.training.run_dir import RunDir


def test_resume_skips_a_checkpoint_killed_mid_save(tmp_path):
    run = RunDir(tmp_path)
    for step, complete in ((3, True), (6, True), (9, False)):
        folder = run.checkpoints / f"checkpoint-{step}"
        folder.mkdir(parents=True)
        if complete:
            (folder / "trainer_state.json").write_text("{}")
    (run.checkpoints / "checkpoint-notes").mkdir()
    assert run.last_checkpoint() == str(run.checkpoints / "checkpoint-6")


def test_no_checkpoint_means_a_fresh_start(tmp_path):
    assert RunDir(tmp_path).last_checkpoint() is None
    (tmp_path / "checkpoints" / "checkpoint-2").mkdir(parents=True)
    assert RunDir(tmp_path).last_checkpoint() is None
