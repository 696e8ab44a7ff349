"""A run folder's lifecycle: take it (check, lock, start, resume, refuse), its layout and
checkpoints, the fingerprint of its inputs, and scratch space beside it."""
