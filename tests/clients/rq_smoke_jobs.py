"""Job functions for rq_smoke.py: RQ workers import a job's function by
its dotted path (rq_smoke_jobs.add), so they live in a module of their own
next to the script (on sys.path, as the script's own folder is)."""

from rq import get_current_job


def add(a, b):
    return a + b


def shout(text, suffix="!"):
    job = get_current_job()
    job.meta["shouted"] = text
    job.save_meta()
    return text.upper() + suffix


def divide(a, b):
    return a / b


def flaky(counter):
    """Fails on its first run and succeeds on the next (the count of runs
    is kept in the server, since each run is a forked work horse)."""
    runs = get_current_job().connection.incr(counter)
    if runs == 1:
        raise RuntimeError("first run fails")
    return {"runs": runs}


def total(*ids):
    """A job depending on others: sums their return values."""
    job = get_current_job()
    return sum(job.fetch(i, connection=job.connection).return_value() for i in ids)
