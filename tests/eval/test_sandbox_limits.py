"""Sandbox uid slots: one fixed, root-owned place for every scorer, whatever its TMPDIR."""

from __future__ import annotations

import os
import tempfile

import pytest

from eval.sandbox import limits as sandbox_limits
from eval.sandbox.limits import UidSlot, uid_lock_dir

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="uid slots are taken only when scoring as root")


@root_only
def test_two_scorers_with_different_temp_folders_never_share_a_uid(tmp_path, monkeypatch):
    """Per-job TMPDIRs (a batch scheduler) no longer split the slots: the second scorer gets another uid,
    even starting from the same slot (same pid here), so neither's end-of-run kill hits the other."""
    slots = []
    try:
        for job in ("job-a", "job-b"):
            (tmp_path / job).mkdir()
            monkeypatch.setenv("TMPDIR", str(tmp_path / job))
            monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / job))
            slots.append(UidSlot())
        assert slots[0].uid != slots[1].uid
        assert not list(tmp_path.rglob("*.lock")), "slot locks were kept under a temporary folder"
    finally:
        for s in slots:
            s.release()


@root_only
def test_the_slot_folder_is_fixed_and_root_owned(tmp_path, monkeypatch):
    """The same folder whatever TMPDIR says, outside it, owned by root and writable by root only."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    where = uid_lock_dir()
    assert where == sandbox_limits.UID_LOCK_DIR and not str(where).startswith(str(tmp_path))
    st = os.lstat(where)
    assert st.st_uid == 0 and not st.st_mode & 0o022


@root_only
@pytest.mark.parametrize("kind", ["writable by all", "a link"])
def test_a_slot_folder_others_could_tamper_with_is_refused(tmp_path, monkeypatch, kind):
    """A slot folder anyone can write, or a link, could hand two runs one uid: refused with the fix."""
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    where = tmp_path / "slots"
    if kind == "a link":
        where.symlink_to(real)
    else:
        where.mkdir()
        where.chmod(0o777)
    monkeypatch.setattr(sandbox_limits, "UID_LOCK_DIR", where)
    with pytest.raises(OSError, match="owned by root and writable by root only"):
        UidSlot()
