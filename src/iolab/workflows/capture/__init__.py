"""Capture an application's block I/O, describe it, replay it elsewhere, fit a fio job to it.

``tracefs`` records a block device's requests from the kernel's ``block:block_rq_issue`` and
``block:block_rq_complete`` tracepoints (a private ftrace instance, filtered by the device's
dev_t); ``trace`` holds the result as columns and stores it compactly; ``fingerprint`` is a pure
function of a trace (sizes, mix, randomness, depth, skew, flushes); ``record`` stores a capture
as a Run of origin ``capture``; ``replay`` turns a capture into fio iologs and an ordinary
Suite (one fio job per I/O size class); ``fit`` writes a fio job that reproduces a fingerprint.

blktrace's relay files are refused under kernel lockdown (integrity mode) while tracefs works,
so tracefs is the one capture path: it exists on every kernel with ftrace and block tracepoints.
"""
