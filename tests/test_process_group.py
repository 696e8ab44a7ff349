"""tapt's one answer to "is this the main process" (:func:`tapt.util.process_group.is_main_process`)."""

from __future__ import annotations

from tapt.util.process_group import is_main_process


def test_a_single_process_is_the_main_one_whatever_rank_the_environment_holds(monkeypatch):
    """A stray ``RANK`` outside a launcher must not silence a command or skip its run
    folder: without ``WORLD_SIZE`` > 1 the process is the main one."""
    monkeypatch.setenv("RANK", "1")
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert is_main_process()
    monkeypatch.setenv("WORLD_SIZE", "1")
    assert is_main_process()


def test_under_a_launcher_rank_zero_alone_is_the_main_process(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    assert not is_main_process()
    monkeypatch.setenv("RANK", "0")
    assert is_main_process()
