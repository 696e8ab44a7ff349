"""Scratch folders for training (tapt.run_folder.scratch): made fresh, removed on leaving even
when training fails, and a folder a killed process left behind removed by the next one."""

from __future__ import annotations

import logging
import os
import subprocess
import sys

import pytest

from tapt.run_folder.scratch import _host, remove_stale, scratch_folder


def dead_pid() -> int:
    """The id of a process that has ended."""
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    return int(done.stdout)


def test_a_folder_is_new_and_gone_after_an_error(tmp_path):
    with pytest.raises(RuntimeError, match="training failed"), \
            scratch_folder("weak-pairs", tmp_path) as folder:
        assert folder.parent == tmp_path and list(folder.iterdir()) == []
        assert folder.name.startswith(f"weak-pairs-{_host()}-{os.getpid()}-")
        (folder / "data.arrow").write_bytes(b"x" * 100)
        raise RuntimeError("training failed")
    assert not folder.exists()


def test_only_folders_of_ended_processes_of_this_host_are_removed(tmp_path, caplog):
    ended = tmp_path / f"weak-pairs-{_host()}-{dead_pid()}-abc"
    running = tmp_path / f"weak-pairs-{_host()}-{os.getpid()}-def"
    other_host = tmp_path / f"weak-pairs-{_host()}x-{dead_pid()}-ghi"
    other_kind = tmp_path / f"other-{_host()}-{dead_pid()}-jkl"
    for folder in (ended, running, other_host, other_kind):
        folder.mkdir()
        (folder / "data.arrow").write_bytes(b"x")
    with caplog.at_level(logging.INFO, logger="tapt"), \
            scratch_folder("weak-pairs", tmp_path) as folder:
        assert not ended.exists()
        assert running.exists() and other_host.exists() and other_kind.exists()
    assert "has ended" in caplog.text and ended.name in caplog.text
    assert remove_stale(tmp_path, "weak-pairs") == [] and not folder.exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_an_unwritable_cache_is_refused_naming_it_and_the_variable(tmp_path):
    locked = tmp_path / "cache"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        with pytest.raises(PermissionError, match="TAPT_CACHE_DIR") as caught, \
                scratch_folder("weak-pairs", locked / "scratch"):
            pass
        assert str(locked) in str(caught.value)
    finally:
        locked.chmod(0o700)


def test_a_file_where_the_cache_should_be_is_refused_naming_it(tmp_path):
    in_the_way = tmp_path / "cache"
    in_the_way.write_text("not a folder")
    with pytest.raises(NotADirectoryError, match="TAPT_CACHE_DIR") as caught, \
            scratch_folder("weak-pairs", in_the_way / "scratch"):
        pass
    assert str(in_the_way) in str(caught.value)


def test_listed_folders_say_whose_they_are_and_prune_removes_only_the_left(
        tmp_path, monkeypatch, capsys):
    from tapt.cli import main
    from tapt.run_folder.scratch import list_scratch

    monkeypatch.setenv("TAPT_CACHE_DIR", str(tmp_path / "cache"))
    root = tmp_path / "cache" / "scratch"
    ended = root / f"weak-pairs-{_host()}-{dead_pid()}-abc"
    running = root / f"weak-pairs-{_host()}-{os.getpid()}-def"
    other_host = root / f"weak-pairs-{_host()}x-{dead_pid()}-ghi"
    for folder in (ended, running, other_host):
        (folder / "part").mkdir(parents=True)
        (folder / "part" / "data.arrow").write_bytes(b"x" * 1000)
    (root / "notes.txt").write_text("the user's")  # not tapt's: never listed or removed
    (root / "weak-pairs-backup").mkdir()
    states = {f.path: (f.state, f.bytes) for f in list_scratch()}
    assert states == {ended: ("left", 1000), running: ("in use", 1000),
                      other_host: ("other host", 1000)}
    folders = ["--cache-dir", str(tmp_path / "e"), "--corpus-cache", str(tmp_path / "c")]
    assert main(["cache", "ls", *folders]) == 0
    listed = " ".join(capsys.readouterr().out.split())
    assert ended.name in listed and "0 model keys, 0 corpora, 3 scratch folders" in listed
    assert main(["cache", "prune", *folders, "--older-than-days", "30"]) == 0
    assert "deleted 0 model keys, 0 corpora, 1 scratch folders" in \
        " ".join(capsys.readouterr().out.split())
    assert not ended.exists() and running.exists() and other_host.exists()
    assert (root / "notes.txt").read_text() == "the user's"
    assert (root / "weak-pairs-backup").is_dir()


def test_an_unreadable_scratch_root_still_lists_the_other_caches(tmp_path, monkeypatch,
                                                                 caplog):
    from pathlib import Path

    from tapt.cli import main
    from tapt.run_folder.scratch import list_scratch

    monkeypatch.setenv("TAPT_CACHE_DIR", str(tmp_path / "cache"))
    root = tmp_path / "cache" / "scratch"
    root.mkdir(parents=True)
    original = Path.iterdir

    def refused(self):
        if self == root:
            raise PermissionError(13, "Permission denied", str(self))
        return original(self)
    monkeypatch.setattr(Path, "iterdir", refused)  # (chmod does not stop root, who runs CI)
    with caplog.at_level(logging.WARNING, logger="tapt"):
        assert list_scratch() == []
    assert str(root) in caplog.text and "Permission denied" in caplog.text
    folders = ["--cache-dir", str(tmp_path / "e"), "--corpus-cache", str(tmp_path / "c")]
    assert main(["cache", "ls", *folders]) == 0


def test_prune_names_the_left_folders_it_could_not_remove(tmp_path, monkeypatch, capsys):
    import shutil

    from tapt.cli import main

    monkeypatch.setenv("TAPT_CACHE_DIR", str(tmp_path / "cache"))
    ended = tmp_path / "cache" / "scratch" / f"weak-pairs-{_host()}-{dead_pid()}-abc"
    ended.mkdir(parents=True)
    monkeypatch.setattr(shutil, "rmtree", lambda *args, **kwargs: None)  # e.g. another
    folders = ["--cache-dir", str(tmp_path / "e"), "--corpus-cache", str(tmp_path / "c")]
    assert main(["cache", "prune", *folders, "--older-than-days", "30"]) == 0  # user's
    said = " ".join(capsys.readouterr().out.split())
    assert "could not remove 1 scratch folder(s)" in said and ended.name in said
    assert "deleted 0 model keys, 0 corpora, 0 scratch folders" in said
