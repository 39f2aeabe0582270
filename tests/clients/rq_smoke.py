"""RQ (Redis Queue) against a running strata-server, used as applications
use it: jobs enqueued (plain, with keyword arguments, depending on other
jobs, scheduled for later, retried after a failure, failing for good), a
forking burst Worker runs them, and their statuses, results (kept in a
stream per job in RQ 2) and registries are checked.

Run by crates/strata-server/tests/client_libraries.rs with the server's
port as the only argument, with RQ installed (pip install rq==2.12.0).
Each check exits non-zero with "FAILED: ..." on a wrong answer; the last
line printed is "ok <number of checks>". A watchdog ends the program if it
runs for longer than 60 s.
"""

import os
import sys
import threading
import time
from datetime import timedelta

import redis
from rq import Queue, Retry, Worker
from rq.job import JobStatus
from rq.registry import (
    DeferredJobRegistry,
    FailedJobRegistry,
    FinishedJobRegistry,
    ScheduledJobRegistry,
    StartedJobRegistry,
)
from rq.results import Result

import rq_smoke_jobs as jobs

port = int(sys.argv[1])
checks = 0


def check(condition, what):
    global checks
    if not condition:
        print("FAILED: " + what, flush=True)
        os._exit(1)
    checks += 1


def watchdog():
    print("FAILED: timed out after 60 s with %d checks done" % checks, flush=True)
    os._exit(1)


timer = threading.Timer(60, watchdog)
timer.daemon = True
timer.start()

conn = redis.Redis(host="127.0.0.1", port=port, socket_timeout=20)
conn.flushall()
queue = Queue("smoke", connection=conn)


def burst(with_scheduler=False):
    # The worker logs the tracebacks of the failing jobs (divide, and the
    # first run of flaky): those are expected.
    worker = Worker([queue], connection=conn)
    return worker.work(burst=True, with_scheduler=with_scheduler, logging_level="WARNING")


# Enqueued jobs wait in the queue until a worker runs.
sums = [queue.enqueue(jobs.add, i, 10 * i) for i in range(1, 4)]
shouted = queue.enqueue(jobs.shout, "rq", suffix="?", job_id="shout-job")
dependent = queue.enqueue(jobs.total, *[job.id for job in sums], depends_on=sums)
failing = queue.enqueue(jobs.divide, 1, 0)
retried = queue.enqueue(jobs.flaky, "flaky-runs", retry=Retry(max=2))
scheduled = queue.enqueue_in(timedelta(milliseconds=300), jobs.add, 100, 200)

check(queue.count == 6, "queue length %d" % queue.count)
check(sums[0].get_status() == JobStatus.QUEUED, "a new job is queued")
check(shouted.id == "shout-job", "a job with a chosen id")
check(dependent.get_status() == JobStatus.DEFERRED, "a job waiting on others is deferred")
check(dependent.id in DeferredJobRegistry(queue=queue).get_job_ids(), "the deferred registry")
check(scheduled.get_status() == JobStatus.SCHEDULED, "a job for later is scheduled")
check(scheduled.id in ScheduledJobRegistry(queue=queue).get_job_ids(), "the scheduled registry")
check(set(queue.job_ids) == {job.id for job in sums + [shouted, failing, retried]},
      "queue.job_ids " + repr(queue.job_ids))

# A forking burst worker runs everything queued, then stops.
check(burst(), "the burst worker ran jobs")
check(queue.count == 0, "the queue is empty after the burst")

for i, job in enumerate(sums, start=1):
    check(job.get_status() == JobStatus.FINISHED, "job %d status %s" % (i, job.get_status()))
    check(job.return_value() == 11 * i, "job %d result %r" % (i, job.return_value()))
check(shouted.return_value() == "RQ?", "keyword arguments: %r" % shouted.return_value())
shouted.refresh()
check(shouted.meta.get("shouted") == "rq", "job meta saved by the job: %r" % shouted.meta)
check(dependent.get_status() == JobStatus.FINISHED, "the dependent job ran once the others finished")
check(dependent.return_value() == 66, "the dependent job's result %r" % dependent.return_value())

latest = sums[0].latest_result()
check(latest is not None and latest.type == Result.Type.SUCCESSFUL and latest.return_value == 11,
      "latest_result %r" % latest)

# The failing job ends in the failed registry with its traceback.
check(failing.get_status() == JobStatus.FAILED, "the failing job's status %s" % failing.get_status())
failed_ids = FailedJobRegistry(queue=queue).get_job_ids()
check(failed_ids == [failing.id], "the failed registry holds the failing job: %r" % failed_ids)
check("ZeroDivisionError" in (failing.exc_info or ""), "the failing job's exc_info")
failed_result = failing.latest_result()
check(failed_result.type == Result.Type.FAILED and "ZeroDivisionError" in failed_result.exc_string,
      "the failed result")

# The flaky job failed once, was queued again and then succeeded.
check(retried.get_status() == JobStatus.FINISHED, "the retried job's status %s" % retried.get_status())
check(retried.return_value() == {"runs": 2}, "the retried job's result %r" % retried.return_value())
check(conn.get("flaky-runs") == b"2", "the flaky job ran twice")
retried.refresh()
check(retried.retries_left == 1, "retries left %r" % retried.retries_left)
kinds = [result.type for result in retried.results()]
check(kinds == [Result.Type.SUCCESSFUL], "the retried job's results %r" % kinds)

# The scheduled job: a burst worker with its scheduler enqueues it once due.
check(scheduled.get_status() == JobStatus.SCHEDULED, "still scheduled before it is due")
time.sleep(0.4)
check(burst(with_scheduler=True), "the scheduler's burst worker ran the job")
check(scheduled.get_status() == JobStatus.FINISHED, "the scheduled job ran: %s" % scheduled.get_status())
check(scheduled.return_value() == 300, "the scheduled job's result")
check(ScheduledJobRegistry(queue=queue).count == 0, "the scheduled registry is empty")

finished = set(FinishedJobRegistry(queue=queue).get_job_ids())
expected = {job.id for job in sums + [shouted, dependent, retried, scheduled]}
check(finished == expected, "the finished registry %r" % sorted(finished))
check(StartedJobRegistry(queue=queue).count == 0, "nothing left started")
check(Worker.count(connection=conn) == 0, "burst workers unregistered")

# Requeueing a failed job runs it again (and it fails again).
FailedJobRegistry(queue=queue).requeue(failing.id)
check(queue.job_ids == [failing.id], "the failed job requeued")
burst()
check(failing.get_status() == JobStatus.FAILED and len(failing.results()) == 2, "failed again after a requeue")

conn.close()
print("ok", checks, flush=True)
